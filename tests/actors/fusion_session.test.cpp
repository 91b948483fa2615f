// The fusion pass in a real session (graph/fusion.hpp, actors/master_plan.cpp): a dense layer,
// a logits layer and a convolution layer with their gradients (the hidden layer's backward
// GEMM, ReluGrad and bias gradient fused too) give the same values fused and unfused (session_options::fuse_ops), and the placement log says what fused.
#include "actors/session.hpp"
#include "graph/gradients.hpp"
#include "graph/ops.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace actorflow;

namespace {

constexpr std::uint32_t seed = 2626;

template <class T>
tensor random_tensor(std::mt19937& engine, tensor_shape shape) {
  std::uniform_real_distribution<double> dist{-1.0, 1.0};
  std::vector<T> values(static_cast<std::size_t>(shape.num_elements()));
  for (auto& v : values)
    v = static_cast<T>(dist(engine));
  return tensor::from_vector(values, shape);
}

struct layers_run {
  std::vector<std::vector<double>> values;
  std::vector<std::string> fusion_lines;
};

/// relu(x w + b) w2 + b2 and relu(conv(image, f) + c), summed into a loss, with the gradients
/// for every weight; fetches the loss, both activations and the gradients (b's through an
/// Identity).
template <class T>
layers_run run_layers(bool fuse, bool fetch_matmul = false) {
  graph g;
  auto t = dtype_of<T>();
  auto x = ops::placeholder(g, t, {-1, 4}, "x");
  auto w = ops::placeholder(g, t, {4, 3}, "w");
  auto b = ops::placeholder(g, t, {3}, "b");
  auto w2 = ops::placeholder(g, t, {3, 2}, "w2");
  auto b2 = ops::placeholder(g, t, {2}, "b2");
  auto image = ops::placeholder(g, t, {-1, 6, 6, 2}, "image");
  auto f = ops::placeholder(g, t, {3, 3, 2, 4}, "f");
  auto c = ops::placeholder(g, t, {4}, "c");
  auto mm = ops::matmul(x, w, false, false, "mm");
  auto hidden = ops::relu(ops::add(mm, b, "add"), "hidden");
  auto logits = ops::add(ops::matmul(hidden, w2, false, false, "mm2"), b2, "logits");
  auto conv = ops::relu(ops::add(ops::conv2d(image, f, {2, 2}, "SAME", "conv"), c, "conv_add"),
                        "conv_relu");
  auto loss = ops::add(ops::reduce_sum(ops::square(logits)), ops::reduce_sum(ops::square(conv)),
                       "loss");
  auto grads = gradients({loss}, {w, b, w2, b2, f, c});
  REQUIRE(g.status().ok());
  std::mt19937 engine{seed};
  feed_list feeds{{x, random_tensor<T>(engine, {5, 4})},       {w, random_tensor<T>(engine, {4, 3})},
                  {b, random_tensor<T>(engine, {3})},          {w2, random_tensor<T>(engine, {3, 2})},
                  {b2, random_tensor<T>(engine, {2})},         {image, random_tensor<T>(engine, {2, 6, 6, 2})},
                  {f, random_tensor<T>(engine, {3, 3, 2, 4})}, {c, random_tensor<T>(engine, {4})}};
  std::vector<output> fetches{loss, hidden, logits, conv};
  fetches.insert(fetches.end(), grads.begin(), grads.end());
  // b's gradient through a node of its own: the sum that makes it is then no fetch, and fuses
  // into the backward GEMM's ReluGrad (w's gradient, fetched, keeps the rest unfused).
  fetches[5] = ops::identity(grads[1], "db");
  if (fetch_matmul)
    fetches.push_back(mm);
  session_options options;
  options.fuse_ops = fuse;
  options.inter_op_parallelism_threads = 1;
  options.intra_op_parallelism_threads = 1;
  session s{g, options};
  auto r = s.run(fetches, feeds);
  REQUIRE(r.ok());
  layers_run out;
  for (auto& value : *r)
    out.values.push_back(value.to_vector<double>());
  for (auto& line : s.placement_log())
    if (line.rfind("fused ", 0) == 0)
      out.fusion_lines.push_back(line);
  return out;
}

void require_same(const layers_run& a, const layers_run& b, double tolerance) {
  REQUIRE(a.values.size() == b.values.size());
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    REQUIRE(a.values[i].size() == b.values[i].size());
    for (std::size_t j = 0; j < a.values[i].size(); ++j) {
      INFO("fetch " << i << " element " << j << ", seed " << seed);
      REQUIRE(std::abs(a.values[i][j] - b.values[i][j]) <=
              tolerance * (1.0 + std::abs(b.values[i][j])));
    }
  }
}

bool has_line_starting(const std::vector<std::string>& lines, const std::string& prefix) {
  for (auto& line : lines)
    if (line.rfind(prefix, 0) == 0)
      return true;
  return false;
}

} // namespace

TEST_CASE("dense and convolution layers with their gradients give the same values fused and unfused") {
  auto fused64 = run_layers<double>(true);
  auto plain64 = run_layers<double>(false);
  require_same(fused64, plain64, 1e-12);
  auto fused32 = run_layers<float>(true);
  auto plain32 = run_layers<float>(false);
  require_same(fused32, plain32, 1e-5);
  // float32 fused against the float64 reference.
  require_same(fused32, plain64, 1e-4);

  CHECK(plain64.fusion_lines.empty());
  REQUIRE(fused64.fusion_lines.size() == 4);
  CHECK(has_line_starting(fused64.fusion_lines,
                          "fused hidden = _FusedMatMul(mm, add, hidden) fused_ops=[BiasAdd,Relu] on "));
  CHECK(has_line_starting(fused64.fusion_lines,
                          "fused logits = _FusedMatMul(mm2, logits) fused_ops=[BiasAdd] on "));
  CHECK(has_line_starting(fused64.fusion_lines, "fused conv_relu = _FusedConv2D(conv, conv_add, "
                                                "conv_relu) fused_ops=[BiasAdd,Relu] on "));
  // The hidden layer's backward: the GEMM of its input gradient, the ReluGrad and b's gradient.
  CHECK(has_line_starting(fused64.fusion_lines,
                          "fused gradients/hidden_grad/ReluGrad = _FusedMatMulReluGrad("
                          "gradients/mm2_grad/MatMul, gradients/add_grad/SumToShapeOf_1, "
                          "gradients/hidden_grad/ReluGrad) fused_ops=[ReluGrad,BiasAddGrad] on "));
}

TEST_CASE("a fetched MatMul is not fused away and still gives its value") {
  auto fused = run_layers<double>(true, true);
  auto plain = run_layers<double>(false, true);
  require_same(fused, plain, 1e-12);
  CHECK_FALSE(has_line_starting(fused.fusion_lines, "fused hidden "));
  CHECK(has_line_starting(fused.fusion_lines, "fused logits "));
}

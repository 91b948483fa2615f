// Mixed precision in a real session (session_options::mixed_precision, graph/mixed_precision.hpp):
// the placement log names every contraction computed in bf16, the values stay within bf16's
// rounding of float32, variables-side tensors stay float32, and a bad policy is named.
#include "actors/session.hpp"
#include "graph/gradients.hpp"
#include "graph/ops.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace actorflow;
using Catch::Matchers::Contains;

namespace {

constexpr std::uint32_t seed = 2628;

tensor random_tensor(std::mt19937& engine, tensor_shape shape) {
  std::uniform_real_distribution<float> dist{-1.0f, 1.0f};
  std::vector<float> values(static_cast<std::size_t>(shape.num_elements()));
  for (auto& v : values)
    v = dist(engine);
  return tensor::from_vector(values, shape);
}

struct dense_run {
  result<std::vector<tensor>> values = std::vector<tensor>{};
  std::vector<std::string> log;
};

/// relu(x w + b) summed squared, with the gradients for w and b, under `policy`.
dense_run run_dense(const std::string& policy) {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {-1, 48}, "x");
  auto w = ops::placeholder(g, dtype::float32, {48, 24}, "w");
  auto b = ops::placeholder(g, dtype::float32, {24}, "b");
  auto hidden = ops::relu(ops::add(ops::matmul(x, w, false, false, "mm"), b, "add"), "hidden");
  auto loss = ops::reduce_sum(ops::square(hidden), {}, false, "loss");
  auto grads = gradients({loss}, {w, b});
  REQUIRE(g.status().ok());
  std::mt19937 engine{seed};
  feed_list feeds{{x, random_tensor(engine, {64, 48})},
                  {w, random_tensor(engine, {48, 24})},
                  {b, random_tensor(engine, {24})}};
  session_options options;
  options.mixed_precision = policy;
  options.log_device_placement = true;
  options.inter_op_parallelism_threads = 1;
  options.intra_op_parallelism_threads = 1;
  session s{g, options};
  dense_run out;
  out.values = s.run({loss, grads[0], grads[1]}, feeds);
  out.log = s.placement_log();
  return out;
}

std::vector<std::string> mixed_lines(const std::vector<std::string>& log) {
  std::vector<std::string> lines;
  for (auto& line : log)
    if (line.rfind("mixed_precision ", 0) == 0)
      lines.push_back(line);
  return lines;
}

} // namespace

TEST_CASE("a bfloat16 session says which contractions run in bf16 and stays within bf16's "
          "rounding of float32") {
  auto plain = run_dense("float32");
  auto mixed = run_dense("bfloat16");
  REQUIRE(plain.values.ok());
  REQUIRE(mixed.values.ok());
  CHECK(mixed_lines(plain.log).empty());
  auto lines = mixed_lines(mixed.log);
  INFO("seed " << seed);
  // The fused forward layer and the gradient's MatMul for w (x's gradient is pruned).
  REQUIRE_FALSE(lines.empty());
  CHECK_THAT(lines[0], Contains("(_FusedMatMul) = bfloat16 on ") && Contains("device:CPU:0"));
  CHECK(std::any_of(lines.begin(), lines.end(),
                    [](auto& l) { return l.find("(MatMul) = bfloat16") != std::string::npos; }));
  for (std::size_t i = 0; i < plain.values->size(); ++i) {
    const auto& expected = (*plain.values)[i];
    const auto& got = (*mixed.values)[i];
    REQUIRE(got.type() == dtype::float32); // the graph's tensors stay float32
    auto e = expected.to_vector<double>(), v = got.to_vector<double>();
    double scale = 0;
    for (auto value : e)
      scale = std::max(scale, std::abs(value));
    // bf16 keeps 8 bits: a sum of products is off by at most 2^-8 of its terms' magnitude.
    for (std::size_t j = 0; j < e.size(); ++j) {
      INFO("fetch " << i << " element " << j << ": float32 " << e[j] << ", bf16 " << v[j]);
      CHECK(std::abs(v[j] - e[j]) <= 2e-2 * scale);
    }
  }
}

TEST_CASE("a session with an unknown mixed-precision policy fails naming it") {
  auto bad = run_dense("float16");
  REQUIRE_FALSE(bad.values.ok());
  CHECK_THAT(bad.values.error().message(),
             Contains("session_options::mixed_precision") && Contains("'float16'"));
}

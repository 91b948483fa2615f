// _FusedMatMul and _FusedConv2D (graph/fusion.hpp) against float64 references of
// MatMul/Conv2D + bias (+ Relu), _FusedMatMulReluGrad against MatMul + ReluGrad (+ the bias
// gradient), and all against the unfused kernels run one after another. CPU
// only (the fused kernels exist only there), so not tagged [kernels].
#include "graph/conv_geometry.hpp"
#include "support/kernel_test_util.hpp"

#include <algorithm>

using namespace actorflow;
using namespace actorflow::testing;

namespace {

constexpr std::uint32_t seed = 2626;

/// ref[r, j] += bias[j], then max(., 0) when `relu`.
void add_bias(std::vector<double>& ref, const std::vector<double>& bias, bool relu) {
  auto n = bias.size();
  for (std::size_t i = 0; i < ref.size(); ++i) {
    ref[i] += bias[i % n];
    if (relu)
      ref[i] = std::max(ref[i], 0.0);
  }
}

/// The unfused chain on the same kernels: contraction, Add, then Relu when asked.
tensor unfused(kernel_test_env& env, const node& contraction, const tensor& a, const tensor& b,
               const tensor& bias, bool relu) {
  auto t = contraction.kernel_type;
  auto y = env.run_ok(contraction, {a, b});
  y = env.run_ok(make_node("Add", "add", t), {y, bias});
  return relu ? env.run_ok(make_node("Relu", "relu", t), {y}) : y;
}

template <class T>
void check_fused_matmul(std::int64_t m, std::int64_t k, std::int64_t n, bool ta, bool tb,
                        bool relu, double tolerance) {
  INFO("dtype " << to_string(dtype_of<T>()) << ", m=" << m << " k=" << k << " n=" << n
                << ", transpose_a=" << ta << ", transpose_b=" << tb << ", relu=" << relu
                << ", seed " << seed);
  kernel_test_env env;
  test_random random{seed};
  auto a = random.uniform<T>(ta ? tensor_shape{k, m} : tensor_shape{m, k});
  auto b = random.uniform<T>(tb ? tensor_shape{n, k} : tensor_shape{k, n});
  auto bias = random.uniform<T>(tensor_shape{n});
  auto va = as_doubles(a), vb = as_doubles(b);
  std::vector<double> ref(static_cast<std::size_t>(m * n), 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t p = 0; p < k; ++p)
        s += (ta ? va[p * m + i] : va[i * k + p]) * (tb ? vb[j * k + p] : vb[p * n + j]);
      ref[static_cast<std::size_t>(i * n + j)] = s;
    }
  add_bias(ref, as_doubles(bias), relu);
  std::map<std::string, attr_value> attrs{{"transpose_a", ta}, {"transpose_b", tb}};
  auto fused_attrs = attrs;
  fused_attrs["fused_ops"] = std::string{relu ? "BiasAdd,Relu" : "BiasAdd"};
  auto fused = env.run_ok(make_node("_FusedMatMul", "fused", dtype_of<T>(), fused_attrs),
                          {a, b, bias});
  require_near(fused, tensor_shape{m, n}, ref, tolerance);
  auto chain = unfused(env, make_node("MatMul", "mm", dtype_of<T>(), attrs), a, b, bias, relu);
  require_near(fused, tensor_shape{m, n}, as_doubles(chain), tolerance);
}

/// _FusedMatMulReluGrad: dz = (op(a) op(b)) where y > 0, else 0, and with `bias_grad` the
/// column sums of dz as output 1.
template <class T>
void check_fused_matmul_relu_grad(std::int64_t m, std::int64_t k, std::int64_t n, bool ta,
                                  bool tb, bool bias_grad, double tolerance) {
  INFO("dtype " << to_string(dtype_of<T>()) << ", m=" << m << " k=" << k << " n=" << n
                << ", transpose_a=" << ta << ", transpose_b=" << tb << ", bias_grad=" << bias_grad
                << ", seed " << seed);
  kernel_test_env env;
  test_random random{seed};
  auto a = random.uniform<T>(ta ? tensor_shape{k, m} : tensor_shape{m, k});
  auto b = random.uniform<T>(tb ? tensor_shape{n, k} : tensor_shape{k, n});
  // A Relu's output: about half the entries zero.
  auto y = random.uniform<T>(tensor_shape{m, n});
  for (std::int64_t i = 0; i < m * n; ++i)
    y.template data<T>()[i] = std::max(y.template data<T>()[i], T{0});
  auto va = as_doubles(a), vb = as_doubles(b), vy = as_doubles(y);
  std::vector<double> ref(static_cast<std::size_t>(m * n), 0.0);
  std::vector<double> sums(static_cast<std::size_t>(n), 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t p = 0; p < k; ++p)
        s += (ta ? va[p * m + i] : va[i * k + p]) * (tb ? vb[j * k + p] : vb[p * n + j]);
      auto at = static_cast<std::size_t>(i * n + j);
      ref[at] = vy[at] > 0 ? s : 0.0;
      sums[static_cast<std::size_t>(j)] += ref[at];
    }
  std::map<std::string, attr_value> attrs{{"transpose_a", ta}, {"transpose_b", tb}};
  auto fused_attrs = attrs;
  fused_attrs["fused_ops"] = std::string{bias_grad ? "ReluGrad,BiasAddGrad" : "ReluGrad"};
  auto fused = env.run(make_node("_FusedMatMulReluGrad", "fused", dtype_of<T>(), fused_attrs),
                       {a, b, y});
  REQUIRE(fused.status.ok());
  REQUIRE(fused.outputs.size() == (bias_grad ? 2u : 1u));
  require_near(fused.outputs[0], tensor_shape{m, n}, ref, tolerance);
  auto t = dtype_of<T>();
  auto product = env.run_ok(make_node("MatMul", "mm", t, attrs), {a, b});
  auto dz = env.run_ok(make_node("ReluGrad", "relu_grad", t), {product, y});
  require_near(fused.outputs[0], tensor_shape{m, n}, as_doubles(dz), tolerance);
  if (bias_grad) {
    // Sums over m rows: the tolerance grows with them.
    require_near(fused.outputs[1], tensor_shape{n}, sums, tolerance * static_cast<double>(m));
    auto bias = random.uniform<T>(tensor_shape{n});
    auto unfused_sums = env.run_ok(make_node("SumToShapeOf", "sum", t), {dz, bias});
    require_near(fused.outputs[1], tensor_shape{n}, as_doubles(unfused_sums),
                 tolerance * static_cast<double>(m));
  }
}

struct conv_case {
  std::vector<std::int64_t> x, filter;
  std::int64_t stride;
  std::string padding;
};

template <class T>
void check_fused_conv(const conv_case& c, bool relu, double tolerance) {
  INFO("dtype " << to_string(dtype_of<T>()) << ", x " << tensor_shape{c.x}.to_string()
                << " filter " << tensor_shape{c.filter}.to_string() << " stride " << c.stride
                << " " << c.padding << ", relu=" << relu << ", seed " << seed);
  kernel_test_env env;
  test_random random{seed};
  auto x = random.uniform<T>(tensor_shape{c.x});
  auto filter = random.uniform<T>(tensor_shape{c.filter});
  auto bias = random.uniform<T>(tensor_shape{c.filter[3]});
  auto g = *conv_geometry::make(c.x[1], c.x[2], c.filter[0], c.filter[1], c.stride, c.stride,
                                c.padding);
  auto batch = c.x[0], ci = c.x[3], co = c.filter[3];
  tensor_shape out_shape{batch, g.out_h, g.out_w, co};
  auto vx = as_doubles(x), vf = as_doubles(filter);
  std::vector<double> ref(static_cast<std::size_t>(out_shape.num_elements()), 0.0);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t oh = 0; oh < g.out_h; ++oh)
      for (std::int64_t ow = 0; ow < g.out_w; ++ow)
        for (std::int64_t kh = 0; kh < g.k_h; ++kh)
          for (std::int64_t kw = 0; kw < g.k_w; ++kw) {
            auto ih = oh * g.stride_h - g.pad_top + kh;
            auto iw = ow * g.stride_w - g.pad_left + kw;
            if (ih < 0 || ih >= g.in_h || iw < 0 || iw >= g.in_w)
              continue;
            for (std::int64_t k = 0; k < ci; ++k)
              for (std::int64_t o = 0; o < co; ++o)
                ref[static_cast<std::size_t>(((b * g.out_h + oh) * g.out_w + ow) * co + o)] +=
                  vx[static_cast<std::size_t>(((b * g.in_h + ih) * g.in_w + iw) * ci + k)] *
                  vf[static_cast<std::size_t>(((kh * g.k_w + kw) * ci + k) * co + o)];
          }
  add_bias(ref, as_doubles(bias), relu);
  std::map<std::string, attr_value> attrs{
    {"strides", std::vector<std::int64_t>{1, c.stride, c.stride, 1}}, {"padding", c.padding}};
  auto fused_attrs = attrs;
  fused_attrs["fused_ops"] = std::string{relu ? "BiasAdd,Relu" : "BiasAdd"};
  auto fused = env.run_ok(make_node("_FusedConv2D", "fused", dtype_of<T>(), fused_attrs),
                          {x, filter, bias});
  require_near(fused, out_shape, ref, tolerance);
  auto chain = unfused(env, make_node("Conv2D", "conv", dtype_of<T>(), attrs), x, filter, bias, relu);
  require_near(fused, out_shape, as_doubles(chain), tolerance);
}

} // namespace

TEST_CASE("_FusedMatMul matches MatMul plus bias and Relu for every transpose combination",
          "[fusion][matmul]") {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool relu : {false, true}) {
        check_fused_matmul<float>(5, 7, 3, ta, tb, relu, 1e-5);
        check_fused_matmul<double>(17, 9, 11, ta, tb, relu, 1e-12);
      }
  // More rows than one epilogue block (256 KiB of output): the GEMM runs block by block.
  for (bool ta : {false, true}) {
    check_fused_matmul<float>(2100, 8, 40, ta, false, true, 1e-5);
    check_fused_matmul<double>(1100, 6, 40, ta, true, true, 1e-12);
  }
}

TEST_CASE("_FusedMatMulReluGrad matches MatMul, ReluGrad and the bias gradient for every transpose combination",
          "[fusion][matmul]") {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool bias_grad : {false, true}) {
        check_fused_matmul_relu_grad<float>(5, 7, 3, ta, tb, bias_grad, 1e-5);
        check_fused_matmul_relu_grad<double>(17, 9, 11, ta, tb, bias_grad, 1e-12);
      }
  // More rows than one epilogue block (256 KiB of output): the sums run across blocks.
  for (bool ta : {false, true}) {
    check_fused_matmul_relu_grad<float>(2100, 8, 40, ta, false, true, 1e-5);
    check_fused_matmul_relu_grad<double>(1100, 6, 40, ta, true, true, 1e-12);
  }
}

TEST_CASE("_FusedMatMulReluGrad refuses a Relu output that does not match the product", "[fusion]") {
  kernel_test_env env;
  test_random random{seed};
  auto r = env.run(make_node("_FusedMatMulReluGrad", "fused", dtype::float32,
                             {{"fused_ops", std::string{"ReluGrad,BiasAddGrad"}}}),
                   {random.uniform<float>({4, 3}), random.uniform<float>({3, 5}),
                    random.uniform<float>({4, 4})});
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.message().find("Relu output") != std::string::npos);
}

TEST_CASE("_FusedConv2D matches Conv2D plus bias and Relu over paddings and strides",
          "[fusion][conv]") {
  for (bool relu : {false, true}) {
    check_fused_conv<float>({{2, 7, 6, 3}, {3, 3, 3, 4}, 1, "SAME"}, relu, 1e-4);
    check_fused_conv<float>({{2, 7, 6, 3}, {3, 3, 3, 4}, 2, "SAME"}, relu, 1e-4);
    check_fused_conv<double>({{3, 8, 8, 1}, {5, 5, 1, 6}, 1, "VALID"}, relu, 1e-12);
    check_fused_conv<double>({{1, 9, 7, 2}, {2, 4, 2, 3}, 3, "VALID"}, relu, 1e-12);
  }
  // 3200 output rows of 32 float64 filters: several epilogue blocks.
  check_fused_conv<double>({{2, 40, 40, 3}, {3, 3, 3, 32}, 1, "SAME"}, true, 1e-12);
}

TEST_CASE("_FusedMatMul refuses a bias that does not match the output's columns", "[fusion]") {
  kernel_test_env env;
  test_random random{seed};
  auto r = env.run(make_node("_FusedMatMul", "fused", dtype::float32,
                             {{"fused_ops", std::string{"BiasAdd"}}}),
                   {random.uniform<float>({4, 3}), random.uniform<float>({3, 5}),
                    random.uniform<float>({4})});
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.message().find("bias") != std::string::npos);
}

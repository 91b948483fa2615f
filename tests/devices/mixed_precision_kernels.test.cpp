// The CPU contractions under the mixed-precision mark (graph/mixed_precision.hpp): MatMul,
// _FusedMatMul, Conv2D, its two backprops and _FusedConv2D with bf16 operands and float32
// results, against float64 references of the float32 inputs within bf16's rounding: bf16 keeps 8
// bits of mantissa, so each product is off by at most 2^-8 (3.9e-3) of itself, and a sum of them
// by that of the sum of their magnitudes (the usual dot-product bound); checked at 1e-2 of it. Where oneDNN has bf16 instructions the
// marked kernel must also differ from the float32 one (it did run in bf16); where it has none
// (forced in the "[.bf16_fallback]" entry, tests/CMakeLists.txt) it must equal it exactly.
// CPU only (only its kernels read the mark), so not tagged [kernels].
#include "devices/cpu/onednn_conv.hpp"
#include "graph/conv_geometry.hpp"
#include "graph/mixed_precision.hpp"
#include "support/kernel_test_util.hpp"

#include <algorithm>
#include <cmath>

using namespace actorflow;
using namespace actorflow::testing;

namespace {

constexpr std::uint32_t seed = 2627;
constexpr double bf16_tolerance = 1e-2;

using attrs_t = std::map<std::string, attr_value>;

/// `attrs` with the mixed-precision mark.
attrs_t marked(attrs_t attrs) {
  attrs[mixed_precision_attr] = std::string{"bfloat16"};
  return attrs;
}

double max_difference(const tensor& a, const tensor& b) {
  auto va = as_doubles(a), vb = as_doubles(b);
  double most = 0;
  for (std::size_t i = 0; i < va.size(); ++i)
    most = std::max(most, std::abs(va[i] - vb[i]));
  return most;
}

/// A float64 reference and, per element, the sum of the magnitudes of its products.
struct reference {
  std::vector<double> value, magnitude;
  explicit reference(std::size_t size) : value(size), magnitude(size) {}
  void add(std::size_t at, double product) {
    value[at] += product;
    magnitude[at] += std::abs(product);
  }
};

/// The marked kernel against the reference, then against the float32 kernel on the same inputs.
void check_marked(kernel_test_env& env, const std::string& op, const attrs_t& attrs,
                  const std::vector<tensor>& inputs, const tensor_shape& shape,
                  const reference& ref, bool runs_in_bf16) {
  auto mixed = env.run_ok(make_node(op, "mixed", dtype::float32, marked(attrs)), inputs);
  REQUIRE(mixed.shape() == shape);
  auto got = as_doubles(mixed);
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO(op << " element " << i << ": got " << got[i] << ", expected " << ref.value[i]
            << ", products' magnitude " << ref.magnitude[i]);
    REQUIRE(std::abs(got[i] - ref.value[i]) <= bf16_tolerance * ref.magnitude[i] + 1e-6);
  }
  auto plain = env.run_ok(make_node(op, "plain", dtype::float32, attrs), inputs);
  auto difference = max_difference(mixed, plain);
  INFO(op << ": bf16 and float32 differ by at most " << difference);
  if (runs_in_bf16)
    CHECK(difference > 1e-5);
  else
    CHECK(difference == 0.0);
}

void check_matmul(std::int64_t m, std::int64_t k, std::int64_t n, bool ta, bool tb, bool relu) {
  INFO("m=" << m << " k=" << k << " n=" << n << ", transpose_a=" << ta << ", transpose_b=" << tb
            << ", relu=" << relu << ", seed " << seed);
  kernel_test_env env;
  test_random random{seed};
  auto a = random.uniform<float>(ta ? tensor_shape{k, m} : tensor_shape{m, k});
  auto b = random.uniform<float>(tb ? tensor_shape{n, k} : tensor_shape{k, n});
  auto bias = random.uniform<float>(tensor_shape{n});
  auto va = as_doubles(a), vb = as_doubles(b), vbias = as_doubles(bias);
  reference ref(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t p = 0; p < k; ++p)
        ref.add(static_cast<std::size_t>(i * n + j),
                va[static_cast<std::size_t>(ta ? p * m + i : i * k + p)] *
                  vb[static_cast<std::size_t>(tb ? j * k + p : p * n + j)]);
  // Bias (added in float32) and Relu (which shrinks differences) keep the same bound.
  auto fused_ref = ref;
  for (std::size_t at = 0; at < fused_ref.value.size(); ++at) {
    auto& v = fused_ref.value[at];
    v += vbias[at % static_cast<std::size_t>(n)];
    if (relu)
      v = std::max(0.0, v);
  }
  attrs_t attrs{{"transpose_a", ta}, {"transpose_b", tb}};
  auto bf16 = onednn_bf16_available();
  check_marked(env, "MatMul", attrs, {a, b}, tensor_shape{m, n}, ref, bf16);
  attrs["fused_ops"] = std::string{relu ? "BiasAdd,Relu" : "BiasAdd"};
  check_marked(env, "_FusedMatMul", attrs, {a, b, bias}, tensor_shape{m, n}, fused_ref, bf16);
}

struct conv_case {
  std::vector<std::int64_t> x, filter;
  std::int64_t stride;
  std::string padding;
};

void check_conv(const conv_case& c) {
  INFO("x " << tensor_shape{c.x}.to_string() << " filter " << tensor_shape{c.filter}.to_string()
            << " stride " << c.stride << " " << c.padding << ", seed " << seed);
  kernel_test_env env;
  test_random random{seed};
  auto x = random.uniform<float>(tensor_shape{c.x});
  auto filter = random.uniform<float>(tensor_shape{c.filter});
  auto bias = random.uniform<float>(tensor_shape{c.filter[3]});
  auto g = *conv_geometry::make(c.x[1], c.x[2], c.filter[0], c.filter[1], c.stride, c.stride,
                                c.padding);
  auto batch = c.x[0], ci = c.x[3], co = c.filter[3];
  tensor_shape y_shape{batch, g.out_h, g.out_w, co};
  auto dy = random.uniform<float>(y_shape);
  auto vx = as_doubles(x), vf = as_doubles(filter), vdy = as_doubles(dy), vbias = as_doubles(bias);
  // One walk over every (output position, window tap, channel pair) gives all three passes.
  reference y(static_cast<std::size_t>(y_shape.num_elements())), dx(vx.size()), df(vf.size());
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
              for (std::int64_t o = 0; o < co; ++o) {
                auto yi = static_cast<std::size_t>(((b * g.out_h + oh) * g.out_w + ow) * co + o);
                auto xi = static_cast<std::size_t>(((b * g.in_h + ih) * g.in_w + iw) * ci + k);
                auto fi = static_cast<std::size_t>(((kh * g.k_w + kw) * ci + k) * co + o);
                y.add(yi, vx[xi] * vf[fi]);
                dx.add(xi, vdy[yi] * vf[fi]);
                df.add(fi, vx[xi] * vdy[yi]);
              }
          }
  attrs_t attrs{{"strides", std::vector<std::int64_t>{1, c.stride, c.stride, 1}},
                {"padding", c.padding}};
  // Fewer than 16 input channels stay float32 (onednn_convolution says why).
  auto bf16 = onednn_bf16_available() && ci >= 16;
  check_marked(env, "Conv2D", attrs, {x, filter}, y_shape, y, bf16);
  check_marked(env, "Conv2DBackpropInput", attrs, {x, filter, dy}, tensor_shape{c.x}, dx, bf16);
  check_marked(env, "Conv2DBackpropFilter", attrs, {x, filter, dy}, tensor_shape{c.filter}, df,
               bf16);
  auto fused = y;
  for (std::size_t i = 0; i < fused.value.size(); ++i)
    fused.value[i] = std::max(0.0, fused.value[i] + vbias[i % static_cast<std::size_t>(co)]);
  attrs["fused_ops"] = std::string{"BiasAdd,Relu"};
  check_marked(env, "_FusedConv2D", attrs, {x, filter, bias}, y_shape, fused, bf16);
}

} // namespace

TEST_CASE("marked MatMul and _FusedMatMul compute in bf16 within its rounding of float64",
          "[mixed_precision][matmul]") {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      check_matmul(33, 70, 20, ta, tb, tb);
  // The MLP's shapes: a batch of 128 through 784 -> 256 and its gradients' transposes.
  check_matmul(128, 784, 256, false, false, true);
  check_matmul(784, 128, 256, true, false, false);
  check_matmul(128, 256, 784, false, true, false);
}

TEST_CASE("marked convolutions and their gradients compute in bf16 within its rounding",
          "[mixed_precision][conv]") {
  // Backprop Input needs 4 channels or more for oneDNN (onednn_convolution says why).
  check_conv({{2, 7, 6, 16}, {3, 3, 16, 16}, 1, "SAME"});
  check_conv({{2, 9, 9, 16}, {3, 3, 16, 32}, 2, "SAME"});
  check_conv({{2, 12, 12, 32}, {5, 5, 32, 8}, 1, "VALID"});
  // Fewer channels (the CNN's first layer has 1) stay float32.
  check_conv({{3, 8, 8, 4}, {5, 5, 4, 6}, 1, "VALID"});
}

TEST_CASE("a CPU whose oneDNN finds no bf16 instructions computes marked contractions in "
          "float32",
          "[.bf16_fallback]") {
  // Run with DNNL_MAX_CPU_ISA=AVX512_CORE (tests/CMakeLists.txt): oneDNN's own detection then
  // reports no bf16, as on a CPU without it.
  INFO("this test needs DNNL_MAX_CPU_ISA=AVX512_CORE (or a CPU without bf16), as its ctest "
       "entry sets");
  REQUIRE_FALSE(onednn_bf16_available());
  check_matmul(33, 70, 20, false, true, true);
  check_conv({{2, 7, 6, 16}, {3, 3, 16, 16}, 1, "SAME"});
}

// Conv2D and its two backprops against direct float64 loops, over both paddings, strides and
// batch chunks, on oneDNN (float32's default) and on im2col + GEMM (ACTORFLOW_CPU_CONV=gemm); pooling and its gradients against direct windows; bad attributes and shapes
// named.
#include "graph/conv_geometry.hpp"
#include "support/kernel_test_util.hpp"

#include <cstdlib>
#include <optional>

using namespace actorflow;
using namespace actorflow::testing;

namespace {

constexpr std::uint32_t seed = 777;

struct conv_case {
  std::vector<std::int64_t> x, filter;
  std::int64_t stride;
  std::string padding;
};

std::map<std::string, attr_value> conv_attrs(const conv_case& c) {
  return {{"strides", std::vector<std::int64_t>{1, c.stride, c.stride, 1}}, {"padding", c.padding}};
}

/// Calls f(n, oh, ow, kh, kw, ih, iw) for every window element inside the input.
template <class F>
void each_tap(const conv_geometry& g, std::int64_t batch, F&& f) {
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t oh = 0; oh < g.out_h; ++oh)
      for (std::int64_t ow = 0; ow < g.out_w; ++ow)
        for (std::int64_t kh = 0; kh < g.k_h; ++kh)
          for (std::int64_t kw = 0; kw < g.k_w; ++kw) {
            auto ih = oh * g.stride_h - g.pad_top + kh;
            auto iw = ow * g.stride_w - g.pad_left + kw;
            if (ih >= 0 && ih < g.in_h && iw >= 0 && iw < g.in_w)
              f(n, oh, ow, kh, kw, ih, iw);
          }
}

void check_conv(const conv_case& c) {
  INFO("x " << tensor_shape{c.x}.to_string() << " filter " << tensor_shape{c.filter}.to_string()
            << " stride " << c.stride << " " << c.padding << ", seed " << seed);
  kernel_test_env env;
  test_random random{seed};
  auto x = random.uniform<float>(tensor_shape{c.x});
  auto filter = random.uniform<float>(tensor_shape{c.filter});
  auto g = *conv_geometry::make(c.x[1], c.x[2], c.filter[0], c.filter[1], c.stride, c.stride, c.padding);
  auto batch = c.x[0], ci = c.x[3], co = c.filter[3];
  tensor_shape out_shape{batch, g.out_h, g.out_w, co};
  auto dy = random.uniform<float>(out_shape);
  auto vx = as_doubles(x), vf = as_doubles(filter), vdy = as_doubles(dy);
  auto xi = [&](auto n, auto h, auto w, auto k) { return ((n * g.in_h + h) * g.in_w + w) * ci + k; };
  auto fi = [&](auto h, auto w, auto k, auto o) { return ((h * g.k_w + w) * ci + k) * co + o; };
  auto oi = [&](auto n, auto h, auto w, auto o) { return ((n * g.out_h + h) * g.out_w + w) * co + o; };
  std::vector<double> out(static_cast<std::size_t>(out_shape.num_elements())), dx(vx.size()), df(vf.size());
  each_tap(g, batch, [&](auto n, auto oh, auto ow, auto kh, auto kw, auto ih, auto iw) {
    for (std::int64_t k = 0; k < ci; ++k)
      for (std::int64_t o = 0; o < co; ++o) {
        auto w = static_cast<std::size_t>(fi(kh, kw, k, o));
        auto in = static_cast<std::size_t>(xi(n, ih, iw, k));
        auto at = static_cast<std::size_t>(oi(n, oh, ow, o));
        out[at] += vx[in] * vf[w];
        dx[in] += vdy[at] * vf[w];
        df[w] += vdy[at] * vx[in];
      }
  });
  auto forward = env.run_ok(make_node("Conv2D", "conv", dtype::float32, conv_attrs(c)), {x, filter});
  require_near(forward, out_shape, out, 1e-4);
  auto input = env.run_ok(make_node("Conv2DBackpropInput", "conv_dx", dtype::float32, conv_attrs(c)),
                          {x, filter, dy});
  require_near(input, tensor_shape{c.x}, dx, 1e-4);
  auto filt = env.run_ok(make_node("Conv2DBackpropFilter", "conv_df", dtype::float32, conv_attrs(c)),
                         {x, filter, dy});
  require_near(filt, tensor_shape{c.filter}, df, 1e-3);
}

} // namespace

TEST_CASE("Conv2D and its backprops match direct loops", "[kernels][conv]") {
  check_conv({{2, 7, 6, 3}, {3, 3, 3, 4}, 1, "SAME"});
  check_conv({{2, 7, 6, 3}, {3, 3, 3, 4}, 2, "SAME"});
  check_conv({{3, 8, 8, 1}, {5, 5, 1, 6}, 1, "VALID"});
  check_conv({{1, 9, 7, 2}, {2, 4, 2, 3}, 3, "VALID"});
  check_conv({{2, 4, 4, 2}, {4, 4, 2, 2}, 1, "SAME"}); // even window: more padding after
}

TEST_CASE("Conv2D splits a large batch into chunks without changing the result", "[kernels][conv]") {
  // 64 images of 64x64 with a 5x5x4 window unroll to 26 M values: more than one chunk.
  check_conv({{64, 64, 64, 4}, {5, 5, 4, 2}, 1, "SAME"});
}

TEST_CASE("Conv2D and its backprops match direct loops on the CNN's shapes", "[kernels][conv]") {
  // apps/train/models.cpp's two convolutions at batch 32: what oneDNN runs in training.
  check_conv({{32, 28, 28, 1}, {5, 5, 1, 16}, 1, "VALID"});
  check_conv({{32, 12, 12, 16}, {5, 5, 16, 32}, 1, "VALID"});
}

namespace {

/// Sets ACTORFLOW_CPU_CONV for one scope (kernels read it when they are made), then restores it.
class conv_choice {
public:
  explicit conv_choice(const char* value) {
    if (const char* old = std::getenv("ACTORFLOW_CPU_CONV"))
      saved_ = old;
    setenv("ACTORFLOW_CPU_CONV", value, 1);
  }
  ~conv_choice() {
    if (saved_)
      setenv("ACTORFLOW_CPU_CONV", saved_->c_str(), 1);
    else
      unsetenv("ACTORFLOW_CPU_CONV");
  }
  conv_choice(const conv_choice&) = delete;
  conv_choice& operator=(const conv_choice&) = delete;

private:
  std::optional<std::string> saved_;
};

} // namespace

TEST_CASE("Conv2D and its backprops on im2col + GEMM, as ACTORFLOW_CPU_CONV=gemm asks, match direct loops", "[kernels][conv]") {
  conv_choice gemm{"gemm"};
  check_conv({{2, 7, 6, 3}, {3, 3, 3, 4}, 2, "SAME"});
  check_conv({{1, 9, 7, 2}, {2, 4, 2, 3}, 3, "VALID"});
  check_conv({{2, 4, 4, 2}, {4, 4, 2, 2}, 1, "SAME"});
  check_conv({{32, 12, 12, 16}, {5, 5, 16, 32}, 1, "VALID"});
}

TEST_CASE("MaxPool and AvgPool match direct windows, padding left out", "[kernels][conv]") {
  kernel_test_env env;
  test_random random{seed};
  auto x = random.uniform<float>(tensor_shape{2, 5, 5, 3});
  auto vx = as_doubles(x);
  for (std::string padding : {"SAME", "VALID"}) {
    INFO(padding);
    std::map<std::string, attr_value> attrs{{"ksize", std::vector<std::int64_t>{1, 2, 2, 1}},
                                            {"strides", std::vector<std::int64_t>{1, 2, 2, 1}},
                                            {"padding", padding}};
    auto g = *conv_geometry::make(5, 5, 2, 2, 2, 2, padding);
    tensor_shape out_shape{2, g.out_h, g.out_w, 3};
    std::vector<double> maxima(static_cast<std::size_t>(out_shape.num_elements()), -1e300);
    std::vector<double> sums(maxima.size(), 0.0), counts(maxima.size(), 0.0);
    each_tap(g, 2, [&](auto n, auto oh, auto ow, auto, auto, auto ih, auto iw) {
      for (std::int64_t k = 0; k < 3; ++k) {
        auto at = static_cast<std::size_t>(((n * g.out_h + oh) * g.out_w + ow) * 3 + k);
        auto v = vx[static_cast<std::size_t>(((n * 5 + ih) * 5 + iw) * 3 + k)];
        maxima[at] = std::max(maxima[at], v);
        sums[at] += v;
        counts[at] += 1;
      }
    });
    for (std::size_t i = 0; i < sums.size(); ++i)
      sums[i] /= counts[i];
    require_near(env.run_ok(make_node("MaxPool", "max", dtype::float32, attrs), {x}), out_shape, maxima, 0);
    require_near(env.run_ok(make_node("AvgPool", "avg", dtype::float32, attrs), {x}), out_shape, sums, 1e-6);
  }
}

TEST_CASE("MaxPoolGrad and AvgPoolGrad match direct windows, overlapping or not", "[kernels][conv]") {
  kernel_test_env env;
  test_random random{seed};
  const std::int64_t batch = 2, h = 7, w = 6, channels = 3;
  auto x = random.uniform<float>(tensor_shape{batch, h, w, channels});
  auto vx = as_doubles(x);
  auto xi = [&](auto n, auto ih, auto iw, auto k) {
    return static_cast<std::size_t>(((n * h + ih) * w + iw) * channels + k);
  };
  struct window {
    std::int64_t size, stride;
  };
  // 3x3 windows at stride 2 overlap: an input element gathers gradient from several windows.
  for (auto [size, stride] : {window{2, 2}, window{3, 2}, window{3, 1}})
    for (std::string padding : {"SAME", "VALID"}) {
      INFO(size << "x" << size << " windows, stride " << stride << ", " << padding << ", seed " << seed);
      std::map<std::string, attr_value> attrs{{"ksize", std::vector<std::int64_t>{1, size, size, 1}},
                                              {"strides", std::vector<std::int64_t>{1, stride, stride, 1}},
                                              {"padding", padding}};
      auto g = *conv_geometry::make(h, w, size, size, stride, stride, padding);
      tensor_shape out_shape{batch, g.out_h, g.out_w, channels};
      auto dy = random.uniform<float>(out_shape);
      auto vdy = as_doubles(dy);
      auto oi = [&](auto n, auto oh, auto ow, auto k) {
        return static_cast<std::size_t>(((n * g.out_h + oh) * g.out_w + ow) * channels + k);
      };
      // Per output element: its window's first maximum (window order) and its element count.
      std::vector<double> maxima(vdy.size(), -1e300), counts(vdy.size(), 0.0);
      std::vector<std::size_t> argmax(vdy.size(), 0);
      each_tap(g, batch, [&](auto n, auto oh, auto ow, auto, auto, auto ih, auto iw) {
        for (std::int64_t k = 0; k < channels; ++k) {
          auto at = oi(n, oh, ow, k);
          counts[at] += 1;
          if (vx[xi(n, ih, iw, k)] > maxima[at]) {
            maxima[at] = vx[xi(n, ih, iw, k)];
            argmax[at] = xi(n, ih, iw, k);
          }
        }
      });
      std::vector<double> max_dx(vx.size(), 0.0), avg_dx(vx.size(), 0.0);
      for (std::size_t at = 0; at < vdy.size(); ++at)
        max_dx[argmax[at]] += vdy[at];
      each_tap(g, batch, [&](auto n, auto oh, auto ow, auto, auto, auto ih, auto iw) {
        for (std::int64_t k = 0; k < channels; ++k)
          avg_dx[xi(n, ih, iw, k)] += vdy[oi(n, oh, ow, k)] / counts[oi(n, oh, ow, k)];
      });
      auto y = env.run_ok(make_node("MaxPool", "max", dtype::float32, attrs), {x});
      require_near(env.run_ok(make_node("MaxPoolGrad", "max_grad", dtype::float32, attrs), {x, y, dy}),
                   tensor_shape{batch, h, w, channels}, max_dx, 1e-5);
      require_near(env.run_ok(make_node("AvgPoolGrad", "avg_grad", dtype::float32, attrs), {x, dy}),
                   tensor_shape{batch, h, w, channels}, avg_dx, 1e-5);
    }
}

TEST_CASE("convolutions refuse bad attributes and shapes, naming them", "[kernels][conv]") {
  kernel_test_env env;
  test_random random{seed};
  auto x = random.uniform<float>(tensor_shape{1, 4, 4, 2});
  auto filter = random.uniform<float>(tensor_shape{3, 3, 3, 1});
  auto n = make_node("Conv2D", "conv", dtype::float32,
                     {{"strides", std::vector<std::int64_t>{1, 1, 1, 1}}, {"padding", std::string{"SAME"}}});
  auto mismatched = env.run(n, {x, filter});
  CHECK(mismatched.status.message().find("has 2 channels but the filter") != std::string::npos);
  n.attrs["padding"] = std::string{"FULL"};
  auto padded = env.run(n, {x, random.uniform<float>(tensor_shape{3, 3, 2, 1})});
  CHECK(padded.status.message().find("padding must be \"SAME\" or \"VALID\"") != std::string::npos);
  n.attrs["strides"] = std::vector<std::int64_t>{2, 1, 1, 1};
  auto strided = env.run(n, {x, random.uniform<float>(tensor_shape{3, 3, 2, 1})});
  CHECK(strided.status.message().find("attribute 'strides' must be [1, height, width, 1]") != std::string::npos);
}

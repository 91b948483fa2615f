// The window arithmetic of the GPU's convolution and pooling kernels (devices/cuda/
// conv_plan.hpp), run on the CPU: cuDNN's symmetric padding plus the appended row/column give
// graph/conv_geometry.hpp's windows and output sizes, and the pooling gradients' "windows
// covering an element" agree with visiting every window, for many sizes, strides and paddings;
// the pooling kernels' per-element functions give the CPU kernels' results bit for bit.
#include "devices/cuda/conv_plan.hpp"
#include "support/kernel_test_util.hpp"

#include <catch2/catch.hpp>

#include <limits>
#include <vector>

using namespace actorflow;
using namespace actorflow::cuda;
using namespace actorflow::testing;

namespace {

/// Calls f(geometry) for every small input size, window, stride and padding that is valid.
template <class F>
void each_geometry(F&& f) {
  for (const char* padding : {"SAME", "VALID"})
    for (std::int64_t in = 1; in <= 9; ++in)
      for (std::int64_t k = 1; k <= 5; ++k)
        for (std::int64_t stride = 1; stride <= 4; ++stride) {
          auto g = conv_geometry::make(in, in + 1, k, k, stride, stride, padding);
          if (g)
            f(*g, padding);
        }
}

} // namespace

TEST_CASE("cuDNN's padding of a copy reproduces TensorFlow's output sizes and windows",
          "[cuda][conv]") {
  each_geometry([](const conv_geometry& g, const char* padding) {
    INFO(padding << " in " << g.in_h << "x" << g.in_w << " window " << g.k_h << " stride "
                 << g.stride_h);
    auto p = make_cudnn_padding(g);
    CHECK(p.pad_h == g.pad_top);
    CHECK(p.pad_w == g.pad_left);
    CHECK((p.extra_h == 0 || p.extra_h == 1));
    CHECK((p.extra_w == 0 || p.extra_w == 1));
    CHECK(cudnn_output_size(p.padded_h, p.pad_h, g.k_h, g.stride_h) == g.out_h);
    CHECK(cudnn_output_size(p.padded_w, p.pad_w, g.k_w, g.stride_w) == g.out_w);
    // The last window ends inside the copy plus cuDNN's bottom padding: no window of cuDNN's
    // sees a row that TensorFlow's would not.
    CHECK((g.out_h - 1) * g.stride_h - p.pad_h + g.k_h <= p.padded_h + p.pad_h);
    if (std::string{padding} == "VALID")
      CHECK_FALSE(p.needs_copy());
  });
}

TEST_CASE("an odd SAME padding puts its extra row at the bottom of the copy", "[cuda][conv]") {
  // 6 rows, window 2, stride 1: one padding row in all, which TensorFlow puts at the bottom.
  auto g = *conv_geometry::make(6, 6, 2, 2, 1, 1, "SAME");
  auto p = make_cudnn_padding(g);
  CHECK(p.pad_h == 0);
  CHECK(p.extra_h == 1);
  CHECK(p.padded_h == 7);
  CHECK(p.needs_copy());
  // 28 rows, window 5: two rows on either side, no copy.
  auto even = make_cudnn_padding(*conv_geometry::make(28, 28, 5, 5, 1, 1, "SAME"));
  CHECK(even.pad_h == 2);
  CHECK_FALSE(even.needs_copy());
}

TEST_CASE("the windows covering an input row are those whose span holds it", "[cuda][conv]") {
  each_geometry([](const conv_geometry& g, const char* padding) {
    INFO(padding << " in " << g.in_h << " window " << g.k_h << " stride " << g.stride_h);
    std::vector<std::vector<std::int64_t>> covering(static_cast<std::size_t>(g.in_h));
    for (std::int64_t o = 0; o < g.out_h; ++o) {
      auto rows = window_inside(o, g.stride_h, g.pad_top, g.k_h, g.in_h);
      CHECK(rows.begin < rows.end); // every window sees at least one real row
      for (auto i = rows.begin; i < rows.end; ++i)
        covering[static_cast<std::size_t>(i)].push_back(o);
    }
    for (std::int64_t i = 0; i < g.in_h; ++i) {
      auto windows = windows_containing(i, g.stride_h, g.pad_top, g.k_h, g.out_h);
      std::vector<std::int64_t> found;
      for (auto o = windows.begin; o < windows.end; ++o)
        found.push_back(o);
      INFO("row " << i);
      CHECK(found == covering[static_cast<std::size_t>(i)]);
    }
  });
}

TEST_CASE("the GPU's convolution checks name what is wrong as the CPU's do", "[cuda][conv]") {
  node n;
  n.name = "conv";
  n.op = "Conv2D";
  n.attrs["strides"] = std::vector<std::int64_t>{1, 1, 1, 1};
  n.attrs["padding"] = std::string{"SAME"};
  auto sizes = make_conv_sizes(n, tensor_shape{2, 5, 5, 3}, tensor_shape{3, 3, 3, 4});
  REQUIRE(sizes.ok());
  CHECK(sizes->output_shape() == tensor_shape{2, 5, 5, 4});
  CHECK_FALSE(sizes->empty());

  auto channels = make_conv_sizes(n, tensor_shape{2, 5, 5, 2}, tensor_shape{3, 3, 3, 4});
  REQUIRE_FALSE(channels.ok());
  CHECK(channels.error().message().find("has 2 channels but the filter") != std::string::npos);

  auto rank = make_conv_sizes(n, tensor_shape{5, 5, 3}, tensor_shape{3, 3, 3, 4});
  REQUIRE_FALSE(rank.ok());
  CHECK(rank.error().message().find("the input must have rank 4 (NHWC)") != std::string::npos);

  n.attrs["strides"] = std::vector<std::int64_t>{2, 1, 1, 1};
  auto strides = make_conv_sizes(n, tensor_shape{2, 5, 5, 3}, tensor_shape{3, 3, 3, 4});
  REQUIRE_FALSE(strides.ok());
  CHECK(strides.error().message().find("attribute 'strides' must be [1, height, width, 1]") !=
        std::string::npos);

  n.op = "MaxPool";
  n.attrs["strides"] = std::vector<std::int64_t>{1, 2, 2, 1};
  n.attrs["ksize"] = std::vector<std::int64_t>{1, 3, 3, 1};
  auto pool = make_pool_geometry(n, tensor_shape{1, 7, 8, 2});
  REQUIRE(pool.ok());
  CHECK(pool->out_h == 4);
  CHECK(pool->out_w == 4);
}

namespace {

/// out[i] = f(i) for every element of a tensor of `shape`.
template <class T, class F>
tensor each_element(const tensor_shape& shape, F&& f) {
  tensor t{dtype_of<T>(), shape};
  for (std::int64_t i = 0; i < t.num_elements(); ++i)
    t.data<T>()[i] = f(i);
  return t;
}

/// Whether a and b hold the same values, bit for bit.
template <class T>
bool identical(const tensor& a, const tensor& b) {
  if (a.shape() != b.shape())
    return false;
  for (std::int64_t i = 0; i < a.num_elements(); ++i)
    if (a.data<T>()[i] != b.data<T>()[i])
      return false;
  return true;
}

template <class T>
void check_pooling_like_the_kernels(std::int64_t k, std::int64_t stride, const char* padding) {
  constexpr std::uint32_t seed = 4242;
  INFO("window " << k << " stride " << stride << " " << padding << ", seed " << seed);
  kernel_test_env env;
  test_random random{seed};
  tensor_shape shape{2, 7, 6, 3};
  // Few distinct values, so that windows have ties: the gradient goes to the first maximum.
  tensor x = random.integers<T>(shape, 0, 3);
  std::map<std::string, attr_value> attrs{{"ksize", std::vector<std::int64_t>{1, k, k, 1}},
                                          {"strides", std::vector<std::int64_t>{1, stride, stride, 1}},
                                          {"padding", std::string{padding}}};
  auto g = *conv_geometry::make(7, 6, k, k, stride, stride, padding);
  tensor_shape out_shape{2, g.out_h, g.out_w, 3};
  tensor dy = random.uniform<T>(out_shape);
  const T* xs = x.data<T>();
  const T* dys = dy.data<T>();
  auto lowest = -std::numeric_limits<T>::infinity();

  auto max = env.run_ok(make_node("MaxPool", "max", dtype_of<T>(), attrs), {x});
  CHECK(identical<T>(max, each_element<T>(out_shape, [&](std::int64_t i) {
    return pooled_element<false>(xs, g, 3, i, lowest);
  })));
  auto avg = env.run_ok(make_node("AvgPool", "avg", dtype_of<T>(), attrs), {x});
  CHECK(identical<T>(avg, each_element<T>(out_shape, [&](std::int64_t i) {
    return pooled_element<true>(xs, g, 3, i, lowest);
  })));
  auto max_grad = env.run_ok(make_node("MaxPoolGrad", "max_grad", dtype_of<T>(), attrs),
                             {x, max, dy});
  CHECK(identical<T>(max_grad, each_element<T>(shape, [&](std::int64_t i) {
    return pool_gradient_element<false>(xs, dys, g, 3, i);
  })));
  auto avg_grad = env.run_ok(make_node("AvgPoolGrad", "avg_grad", dtype_of<T>(), attrs), {x, dy});
  CHECK(identical<T>(avg_grad, each_element<T>(shape, [&](std::int64_t i) {
    return pool_gradient_element<true>(xs, dys, g, 3, i);
  })));
}

} // namespace

TEST_CASE("the GPU's pooling arithmetic gives the CPU kernels' results bit for bit",
          "[cuda][conv]") {
  for (const char* padding : {"SAME", "VALID"})
    for (std::int64_t k : {1, 2, 3})
      for (std::int64_t stride : {1, 2, 3}) {
        check_pooling_like_the_kernels<float>(k, stride, padding);
        check_pooling_like_the_kernels<double>(k, stride, padding);
      }
}

// Softmax and SoftmaxCrossEntropyWithLogits against the direct formulas in float64.
#include "support/kernel_test_util.hpp"

#include <cmath>

using namespace actorflow;
using namespace actorflow::testing;

namespace {

constexpr std::uint32_t seed = 99;

/// softmax of each row of `values` (rows of length `cols`), computed in float64.
std::vector<double> reference_softmax(const std::vector<double>& values, std::int64_t cols) {
  std::vector<double> out(values.size());
  for (std::size_t r = 0; r * static_cast<std::size_t>(cols) < values.size(); ++r) {
    auto begin = r * static_cast<std::size_t>(cols);
    double max = values[begin];
    for (std::int64_t j = 1; j < cols; ++j)
      max = std::max(max, values[begin + static_cast<std::size_t>(j)]);
    double sum = 0;
    for (std::int64_t j = 0; j < cols; ++j)
      sum += std::exp(values[begin + static_cast<std::size_t>(j)] - max);
    for (std::int64_t j = 0; j < cols; ++j)
      out[begin + static_cast<std::size_t>(j)] = std::exp(values[begin + static_cast<std::size_t>(j)] - max) / sum;
  }
  return out;
}

template <class T>
void check_softmax(tensor_shape shape, double scale, double tolerance) {
  INFO("Softmax " << to_string(dtype_of<T>()) << " of " << shape.to_string() << ", logits scale "
                  << scale << ", seed " << seed);
  kernel_test_env env;
  test_random random{seed};
  auto x = random.uniform<T>(shape, -scale, scale);
  auto out = env.run_ok(make_node("Softmax", "softmax", dtype_of<T>()), {x});
  require_near(out, shape, reference_softmax(as_doubles(x), shape.dim(shape.rank() - 1)), tolerance);
}

template <class T>
void check_cross_entropy(std::int64_t batch, std::int64_t classes, bool one_hot, double tolerance) {
  INFO("SoftmaxCrossEntropyWithLogits " << to_string(dtype_of<T>()) << " [" << batch << ","
                                         << classes << "], one_hot " << one_hot << ", seed " << seed);
  kernel_test_env env;
  test_random random{seed};
  auto logits = random.uniform<T>({batch, classes}, -10, 10);
  tensor labels{dtype_of<T>(), {batch, classes}};
  if (one_hot) {
    auto picks = random.integers<std::int64_t>({batch}, 0, classes - 1).to_vector<std::int64_t>();
    for (std::int64_t r = 0; r < batch; ++r)
      for (std::int64_t c = 0; c < classes; ++c)
        labels.data<T>()[r * classes + c] = c == picks[static_cast<std::size_t>(r)] ? T(1) : T(0);
  } else {
    // A distribution per row (soft labels).
    auto raw = random.uniform<T>({batch, classes}, 0.0, 1.0);
    auto probabilities = reference_softmax(as_doubles(raw), classes);
    for (std::size_t i = 0; i < probabilities.size(); ++i)
      labels.data<T>()[i] = static_cast<T>(probabilities[i]);
  }
  auto r = env.run(make_node("SoftmaxCrossEntropyWithLogits", "xent", dtype_of<T>(), {},
                             {dtype_of<T>(), dtype_of<T>()}),
                   {logits, labels});
  REQUIRE(r.status.ok());
  REQUIRE(r.outputs.size() == 2);

  auto x = as_doubles(logits);
  auto y = as_doubles(labels);
  auto p = reference_softmax(x, classes);
  std::vector<double> loss(static_cast<std::size_t>(batch), 0.0);
  std::vector<double> backprop(x.size());
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t c = 0; c < classes; ++c) {
      auto i = static_cast<std::size_t>(b * classes + c);
      loss[static_cast<std::size_t>(b)] -= y[i] * std::log(p[i]);
      backprop[i] = p[i] - y[i];
    }
  require_near(r.outputs[0], tensor_shape{batch}, loss, tolerance);
  require_near(r.outputs[1], tensor_shape{batch, classes}, backprop, tolerance);
}

} // namespace

TEST_CASE("Softmax normalises the last axis like the direct formula", "[kernels][softmax]") {
  check_softmax<float>({5, 10}, 5, 1e-6);
  check_softmax<double>({5, 10}, 5, 1e-14);
  check_softmax<float>({2, 3, 7}, 5, 1e-6);
  check_softmax<float>({8}, 5, 1e-6);
  check_softmax<float>({600, 100}, 5, 1e-6); // parallel over rows
}

TEST_CASE("Softmax stays finite for huge logits", "[kernels][softmax]") {
  kernel_test_env env;
  auto x = tensor::from_vector<float>({1000.f, 1000.f, -1000.f, 3e4f}, {2, 2});
  auto out = env.run_ok(make_node("Softmax", "softmax", dtype::float32), {x});
  auto v = out.to_vector<float>();
  CHECK(v[0] == Approx(0.5f));
  CHECK(v[1] == Approx(0.5f));
  CHECK(v[2] == Approx(0.f).margin(1e-30));
  CHECK(v[3] == Approx(1.f));
}

TEST_CASE("SoftmaxCrossEntropyWithLogits gives the loss and softmax minus labels",
          "[kernels][softmax]") {
  check_cross_entropy<float>(8, 10, true, 1e-5);
  check_cross_entropy<float>(8, 10, false, 1e-5);
  check_cross_entropy<double>(16, 5, true, 1e-12);
  check_cross_entropy<double>(16, 5, false, 1e-12);
  check_cross_entropy<float>(2000, 10, true, 1e-5); // parallel over rows
}

TEST_CASE("SoftmaxCrossEntropyWithLogits rejects labels of another shape", "[kernels][softmax]") {
  kernel_test_env env;
  tensor logits{dtype::float32, {2, 3}};
  tensor labels{dtype::float32, {2, 4}};
  auto r = env.run(make_node("SoftmaxCrossEntropyWithLogits", "xent", dtype::float32, {},
                             {dtype::float32, dtype::float32}),
                   {logits, labels});
  CHECK(r.status.code() == errc::invalid_argument);
  CHECK_THAT(r.status.message(), Catch::Contains("[2,3]") && Catch::Contains("[2,4]"));
}

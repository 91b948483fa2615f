// Sum, Mean, Max, Min, Prod over every axis combination, with and without keep_dims; ArgMax.
#include "support/kernel_test_util.hpp"

#include <algorithm>
#include <limits>

using namespace actorflow;
using namespace actorflow::testing;

namespace {

constexpr std::uint32_t seed = 1337;

enum class reduction { sum, mean, max, min, prod };

/// Reduces `x` over the axes flagged in `reduced` in float64.
std::vector<double> reference_reduce(const tensor& x, const std::vector<bool>& reduced,
                                     reduction kind) {
  auto values = as_doubles(x);
  const auto& shape = x.shape();
  auto rank = shape.rank();
  std::int64_t out_count = 1;
  for (int i = 0; i < rank; ++i)
    if (!reduced[static_cast<std::size_t>(i)])
      out_count *= shape.dim(i);
  double init = kind == reduction::max   ? -std::numeric_limits<double>::infinity()
                : kind == reduction::min ? std::numeric_limits<double>::infinity()
                : kind == reduction::prod ? 1.0
                                          : 0.0;
  std::vector<double> out(static_cast<std::size_t>(out_count), init);
  std::vector<double> counts(out.size(), 0.0);
  std::vector<std::int64_t> index(static_cast<std::size_t>(rank), 0);
  for (std::size_t flat = 0; flat < values.size(); ++flat) {
    auto rest = static_cast<std::int64_t>(flat);
    for (int i = rank - 1; i >= 0; --i) {
      index[static_cast<std::size_t>(i)] = rest % shape.dim(i);
      rest /= shape.dim(i);
    }
    std::int64_t o = 0;
    for (int i = 0; i < rank; ++i)
      if (!reduced[static_cast<std::size_t>(i)])
        o = o * shape.dim(i) + index[static_cast<std::size_t>(i)];
    auto& slot = out[static_cast<std::size_t>(o)];
    switch (kind) {
      case reduction::max: slot = std::max(slot, values[flat]); break;
      case reduction::min: slot = std::min(slot, values[flat]); break;
      case reduction::prod: slot *= values[flat]; break;
      default: slot += values[flat];
    }
    counts[static_cast<std::size_t>(o)] += 1;
  }
  if (kind == reduction::mean)
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] /= counts[i];
  return out;
}

const char* op_name(reduction kind) {
  switch (kind) {
    case reduction::sum: return "Sum";
    case reduction::mean: return "Mean";
    case reduction::max: return "Max";
    case reduction::min: return "Min";
    case reduction::prod: return "Prod";
  }
  return "";
}

/// Every subset of the axes (the empty subset meaning all), keep_dims on and off.
template <class T>
void check_all_axis_subsets(kernel_test_env& env, const tensor& x, reduction kind, double tolerance) {
  auto rank = x.shape().rank();
  for (int mask = 0; mask < (1 << rank); ++mask) {
    for (bool keep_dims : {false, true}) {
      std::vector<std::int64_t> axes;
      std::vector<bool> reduced(static_cast<std::size_t>(rank), mask == 0);
      std::vector<std::int64_t> out_dims;
      for (int i = 0; i < rank; ++i) {
        bool r = mask == 0 || (mask & (1 << i)) != 0;
        if (mask != 0 && r)
          // Alternate between positive and negative spellings of the same axis.
          axes.push_back(i % 2 == 0 ? i : i - rank);
        reduced[static_cast<std::size_t>(i)] = r;
        if (!r)
          out_dims.push_back(x.shape().dim(i));
        else if (keep_dims)
          out_dims.push_back(1);
      }
      INFO(op_name(kind) << " " << to_string(dtype_of<T>()) << " of " << x.shape().to_string()
                         << ", axis mask " << mask << ", keep_dims " << keep_dims << ", seed "
                         << seed);
      auto out = env.run_ok(make_node(op_name(kind), "reduce", dtype_of<T>(),
                                      {{"axes", axes}, {"keep_dims", keep_dims}}),
                            {x});
      require_near(out, tensor_shape{out_dims}, reference_reduce(x, reduced, kind), tolerance);
    }
  }
}

} // namespace

/// Magnitudes in [0.5, 1.5) with every third one negative: products of up to 120 of them stay
/// well within float's range and keep their signs interesting.
template <class T>
tensor factors(test_random& random, tensor_shape shape) {
  auto t = random.uniform<T>(std::move(shape), 0.5, 1.5);
  for (std::int64_t i = 0; i < t.num_elements(); i += 3)
    t.template data<T>()[i] = -t.template data<T>()[i];
  return t;
}

TEST_CASE("Sum, Mean, Max, Min and Prod reduce over every axis combination with and without "
          "keep_dims",
          "[kernels][reduction]") {
  kernel_test_env env;
  test_random random{seed};
  for (auto shape : {tensor_shape{6}, tensor_shape{4, 7}, tensor_shape{3, 5, 4},
                     tensor_shape{2, 3, 1, 5}, tensor_shape{1, 6}}) {
    auto xf = random.uniform<float>(shape);
    auto xd = random.uniform<double>(shape);
    for (auto kind : {reduction::sum, reduction::mean, reduction::max, reduction::min}) {
      check_all_axis_subsets<float>(env, xf, kind, 1e-5);
      check_all_axis_subsets<double>(env, xd, kind, 1e-12);
    }
    check_all_axis_subsets<float>(env, factors<float>(random, shape), reduction::prod, 1e-5);
    check_all_axis_subsets<double>(env, factors<double>(random, shape), reduction::prod, 1e-12);
    auto xi = random.integers<std::int32_t>(shape, -100, 100);
    auto xl = random.integers<std::int64_t>(shape, -100, 100);
    for (auto kind : {reduction::sum, reduction::max, reduction::min}) {
      check_all_axis_subsets<std::int32_t>(env, xi, kind, 0.0);
      check_all_axis_subsets<std::int64_t>(env, xl, kind, 0.0);
    }
    // Products of up to 60 factors of +-1 and +-2: exact in int64 and in the float64 reference.
    check_all_axis_subsets<std::int32_t>(env, random.integers<std::int32_t>(shape, -1, 1),
                                         reduction::prod, 0.0);
    check_all_axis_subsets<std::int64_t>(env, random.integers<std::int64_t>(shape, -2, 2),
                                         reduction::prod, 0.0);
  }
}

TEST_CASE("reductions of large tensors split over the pool agree with the reference",
          "[kernels][reduction]") {
  kernel_test_env env;
  test_random random{seed};
  // Big enough in each layout ([R], [K,R], [R,K], [K,R,K]) to take the parallel paths.
  auto x = random.uniform<float>({64, 300, 9});
  for (auto kind : {reduction::sum, reduction::mean, reduction::max, reduction::min})
    check_all_axis_subsets<float>(env, x, kind, 1e-4);
  auto wide = random.uniform<double>({20000, 3});
  check_all_axis_subsets<double>(env, wide, reduction::sum, 1e-11);
}

TEST_CASE("reductions reject an axis out of range", "[kernels][reduction]") {
  kernel_test_env env;
  tensor x{dtype::float32, {2, 3}};
  auto r = env.run(make_node("Sum", "sum", dtype::float32, {{"axes", std::vector<std::int64_t>{2}}}), {x});
  CHECK(r.status.code() == errc::invalid_argument);
  auto n = env.run(make_node("Max", "max", dtype::float32, {{"axes", std::vector<std::int64_t>{-3}}}), {x});
  CHECK(n.status.code() == errc::invalid_argument);
}

TEST_CASE("reductions over an empty axis give the identity", "[kernels][reduction]") {
  kernel_test_env env;
  tensor x{dtype::float32, {3, 0}};
  auto sum = env.run_ok(make_node("Sum", "sum", dtype::float32, {{"axes", std::vector<std::int64_t>{1}}}), {x});
  CHECK(sum.to_vector<float>() == std::vector<float>(3, 0.f));
  auto max = env.run_ok(make_node("Max", "max", dtype::float32, {{"axes", std::vector<std::int64_t>{1}}}), {x});
  CHECK(max.to_vector<float>() == std::vector<float>(3, -std::numeric_limits<float>::infinity()));
  auto min = env.run_ok(make_node("Min", "min", dtype::float32, {{"axes", std::vector<std::int64_t>{1}}}), {x});
  CHECK(min.to_vector<float>() == std::vector<float>(3, std::numeric_limits<float>::infinity()));
  auto prod = env.run_ok(make_node("Prod", "prod", dtype::float32, {{"axes", std::vector<std::int64_t>{1}}}), {x});
  CHECK(prod.to_vector<float>() == std::vector<float>(3, 1.f));
}

TEST_CASE("ArgMax and ArgMin find the first maximum and minimum along each axis", "[kernels][reduction][argmax]") {
  kernel_test_env env;
  test_random random{seed};
  auto x = random.integers<std::int32_t>({4, 5, 6}, 0, 3); // small range: many ties
  auto values = x.to_vector<std::int32_t>();
  for (bool smallest : {false, true})
  for (std::int64_t axis = -3; axis < 3; ++axis) {
    const std::string op = smallest ? "ArgMin" : "ArgMax";
    INFO(op << " axis " << axis << ", seed " << seed);
    auto out = env.run_ok(make_node(op, "arg", dtype::int32, {{"axis", axis}}, {dtype::int64}), {x});
    REQUIRE(out.type() == dtype::int64);
    auto a = static_cast<int>(axis < 0 ? axis + 3 : axis);
    std::vector<std::int64_t> dims{4, 5, 6};
    std::vector<std::int64_t> out_dims;
    for (int i = 0; i < 3; ++i)
      if (i != a)
        out_dims.push_back(dims[static_cast<std::size_t>(i)]);
    REQUIRE(out.shape() == tensor_shape{out_dims});
    auto got = out.to_vector<std::int64_t>();
    std::int64_t outer = 1, inner = 1;
    for (int i = 0; i < a; ++i)
      outer *= dims[static_cast<std::size_t>(i)];
    for (int i = a + 1; i < 3; ++i)
      inner *= dims[static_cast<std::size_t>(i)];
    auto len = dims[static_cast<std::size_t>(a)];
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t j = 0; j < inner; ++j) {
        std::int64_t best = 0;
        for (std::int64_t i = 1; i < len; ++i) {
          auto candidate = values[static_cast<std::size_t>((o * len + i) * inner + j)];
          auto kept = values[static_cast<std::size_t>((o * len + best) * inner + j)];
          if (smallest ? candidate < kept : candidate > kept)
            best = i;
        }
        REQUIRE(got[static_cast<std::size_t>(o * inner + j)] == best);
      }
  }
}

TEST_CASE("Cumsum sums along every axis, exclusive and reversed, for every number type", "[kernels][reduction][cumsum]") {
  kernel_test_env env;
  test_random random{seed};
  auto check = [&](auto zero, const tensor& x) {
    using T = decltype(zero);
    const auto& shape = x.shape();
    auto values = x.template to_vector<T>();
    for (std::int64_t axis = -shape.rank(); axis < shape.rank(); ++axis)
      for (bool exclusive : {false, true})
        for (bool reverse : {false, true}) {
          INFO(to_string(dtype_of<T>()) << " " << shape.to_string() << " axis " << axis << " exclusive "
                                        << exclusive << " reverse " << reverse << ", seed " << seed);
          auto out = env.run_ok(make_node("Cumsum", "cumsum", dtype_of<T>(),
                                          {{"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}}),
                                {x});
          REQUIRE(out.shape() == shape);
          auto a = static_cast<int>(axis < 0 ? axis + shape.rank() : axis);
          std::int64_t inner = 1;
          for (int i = a + 1; i < shape.rank(); ++i)
            inner *= shape.dim(i);
          auto len = shape.dim(a);
          auto got = out.template to_vector<T>();
          // Element i sums the elements of its line before it (after it, reversed), itself
          // unless exclusive.
          for (std::int64_t i = 0; i < shape.num_elements(); ++i) {
            auto k = (i / inner) % len;
            auto line_start = i - k * inner;
            double want = 0;
            for (std::int64_t j = 0; j < len; ++j) {
              bool counted = reverse ? (exclusive ? j > k : j >= k) : (exclusive ? j < k : j <= k);
              if (counted)
                want += static_cast<double>(values[static_cast<std::size_t>(line_start + j * inner)]);
            }
            REQUIRE(static_cast<double>(got[static_cast<std::size_t>(i)]) == Approx(want).epsilon(1e-5));
          }
        }
  };
  check(float{}, random.uniform<float>({3, 4, 5}, -1, 1));
  check(double{}, random.uniform<double>({7, 1, 2}, -1, 1));
  check(std::int32_t{}, random.integers<std::int32_t>({5, 6}, -9, 9));
  check(std::int64_t{}, random.integers<std::int64_t>({2, 3, 2, 2}, -9, 9));
  check(float{}, random.uniform<float>({4, 0}, -1, 1));
}

TEST_CASE("ArgMax over classes picks each row's predicted label", "[kernels][reduction][argmax]") {
  kernel_test_env env;
  auto logits = tensor::from_vector<float>({0.1f, 0.7f, 0.2f, 0.9f, 0.05f, 0.05f}, {2, 3});
  auto out = env.run_ok(make_node("ArgMax", "argmax", dtype::float32, {{"axis", std::int64_t{1}}},
                                  {dtype::int64}),
                        {logits});
  CHECK(out.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0});
}

TEST_CASE("float32 sums of many elements keep their precision (float64 accumulation)",
          "[kernels][reduction]") {
  kernel_test_env env;
  auto sum = [&](tensor x, std::vector<std::int64_t> axes) {
    return env.run_ok(make_node("Sum", "sum", dtype::float32,
                                {{"axes", std::move(axes)}, {"keep_dims", false}}),
                      {std::move(x)});
  };
  // 0.1f is 0.100000001490116...; a float accumulator drifts by about 1e-3 relative here.
  const double tenth = static_cast<double>(0.1f);
  SECTION("everything") {
    const std::int64_t n = (std::int64_t{1} << 24) + 3;
    auto total = sum(tensor::from_vector<float>(std::vector<float>(static_cast<std::size_t>(n), 0.1f)), {});
    CHECK(std::abs(total.scalar_value<float>() - n * tenth) <= 1e-6 * n * tenth);
  }
  SECTION("the outer axis of [2^22, 4]") {
    const std::int64_t rows = std::int64_t{1} << 22;
    auto columns = sum(tensor::from_vector<float>(std::vector<float>(static_cast<std::size_t>(rows * 4), 0.1f),
                                                  {rows, 4}),
                       {0});
    for (auto v : columns.to_vector<float>())
      CHECK(std::abs(v - rows * tenth) <= 1e-6 * rows * tenth);
  }
  SECTION("a strided pattern: axes 0 and 2 of [2^20, 2, 4]") {
    const std::int64_t rows = std::int64_t{1} << 20;
    auto middle = sum(tensor::from_vector<float>(std::vector<float>(static_cast<std::size_t>(rows * 8), 0.1f),
                                                 {rows, 2, 4}),
                      {0, 2});
    for (auto v : middle.to_vector<float>())
      CHECK(std::abs(v - rows * 4 * tenth) <= 1e-6 * rows * 4 * tenth);
  }
}

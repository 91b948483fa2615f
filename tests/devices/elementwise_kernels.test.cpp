// Unary, binary and select elementwise kernels against float64 references, broadcasting
// included; Python's floor division and modulo; the integer rules and refusals.
#include "support/kernel_test_util.hpp"

#include <cmath>
#include <functional>
#include <limits>
#include <random>

using namespace actorflow;
using namespace actorflow::testing;

namespace {

constexpr std::uint32_t seed = 20240611;

/// The numpy broadcast of a op b computed naively in float64.
std::vector<double> broadcast_reference(const tensor& a, const tensor& b, const tensor_shape& out,
                                        const std::function<double(double, double)>& op) {
  auto va = as_doubles(a);
  auto vb = as_doubles(b);
  auto rank = out.rank();
  std::vector<double> result(static_cast<std::size_t>(out.num_elements()));
  std::vector<std::int64_t> index(static_cast<std::size_t>(rank), 0);
  auto offset_in = [&](const tensor_shape& s) {
    std::int64_t offset = 0;
    for (int i = 0; i < s.rank(); ++i) {
      auto oi = index[static_cast<std::size_t>(rank - s.rank() + i)];
      offset = offset * s.dim(i) + (s.dim(i) == 1 ? 0 : oi);
    }
    return static_cast<std::size_t>(offset);
  };
  for (std::size_t flat = 0; flat < result.size(); ++flat) {
    auto rest = static_cast<std::int64_t>(flat);
    for (int i = rank - 1; i >= 0; --i) {
      index[static_cast<std::size_t>(i)] = rest % out.dim(i);
      rest /= out.dim(i);
    }
    result[flat] = op(va[offset_in(a.shape())], vb[offset_in(b.shape())]);
  }
  return result;
}

template <class T>
void check_unary(const std::string& op, std::function<double(double)> reference, double lo,
                 double hi, double tolerance, tensor_shape shape = {7, 13}) {
  INFO("op " << op << ", dtype " << to_string(dtype_of<T>()) << ", seed " << seed
             << ", shape " << shape.to_string());
  kernel_test_env env;
  test_random random{seed};
  auto x = random.uniform<T>(shape, lo, hi);
  auto out = env.run_ok(make_node(op, "unary", dtype_of<T>()), {x});
  std::vector<double> expected;
  for (double v : as_doubles(x))
    expected.push_back(reference(v));
  require_near(out, shape, expected, tolerance);
}

template <class T>
void check_binary(const std::string& op, const tensor_shape& sa, const tensor_shape& sb,
                  std::function<double(double, double)> reference, double tolerance) {
  INFO("op " << op << ", dtype " << to_string(dtype_of<T>()) << ", seed " << seed << ", shapes "
             << sa.to_string() << " and " << sb.to_string());
  kernel_test_env env;
  test_random random{seed};
  auto a = random.uniform<T>(sa, 0.5, 2.0);
  auto b = random.uniform<T>(sb, 0.5, 2.0);
  auto out = env.run_ok(make_node(op, "binary", dtype_of<T>()), {a, b});
  auto expected_shape = broadcast_shapes(sa, sb);
  REQUIRE(expected_shape.ok());
  require_near(out, *expected_shape, broadcast_reference(a, b, *expected_shape, reference),
               tolerance);
}

const std::vector<std::pair<tensor_shape, tensor_shape>> broadcast_cases{
  {{4, 5}, {4, 5}},          // same shape
  {{4, 5}, {}},              // tensor and scalar
  {{}, {4, 5}},              // scalar and tensor
  {{6, 5}, {5}},             // bias row over a matrix
  {{5}, {6, 5}},             // and the other way round
  {{6, 1}, {1, 5}},          // outer product layout
  {{6, 5}, {6, 1}},          // column broadcast
  {{2, 1, 4}, {3, 1}},       // rank 3 against rank 2
  {{2, 3, 1, 4}, {1, 3, 5, 1}}, // several broadcast dimensions
  {{1, 1}, {3, 1, 2}},       // size-1 only operand
  {{300, 257}, {257}},       // large enough for the intra-op pool
  {{300, 257}, {300, 257}},  // same shape, parallel
  {{300, 257}, {}},          // scalar, parallel
  {{300, 1}, {1, 257}},      // broadcast rows, parallel
};

} // namespace

TEST_CASE("unary float kernels match the float64 reference", "[kernels][elementwise]") {
  struct unary_case {
    std::string op;
    std::function<double(double)> reference;
    double lo, hi;
  };
  std::vector<unary_case> cases{
    {"Neg", [](double x) { return -x; }, -3, 3},
    {"Square", [](double x) { return x * x; }, -3, 3},
    {"Sqrt", [](double x) { return std::sqrt(x); }, 0, 9},
    {"Exp", [](double x) { return std::exp(x); }, -5, 5},
    {"Log", [](double x) { return std::log(x); }, 0.01, 100},
    {"Relu", [](double x) { return x > 0 ? x : 0.0; }, -3, 3},
    {"Sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, -20, 20},
    {"Tanh", [](double x) { return std::tanh(x); }, -5, 5},
    {"Abs", [](double x) { return std::abs(x); }, -3, 3},
    {"Sign", [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }, -3, 3},
    {"Floor", [](double x) { return std::floor(x); }, -5, 5},
    {"Ceil", [](double x) { return std::ceil(x); }, -5, 5},
    {"Round", [](double x) { return std::nearbyint(x); }, -5, 5},
    {"Sin", [](double x) { return std::sin(x); }, -7, 7},
    {"Cos", [](double x) { return std::cos(x); }, -7, 7},
    {"Log1p", [](double x) { return std::log1p(x); }, -0.9, 10},
    {"Expm1", [](double x) { return std::expm1(x); }, -5, 5},
  };
  for (auto& c : cases) {
    SECTION(c.op) {
      check_unary<float>(c.op, c.reference, c.lo, c.hi, 2e-6);
      check_unary<double>(c.op, c.reference, c.lo, c.hi, 1e-13);
      // Large enough to be split over the intra-op pool.
      check_unary<float>(c.op, c.reference, c.lo, c.hi, 2e-6, {400, 129});
    }
  }
}

TEST_CASE("Log1p and Expm1 keep their digits near 0, IsNan, IsInf and IsFinite yield bool, and StopGradient passes its input", "[kernels][elementwise]") {
  kernel_test_env env;
  // log(1 + x) and exp(x) - 1 computed naively lose every digit here; the kernels may not.
  auto tiny = tensor::from_vector<double>({1e-12, -3e-10, 2e-16});
  auto log1p = env.run_ok(make_node("Log1p", "log1p", dtype::float64), {tiny});
  auto expm1 = env.run_ok(make_node("Expm1", "expm1", dtype::float64), {tiny});
  for (std::int64_t i = 0; i < 3; ++i) {
    double x = tiny.data<double>()[i];
    CHECK(log1p.data<double>()[i] == Approx(std::log1p(x)).epsilon(1e-15));
    CHECK(expm1.data<double>()[i] == Approx(std::expm1(x)).epsilon(1e-15));
  }
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto odd = tensor::from_vector<float>({1.0f, nan, inf, -inf, 0.0f, -nan});
  auto is = [&](const std::string& op) {
    auto out = env.run_ok(make_node(op, "is", dtype::float32, {}, {dtype::boolean}), {odd});
    REQUIRE(out.type() == dtype::boolean);
    return out.to_vector<bool>();
  };
  CHECK(is("IsNan") == std::vector<bool>{false, true, false, false, false, true});
  CHECK(is("IsInf") == std::vector<bool>{false, false, true, true, false, false});
  CHECK(is("IsFinite") == std::vector<bool>{true, false, false, false, true, false});
  auto wide = tensor::from_vector<double>({nan, 2.5});
  CHECK(env.run_ok(make_node("IsNan", "is64", dtype::float64, {}, {dtype::boolean}), {wide})
          .to_vector<bool>() == std::vector<bool>{true, false});
  auto passed = env.run_ok(make_node("StopGradient", "stop", dtype::int32),
                           {tensor::from_vector<std::int32_t>({4, -1, 7})});
  CHECK(passed.to_vector<std::int32_t>() == std::vector<std::int32_t>{4, -1, 7});
}

TEST_CASE("integer Neg and Square are exact", "[kernels][elementwise]") {
  kernel_test_env env;
  auto x = tensor::from_vector<std::int32_t>({-3, 0, 4, 7});
  auto neg = env.run_ok(make_node("Neg", "neg", dtype::int32), {x});
  CHECK(neg.to_vector<std::int32_t>() == std::vector<std::int32_t>{3, 0, -4, -7});
  auto y = tensor::from_vector<std::int64_t>({-3, 3000000000LL});
  auto square = env.run_ok(make_node("Square", "square", dtype::int64), {y});
  CHECK(square.to_vector<std::int64_t>() == std::vector<std::int64_t>{9, 3000000000LL * 3000000000LL});
}

TEST_CASE("binary kernels broadcast like numpy", "[kernels][elementwise][broadcast]") {
  struct binary_case {
    std::string op;
    std::function<double(double, double)> reference;
  };
  std::vector<binary_case> ops{
    {"Add", [](double a, double b) { return a + b; }},
    {"Sub", [](double a, double b) { return a - b; }},
    {"Mul", [](double a, double b) { return a * b; }},
    {"Div", [](double a, double b) { return a / b; }},
    {"Maximum", [](double a, double b) { return std::max(a, b); }},
    {"Minimum", [](double a, double b) { return std::min(a, b); }},
    {"Pow", [](double a, double b) { return std::pow(a, b); }},
    {"SquaredDifference", [](double a, double b) { return (a - b) * (a - b); }},
  };
  for (auto& op : ops) {
    SECTION(op.op) {
      for (auto& shapes : broadcast_cases) {
        check_binary<float>(op.op, shapes.first, shapes.second, op.reference, 1e-6);
        check_binary<double>(op.op, shapes.first, shapes.second, op.reference, 1e-15);
      }
    }
  }
}

TEST_CASE("integer Add, Sub and Mul broadcast exactly", "[kernels][elementwise][broadcast]") {
  kernel_test_env env;
  auto a = tensor::from_vector<std::int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto b = tensor::from_vector<std::int64_t>({10, 20, 30}, {3});
  CHECK(env.run_ok(make_node("Add", "add", dtype::int64), {a, b}).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{11, 22, 33, 14, 25, 36});
  CHECK(env.run_ok(make_node("Sub", "sub", dtype::int64), {a, b}).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{-9, -18, -27, -6, -15, -24});
  auto c = tensor::from_vector<std::int32_t>({2, 3}, {2, 1});
  auto d = tensor::from_vector<std::int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto product = env.run_ok(make_node("Mul", "mul", dtype::int32), {c, d});
  CHECK(product.shape() == tensor_shape{2, 3});
  CHECK(product.to_vector<std::int32_t>() == std::vector<std::int32_t>{2, 4, 6, 12, 15, 18});
}

TEST_CASE("Equal compares elementwise with broadcasting and yields bool",
          "[kernels][elementwise][broadcast]") {
  kernel_test_env env;
  auto a = tensor::from_vector<float>({1, 2, 3, 4, 2, 6}, {2, 3});
  auto b = tensor::from_vector<float>({1, 2, 6}, {3});
  auto out = env.run_ok(make_node("Equal", "eq", dtype::float32, {}, {dtype::boolean}), {a, b});
  REQUIRE(out.type() == dtype::boolean);
  CHECK(out.shape() == tensor_shape{2, 3});
  CHECK(out.to_vector<int>() == std::vector<int>{1, 1, 0, 0, 1, 1});

  auto i = tensor::from_vector<std::int64_t>({5, 7});
  auto scalar = tensor::scalar<std::int64_t>(7);
  CHECK(env.run_ok(make_node("Equal", "eq_int", dtype::int64, {}, {dtype::boolean}), {i, scalar})
          .to_vector<int>() == std::vector<int>{0, 1});

  auto p = tensor::from_vector<bool>({true, false, true});
  auto q = tensor::from_vector<bool>({true, true, false});
  CHECK(env.run_ok(make_node("Equal", "eq_bool", dtype::boolean, {}, {dtype::boolean}), {p, q})
          .to_vector<int>() == std::vector<int>{1, 0, 0});
}

TEST_CASE("binary kernels reject shapes that do not broadcast, naming both",
          "[kernels][elementwise][broadcast]") {
  kernel_test_env env;
  tensor a{dtype::float32, {3, 4}};
  tensor b{dtype::float32, {5, 4}};
  auto r = env.run(make_node("Add", "add", dtype::float32), {a, b});
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.code() == errc::invalid_argument);
  CHECK_THAT(r.status.message(), Catch::Contains("[3,4]") && Catch::Contains("[5,4]"));
}

TEST_CASE("binary kernels produce empty results for empty operands", "[kernels][elementwise]") {
  kernel_test_env env;
  tensor a{dtype::float32, {0, 4}};
  tensor b{dtype::float32, {4}};
  auto out = env.run_ok(make_node("Mul", "mul", dtype::float32), {a, b});
  CHECK(out.shape() == tensor_shape{0, 4});
}

TEST_CASE("elementwise kernels report an input of the wrong dtype instead of crashing",
          "[kernels][elementwise]") {
  kernel_test_env env;
  auto a = tensor::from_vector<double>({1, 2});
  auto r = env.run(make_node("Add", "add", dtype::float32), {a, a});
  CHECK(r.status.code() == errc::invalid_argument);
  auto empty = env.run(make_node("Relu", "relu", dtype::float32), {tensor{}});
  CHECK(empty.status.code() == errc::failed_precondition);
}

namespace {

/// Python's a // b and a % b, in float64 (exact for the small operands below).
double python_floordiv(double a, double b) { return std::floor(a / b); }
double python_mod(double a, double b) { return a - std::floor(a / b) * b; }

template <class T>
void check_floor_div_and_mod(kernel_test_env& env, const std::vector<double>& as,
                             const std::vector<double>& bs) {
  INFO(to_string(dtype_of<T>()));
  std::vector<T> a, b;
  std::vector<double> quotient, remainder;
  for (double x : as)
    for (double y : bs) {
      a.push_back(static_cast<T>(x));
      b.push_back(static_cast<T>(y));
      quotient.push_back(python_floordiv(x, y));
      remainder.push_back(python_mod(x, y));
    }
  auto n = static_cast<std::int64_t>(a.size());
  auto ta = tensor::from_vector<T>(a);
  auto tb = tensor::from_vector<T>(b);
  require_near(env.run_ok(make_node("FloorDiv", "floordiv", dtype_of<T>()), {ta, tb}), {n},
               quotient, 0.0);
  require_near(env.run_ok(make_node("FloorMod", "floormod", dtype_of<T>()), {ta, tb}), {n},
               remainder, 0.0);
}

} // namespace

TEST_CASE("FloorDiv and FloorMod are Python's // and % for every sign", "[kernels][elementwise]") {
  kernel_test_env env;
  // -7 // 2 == -4 and -7 % 2 == 1; 7 % -2 == -1: the remainder takes the divisor's sign.
  std::vector<double> as{-7, -6, -1, 0, 1, 5, 6, 7, 100};
  std::vector<double> bs{-3, -2, -1, 1, 2, 3, 7};
  check_floor_div_and_mod<std::int32_t>(env, as, bs);
  check_floor_div_and_mod<std::int64_t>(env, as, bs);
  check_floor_div_and_mod<double>(env, {-7.5, -2.25, 0, 2.25, 7.5}, {-2, -0.5, 0.5, 2});
  check_floor_div_and_mod<float>(env, {-7.5, -2.25, 0, 2.25, 7.5}, {-2, -0.5, 0.5, 2});
}

TEST_CASE("integer Pow, Maximum and Minimum are exact, and NaN wins Maximum and Minimum",
          "[kernels][elementwise]") {
  kernel_test_env env;
  auto base = tensor::from_vector<std::int64_t>({3, -2, 0, 0, 7, -1});
  auto exponent = tensor::from_vector<std::int64_t>({39, 5, 0, 3, 1, 10});
  CHECK(env.run_ok(make_node("Pow", "pow", dtype::int64), {base, exponent}).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{4052555153018976267LL, -32, 1, 0, 7, 1});
  auto small = tensor::from_vector<std::int32_t>({-4, 9, 2}, {3, 1});
  auto row = tensor::from_vector<std::int32_t>({0, 5}, {2});
  CHECK(env.run_ok(make_node("Maximum", "max", dtype::int32), {small, row}).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{0, 5, 9, 9, 2, 5});
  CHECK(env.run_ok(make_node("Minimum", "min", dtype::int32), {small, row}).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{-4, -4, 0, 5, 0, 2});
  auto nan = std::numeric_limits<float>::quiet_NaN();
  auto x = tensor::from_vector<float>({nan, 1.f, 2.f});
  auto y = tensor::from_vector<float>({1.f, nan, 1.f});
  for (const char* op : {"Maximum", "Minimum"}) {
    INFO(op);
    auto out = env.run_ok(make_node(op, "extremum", dtype::float32), {x, y}).to_vector<float>();
    CHECK(std::isnan(out[0]));
    CHECK(std::isnan(out[1]));
    CHECK(out[2] == (std::string{op} == "Maximum" ? 2.f : 1.f));
  }
}

TEST_CASE("NotEqual and LogicalOr yield bool with broadcasting, and Round halves to even",
          "[kernels][elementwise][broadcast]") {
  kernel_test_env env;
  auto a = tensor::from_vector<std::int32_t>({1, 2, 3, 4, 2, 6}, {2, 3});
  auto b = tensor::from_vector<std::int32_t>({1, 2, 6}, {3});
  CHECK(env.run_ok(make_node("NotEqual", "ne", dtype::int32, {}, {dtype::boolean}), {a, b})
          .to_vector<int>() == std::vector<int>{0, 0, 1, 1, 0, 0});
  auto p = tensor::from_vector<bool>({true, false}, {2, 1});
  auto q = tensor::from_vector<bool>({true, false, false}, {3});
  CHECK(env.run_ok(make_node("LogicalOr", "or", dtype::boolean, {}, {dtype::boolean}), {p, q})
          .to_vector<int>() == std::vector<int>{1, 1, 1, 1, 0, 0});
  auto halves = tensor::from_vector<double>({-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 2.4999});
  CHECK(env.run_ok(make_node("Round", "round", dtype::float64), {halves}).to_vector<double>() ==
        std::vector<double>{-2, -2, -0, 0, 2, 2, 4, 2});
  auto ints = tensor::from_vector<std::int64_t>({-5, 0, 3});
  CHECK(env.run_ok(make_node("Abs", "abs", dtype::int64), {ints}).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{5, 0, 3});
  CHECK(env.run_ok(make_node("Sign", "sign", dtype::int64), {ints}).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{-1, 0, 1});
}

TEST_CASE("Where gives the row-major coordinates of the true elements of every rank, on the CPU (no GPU kernel, as Unique)", "[elementwise]") {
  kernel_test_env env;
  std::mt19937_64 draw{seed};
  for (auto shape : {tensor_shape{}, tensor_shape{7}, tensor_shape{3, 4}, tensor_shape{2, 3, 5},
                     tensor_shape{4, 0}, tensor_shape{2, 1, 3, 2}}) {
    INFO("shape " << shape.to_string() << ", seed " << seed);
    std::vector<bool> values;
    for (std::int64_t i = 0; i < shape.num_elements(); ++i)
      values.push_back(draw() % 3 == 0);
    auto c = tensor::from_vector<bool>(values, shape);
    auto out = env.run_ok(make_node("Where", "where", dtype::boolean, {}, {dtype::int64}), {c});
    std::vector<std::int64_t> expected;
    std::int64_t count = 0;
    for (std::int64_t i = 0; i < shape.num_elements(); ++i) {
      if (!values[static_cast<std::size_t>(i)])
        continue;
      ++count;
      // Index i's coordinates, last dimension fastest.
      std::vector<std::int64_t> at(static_cast<std::size_t>(shape.rank()));
      auto rest = i;
      for (int d = shape.rank() - 1; d >= 0; --d) {
        at[static_cast<std::size_t>(d)] = rest % shape.dim(d);
        rest /= shape.dim(d);
      }
      expected.insert(expected.end(), at.begin(), at.end());
    }
    REQUIRE(out.shape() == (tensor_shape{count, shape.rank()}));
    CHECK(out.to_vector<std::int64_t>() == expected);
  }
}

TEST_CASE("SelectV2 picks elementwise, broadcasting condition and branches together",
          "[kernels][elementwise][broadcast]") {
  kernel_test_env env;
  auto select = [](dtype branches) {
    return make_node("SelectV2", "select", dtype::boolean, {}, {branches});
  };
  // Same shapes, large enough for the intra-op pool.
  test_random random{seed};
  auto t = random.uniform<float>({300, 257});
  auto e = random.uniform<float>({300, 257});
  tensor c{dtype::boolean, {300, 257}};
  std::vector<double> expected;
  auto vt = as_doubles(t);
  auto ve = as_doubles(e);
  for (std::int64_t i = 0; i < c.num_elements(); ++i) {
    c.data<bool>()[i] = vt[static_cast<std::size_t>(i)] > ve[static_cast<std::size_t>(i)];
    expected.push_back(std::max(vt[static_cast<std::size_t>(i)], ve[static_cast<std::size_t>(i)]));
  }
  require_near(env.run_ok(select(dtype::float32), {c, t, e}), {300, 257}, expected, 0.0);

  // A column of conditions, a row of values and a scalar.
  auto column = tensor::from_vector<bool>({true, false}, {2, 1});
  auto row = tensor::from_vector<std::int64_t>({1, 2, 3}, {3});
  auto zero = tensor::scalar<std::int64_t>(0);
  CHECK(env.run_ok(select(dtype::int64), {column, row, zero}).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{1, 2, 3, 0, 0, 0});
  CHECK(env.run_ok(select(dtype::int64), {column, zero, row}).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{0, 0, 0, 1, 2, 3});
  auto yes = tensor::from_vector<bool>({true, true});
  auto no = tensor::from_vector<bool>({false, false});
  auto pick = tensor::from_vector<bool>({true, false});
  CHECK(env.run_ok(select(dtype::boolean), {pick, yes, no}).to_vector<int>() ==
        std::vector<int>{1, 0});

  tensor bad_c{dtype::boolean, {4}};
  tensor bad_t{dtype::float64, {3}};
  auto r = env.run(select(dtype::float64), {bad_c, bad_t, bad_t});
  CHECK(r.status.code() == errc::invalid_argument);
  CHECK_THAT(r.status.message(), Catch::Contains("select") && Catch::Contains("[4]") &&
                                   Catch::Contains("[3]"));
}

TEST_CASE("integer division by zero and negative integer powers fail naming the node",
          "[elementwise]") {
  // Checked on the CPU only: a GPU's operands are not on the host (TensorFlow's GPU kernels do
  // not check either).
  kernel_test_env env;
  auto x = tensor::from_vector<std::int32_t>({4, 5});
  auto y = tensor::from_vector<std::int32_t>({2, 0});
  for (const char* op : {"FloorDiv", "FloorMod"}) {
    INFO(op);
    auto r = env.run(make_node(op, "ratio/div", dtype::int32), {x, y});
    CHECK(r.status.code() == errc::invalid_argument);
    CHECK_THAT(r.status.message(), Catch::Contains("ratio/div") &&
                                     Catch::Contains("integer division by zero"));
  }
  auto negative = tensor::from_vector<std::int32_t>({1, -1});
  auto r = env.run(make_node("Pow", "power", dtype::int32), {x, negative});
  CHECK(r.status.code() == errc::invalid_argument);
  CHECK_THAT(r.status.message(), Catch::Contains("power") &&
                                   Catch::Contains("negative integer powers"));
  // Float division by zero is IEEE's: inf, not an error.
  auto fx = tensor::from_vector<float>({1.f});
  auto fy = tensor::from_vector<float>({0.f});
  CHECK(std::isinf(env.run_ok(make_node("FloorDiv", "f", dtype::float32), {fx, fy})
                     .to_vector<float>()[0]));
}

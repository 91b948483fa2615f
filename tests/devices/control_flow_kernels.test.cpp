// The kernels control flow adds besides the executor's primitives: Gather (reading a loop's row
// t), the comparisons a loop condition uses, LogicalAnd and LogicalNot. Tagged [kernels]: they
// run on the CPU, on the test device, and on a GPU where there is one.
#include "support/kernel_test_util.hpp"

#include <cstdint>
#include <vector>

using namespace actorflow;
using namespace actorflow::testing;

namespace {

/// `values` as a tensor of `type` (float32, float64, int32 or int64).
tensor typed(const std::vector<double>& values, tensor_shape shape, dtype type) {
  auto as = [&](auto zero) {
    std::vector<decltype(zero)> converted(values.begin(), values.end());
    return tensor::from_vector(converted, std::move(shape));
  };
  switch (type) {
    case dtype::float64:
      return as(0.0);
    case dtype::int32:
      return as(std::int32_t{0});
    case dtype::int64:
      return as(std::int64_t{0});
    default:
      return as(0.f);
  }
}

/// params [2, 3, 2] holding 0 .. 11 in dtype `type`.
tensor counting(dtype type) {
  std::vector<double> values;
  for (int i = 0; i < 12; ++i)
    values.push_back(i);
  return typed(values, tensor_shape{2, 3, 2}, type);
}

node gather_node(dtype type, std::int64_t axis) {
  return make_node("Gather", "gather", type, {{"axis", axis}});
}

} // namespace

TEST_CASE("Gather picks slices along an axis for every dtype and index type", "[kernels][gather]") {
  kernel_test_env env;
  for (auto type : {dtype::float32, dtype::float64, dtype::int32, dtype::int64}) {
    INFO(to_string(type));
    auto params = counting(type);
    // Axis 1, a scalar index: params[:, 2, :], the axis dropped.
    auto row = env.run_ok(gather_node(type, 1), {params, tensor::scalar(std::int32_t{2})});
    require_near(row, tensor_shape{2, 2}, {4, 5, 10, 11}, 0.0);
    // Axis 0 with int64 indices, repeated and reordered.
    auto picked = env.run_ok(gather_node(type, 0),
                             {params, tensor::from_vector(std::vector<std::int64_t>{1, 0, 1}, {3})});
    require_near(picked, tensor_shape{3, 3, 2},
                 {6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 0.0);
    // The last axis, counted from the end.
    auto last = env.run_ok(gather_node(type, -1),
                           {params, tensor::from_vector(std::vector<std::int32_t>{1}, {1})});
    require_near(last, tensor_shape{2, 3, 1}, {1, 3, 5, 7, 9, 11}, 0.0);
  }
}

TEST_CASE("Gather refuses an axis out of range", "[kernels][gather]") {
  kernel_test_env env;
  auto r = env.run(gather_node(dtype::float32, 3), {counting(dtype::float32), tensor::scalar(std::int32_t{0})});
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.message().find("Gather axis 3 is out of range") != std::string::npos);
}

TEST_CASE("comparisons, LogicalAnd and LogicalNot broadcast like the arithmetic ops",
          "[kernels][comparisons]") {
  kernel_test_env env;
  for (auto type : {dtype::float32, dtype::float64, dtype::int32, dtype::int64}) {
    INFO(to_string(type));
    auto x = typed({1, 2, 3, 4}, tensor_shape{2, 2}, type);
    auto two = typed({2}, tensor_shape{}, type);
    auto compare = [&](const char* op) {
      return env.run_ok(make_node(op, "compare", type, {}, {dtype::boolean}), {x, two});
    };
    require_near(compare("Less"), tensor_shape{2, 2}, {1, 0, 0, 0}, 0.0);
    require_near(compare("LessEqual"), tensor_shape{2, 2}, {1, 1, 0, 0}, 0.0);
    require_near(compare("Greater"), tensor_shape{2, 2}, {0, 0, 1, 1}, 0.0);
    require_near(compare("GreaterEqual"), tensor_shape{2, 2}, {0, 1, 1, 1}, 0.0);
  }
  auto a = tensor::from_vector(std::vector<bool>{true, true, false, false}, {2, 2});
  auto b = tensor::from_vector(std::vector<bool>{true, false}, {2});
  auto both = env.run_ok(make_node("LogicalAnd", "and", dtype::boolean), {a, b});
  require_near(both, tensor_shape{2, 2}, {1, 0, 0, 0}, 0.0);
  auto negated = env.run_ok(make_node("LogicalNot", "not", dtype::boolean), {a});
  require_near(negated, tensor_shape{2, 2}, {0, 0, 1, 1}, 0.0);
}

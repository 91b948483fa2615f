// VariableV2, Assign, AssignAdd, AssignSub: storage in the device's resource manager, sharing
// and in-place rules.
#include "support/kernel_test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

node variable_node(const std::string& name, dtype type = dtype::float32) {
  return make_node("VariableV2", name, type, {{"dtype", type}, {"shape", tensor_shape{3}}});
}

node assign_node(const std::string& op, const std::string& variable, dtype type = dtype::float32) {
  return make_node(op, variable + "/" + op, type, {{"variable", variable}});
}

/// The variable's output as a consumer would see it.
tensor read(kernel_test_env& env, const std::string& name) {
  auto r = env.run(variable_node(name), {});
  REQUIRE(r.status.ok());
  return r.outputs[0];
}

} // namespace

TEST_CASE("an uninitialised variable outputs an empty tensor", "[kernels][variables]") {
  kernel_test_env env;
  auto r = env.run(variable_node("w"), {});
  REQUIRE(r.status.ok());
  REQUIRE(r.outputs.size() == 1);
  CHECK_FALSE(r.outputs[0].is_initialized());
}

TEST_CASE("Assign then AssignAdd and AssignSub update the stored value", "[kernels][variables]") {
  kernel_test_env env;
  auto initial = tensor::from_vector<float>({1, 2, 3});
  auto assigned = env.run_ok(assign_node("Assign", "w"), {read(env, "w"), initial});
  auto assigned_data = env.last_output_data(0);
  CHECK(assigned.to_vector<float>() == std::vector<float>{1, 2, 3});
  // The caller still holds `initial`, so the variable must not adopt its buffer.
  CHECK_FALSE(assigned.shares_buffer_with(initial));

  auto value = read(env, "w");
  CHECK(value.to_vector<float>() == std::vector<float>{1, 2, 3});
  CHECK(env.last_output_data(0) == assigned_data);

  auto added = env.run_ok(assign_node("AssignAdd", "w"),
                          {value, tensor::from_vector<float>({10, 20, 30})});
  CHECK(added.to_vector<float>() == std::vector<float>{11, 22, 33});
  // `value` was still held by this test, so AssignAdd wrote a fresh buffer.
  CHECK(value.to_vector<float>() == std::vector<float>{1, 2, 3});
  CHECK_FALSE(added.shares_buffer_with(value));

  auto subtracted = env.run_ok(assign_node("AssignSub", "w"),
                               {read(env, "w"), tensor::from_vector<float>({1, 1, 1})});
  CHECK(subtracted.to_vector<float>() == std::vector<float>{10, 21, 32});
  CHECK(read(env, "w").to_vector<float>() == std::vector<float>{10, 21, 32});
}

TEST_CASE("AssignAdd updates in place when nobody else holds the buffer", "[kernels][variables]") {
  kernel_test_env env;
  env.run_ok(assign_node("Assign", "v", dtype::int64),
             {tensor{}, tensor::from_vector<std::int64_t>({5, 6, 7})});
  auto state = env.dev().resources().find_variable("v");
  REQUIRE(state != nullptr);
  const void* before = state->value.raw_data();
  {
    // Input 0 is the variable's own output: a reference that ends with the kernel call. The
    // inputs are moved in; a braced list would leave its own copies alive during the call.
    std::vector<tensor> inputs;
    inputs.push_back(state->value);
    inputs.push_back(tensor::from_vector<std::int64_t>({1, 1, 1}));
    auto out = env.run_ok(assign_node("AssignAdd", "v", dtype::int64), std::move(inputs));
    CHECK(out.to_vector<std::int64_t>() == std::vector<std::int64_t>{6, 7, 8});
  }
  CHECK(state->value.raw_data() == before);
}

TEST_CASE("Assign adopts a value nobody else holds and copies a shared one",
          "[kernels][variables]") {
  kernel_test_env env;
  // Only the kernel call holds this value: the variable takes its buffer.
  auto fresh = tensor::from_vector<double>({1, 2, 3});
  auto n = assign_node("Assign", "a", dtype::float64);
  auto kernel = env.make_kernel(n);
  // Built by moves: a braced list would copy and leave a second reference behind.
  std::vector<tensor> inputs;
  inputs.emplace_back();
  inputs.push_back(std::move(fresh));
  auto r = env.run(*kernel, n, std::move(inputs));
  REQUIRE(r.status.ok());
  CHECK(env.last_output_forwards_input(0, 1));

  // A Const's value stays shared with the graph: the variable must keep a copy, so that later
  // in-place updates cannot change the constant.
  auto constant = tensor::from_vector<double>({4, 5, 6});
  r.outputs.clear();
  env.run_ok(n, {tensor{}, constant});
  env.run_ok(assign_node("AssignAdd", "a", dtype::float64),
             {tensor{}, tensor::from_vector<double>({1, 1, 1})});
  CHECK(constant.to_vector<double>() == std::vector<double>{4, 5, 6});
  CHECK(read(env, "a").to_vector<double>() == std::vector<double>{5, 6, 7});
}

TEST_CASE("AssignAdd on an uninitialised variable fails naming the variable",
          "[kernels][variables]") {
  kernel_test_env env;
  auto r = env.run(assign_node("AssignAdd", "weights"),
                   {tensor{}, tensor::from_vector<float>({1, 2, 3})});
  CHECK(r.status.code() == errc::failed_precondition);
  // The node, weights/AssignAdd, is named in every error of its kernel: the words name the variable.
  CHECK_THAT(r.status.message(), Catch::Contains("uninitialized value weights "));
}

TEST_CASE("AssignSub with a value of another shape fails naming the variable and both shapes",
          "[kernels][variables]") {
  kernel_test_env env;
  env.run_ok(assign_node("Assign", "b"), {tensor{}, tensor::from_vector<float>({1, 2, 3})});
  auto r = env.run(assign_node("AssignSub", "b"),
                   {read(env, "b"), tensor::from_vector<float>({1, 2})});
  CHECK(r.status.code() == errc::invalid_argument);
  CHECK_THAT(r.status.message(),
             Catch::Contains("'b'") && Catch::Contains("[3]") && Catch::Contains("[2]"));
}

TEST_CASE("variables live in the device's resource manager", "[kernels][variables]") {
  kernel_test_env first;
  kernel_test_env second;
  first.run_ok(assign_node("Assign", "x"), {tensor{}, tensor::from_vector<float>({1, 2, 3})});
  CHECK(first.dev().resources().variable_names() == std::vector<std::string>{"x"});
  CHECK_FALSE(read(second, "x").is_initialized());
}

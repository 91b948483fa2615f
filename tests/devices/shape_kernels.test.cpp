// Kernels that move or make tensors without arithmetic: Const, Placeholder, Identity, NoOp,
// Reshape, Fill.
#include "support/kernel_test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

TEST_CASE("Const outputs its value without copying", "[kernels][shape]") {
  kernel_test_env env;
  auto value = tensor::from_vector<float>({1, 2, 3});
  auto out = env.run_ok(make_node("Const", "c", dtype::float32, {{"value", value}}), {});
  CHECK(out.to_vector<float>() == value.to_vector<float>());
  // On the host the value is handed out as it is; a GPU keeps a copy in its own memory.
  if (env.dev().type() != "GPU")
    CHECK(out.shares_buffer_with(value));

  auto flag = tensor::scalar<bool>(true);
  CHECK(env.run_ok(make_node("Const", "b", dtype::boolean, {{"value", flag}}), {})
          .scalar_value<bool>());
}

TEST_CASE("Const without a value attribute cannot be made", "[kernels][shape]") {
  auto made = kernel_registry::global().create(make_node("Const", "c", dtype::float32), "CPU");
  REQUIRE_FALSE(made.ok());
  // Any refusal to make node 'c' names it; this one also says what is missing.
  CHECK_THAT(made.error().message(), Catch::Contains("'c'") && Catch::Contains("attribute 'value'"));
}

TEST_CASE("an unfed Placeholder fails with a message naming it, its dtype and its shape",
          "[kernels][shape]") {
  kernel_test_env env;
  auto n = make_node("Placeholder", "x", dtype::float32,
                     {{"dtype", dtype::float32}, {"shape", tensor_shape{-1, 784}}});
  auto r = env.run(n, {});
  CHECK(r.status.code() == errc::invalid_argument);
  CHECK(r.status.message() ==
        "You must feed a value for placeholder tensor 'x' with dtype float32 and shape [?,784]");

  auto unknown = make_node("Placeholder", "y", dtype::int32,
                           {{"dtype", dtype::int32}, {"shape", tensor_shape::unknown()}});
  CHECK(env.run(unknown, {}).status.message() ==
        "You must feed a value for placeholder tensor 'y' with dtype int32");
}

TEST_CASE("Identity forwards its input's buffer for every dtype", "[kernels][shape]") {
  kernel_test_env env;
  for (auto type : {dtype::float32, dtype::float64, dtype::int32, dtype::int64, dtype::boolean}) {
    INFO(to_string(type));
    tensor x{type, {2, 2}};
    env.run_ok(make_node("Identity", "id", type), {x});
    CHECK(env.last_output_forwards_input(0, 0));
  }
}

TEST_CASE("NoOp runs and produces nothing", "[kernels][shape]") {
  kernel_test_env env;
  auto r = env.run(make_node("NoOp", "init", dtype::float32, {}, {dtype::float32}), {});
  CHECK(r.status.ok());
  for (auto& t : r.outputs)
    CHECK_FALSE(t.is_initialized());
}

TEST_CASE("Reshape shares the buffer and infers one unknown dimension", "[kernels][shape]") {
  kernel_test_env env;
  auto x = tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto out = env.run_ok(
    make_node("Reshape", "r", dtype::float32, {{"shape", std::vector<std::int64_t>{3, -1}}}), {x});
  CHECK(out.shape() == tensor_shape{3, 2});
  CHECK(env.last_output_forwards_input(0, 0));
  CHECK(out.to_vector<float>() == x.to_vector<float>());

  auto flat = env.run_ok(
    make_node("Reshape", "flat", dtype::float32, {{"shape", std::vector<std::int64_t>{-1}}}), {x});
  CHECK(flat.shape() == tensor_shape{6});

  auto b = tensor::from_vector<bool>({true, false});
  auto reshaped_bool = env.run_ok(
    make_node("Reshape", "rb", dtype::boolean, {{"shape", std::vector<std::int64_t>{1, 2}}}), {b});
  CHECK(reshaped_bool.shape() == tensor_shape{1, 2});
}

TEST_CASE("Reshape rejects element counts that do not fit and several unknown dimensions",
          "[kernels][shape]") {
  kernel_test_env env;
  tensor x{dtype::int32, {2, 3}};
  auto r = env.run(
    make_node("Reshape", "r", dtype::int32, {{"shape", std::vector<std::int64_t>{4, -1}}}), {x});
  CHECK(r.status.code() == errc::invalid_argument);
  CHECK_THAT(r.status.message(), Catch::Contains("6 values"));
  auto exact = env.run(
    make_node("Reshape", "r", dtype::int32, {{"shape", std::vector<std::int64_t>{4}}}), {x});
  CHECK(exact.status.code() == errc::invalid_argument);

  auto made = kernel_registry::global().create(
    make_node("Reshape", "r2", dtype::int32, {{"shape", std::vector<std::int64_t>{-1, -1}}}), "CPU");
  CHECK_FALSE(made.ok());
}

TEST_CASE("Fill makes a tensor of the attribute's shape from a scalar", "[kernels][shape]") {
  kernel_test_env env;
  auto out = env.run_ok(
    make_node("Fill", "f", dtype::float32, {{"shape", std::vector<std::int64_t>{2, 3}}}),
    {tensor::scalar<float>(1.5f)});
  CHECK(out.shape() == tensor_shape{2, 3});
  CHECK(out.to_vector<float>() == std::vector<float>(6, 1.5f));

  auto big = env.run_ok(
    make_node("Fill", "big", dtype::int64, {{"shape", tensor_shape{300, 400}}}),
    {tensor::scalar<std::int64_t>(-7)});
  CHECK(big.to_vector<std::int64_t>() == std::vector<std::int64_t>(120000, -7));

  auto bad = env.run(
    make_node("Fill", "bad", dtype::float32, {{"shape", std::vector<std::int64_t>{2}}}),
    {tensor::from_vector<float>({1, 2})});
  CHECK(bad.status.code() == errc::invalid_argument);
}

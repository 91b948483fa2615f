// The CPU device and the kernel registry: what placement and the executor rely on.
#include "support/kernel_test_util.hpp"

#include "devices/device_factory.hpp"
#include "devices/pool_allocator.hpp"
#include "devices/test_device.hpp"

#include <algorithm>
#include <optional>

using namespace actorflow;
using namespace actorflow::testing;

TEST_CASE("the CPU device is synchronous and allocates from the host pool", "[cpu_device]") {
  kernel_test_env env;
  auto& dev = env.dev();
  CHECK(dev.is_synchronous());
  CHECK(dev.type() == "CPU");
  CHECK(dev.full_name() == "/job:localhost/replica:0/task:0/device:CPU:0");
  CHECK(dev.device_allocator() == &host_pool_allocator());
}

TEST_CASE("making a CPU device leaves the process's default host allocator alone",
          "[cpu_device]") {
  // Installing it is the runtime env's decision (devices/runtime_env.hpp), not a device's.
  auto* before = default_host_allocator();
  auto dev = make_cpu_device(*device_name::parse("/job:localhost/replica:0/task:0/device:CPU:0"),
                             nullptr);
  CHECK(dev != nullptr);
  CHECK(default_host_allocator() == before);
}

TEST_CASE("host transfers on the CPU device hand back the same tensor", "[cpu_device]") {
  kernel_test_env env;
  auto t = tensor::from_vector<float>({1, 2, 3});
  std::optional<result<tensor>> on_device;
  env.dev().copy_from_host(t, [&](result<tensor> r) { on_device = std::move(r); });
  REQUIRE(on_device.has_value());
  REQUIRE(on_device->ok());
  CHECK((*on_device)->shares_buffer_with(t));
  std::optional<result<tensor>> back;
  env.dev().copy_to_host(**on_device, [&](result<tensor> r) { back = std::move(r); });
  REQUIRE(back.has_value());
  REQUIRE(back->ok());
  CHECK((*back)->shares_buffer_with(t));
  auto copy = env.dev().copy_on_device(t);
  REQUIRE(copy.ok());
  CHECK_FALSE(copy->shares_buffer_with(t));
  CHECK(copy->to_vector<float>() == std::vector<float>{1, 2, 3});
}

TEST_CASE("kernel_context allocates outputs from the device and forwards its pool",
          "[cpu_device]") {
  kernel_test_env env;
  auto n = make_node("Identity", "id", dtype::float32);
  kernel_context ctx{n, env.dev(), 7, {}};
  CHECK(ctx.step_id() == 7);
  CHECK(&ctx.intra_op_pool() == &env.dev().intra_op_pool());
  CHECK(&ctx.resources() == &env.dev().resources());
  auto before = host_pool_allocator().stats().allocations;
  auto t = ctx.allocate_output(0, dtype::int32, {4});
  CHECK(host_pool_allocator().stats().allocations == before + 1);
  CHECK(ctx.outputs()[0].shares_buffer_with(t));
  ctx.fail(make_error(errc::internal, "first"));
  ctx.fail(make_error(errc::internal, "second"));
  CHECK(ctx.status().message() == "first");
}

TEST_CASE("a kernel that throws becomes an error value", "[cpu_device]") {
  class throwing_kernel : public op_kernel {
  public:
    using op_kernel::op_kernel;
    void compute(kernel_context&) override { throw std::runtime_error("boom"); }
  };
  kernel_test_env env;
  auto n = make_node("Boom", "boom", dtype::float32);
  throwing_kernel kernel{n};
  bool done = false;
  kernel_context ctx{n, env.dev(), 1, {}};
  env.dev().compute(kernel, ctx, [&] { done = true; });
  CHECK(done);
  CHECK(ctx.status().code() == errc::internal);
  CHECK_THAT(ctx.status().message(), Catch::Contains("boom"));
}

TEST_CASE("without CUDA there are no GPUs", "[cpu_device]") {
  // No GPU exactly when there is a reason for none (no driver, nothing visible), and then no
  // task gets a GPU device.
  INFO(gpu_absence_reason());
  CHECK((gpu_count() == 0) == !gpu_absence_reason().empty());
  if (gpu_count() == 0)
    CHECK_FALSE(why_no_device("GPU", device_factory_options{}).empty());
  set_blas_threads(1);
}

TEST_CASE("the global registry has a CPU kernel for every op in the op list",
          "[kernel_registry]") {
  auto& registry = kernel_registry::global();
  const std::vector<std::string> float_ops{
    "Const", "Placeholder", "VariableV2", "Assign", "AssignAdd", "AssignSub", "Identity", "Neg",
    "Square", "Sqrt", "Exp", "Log", "Relu", "Sigmoid", "Tanh", "Add", "Sub", "Mul", "Div",
    "Equal", "Cast", "MatMul", "Sum", "Mean", "Max", "ArgMax", "ArgMin", "Reshape", "Softmax",
    "SoftmaxCrossEntropyWithLogits", "Fill", "RandomUniform", "RandomStandardNormal",
    "TruncatedNormal", "NoOp"};
  for (auto& op : float_ops) {
    INFO(op);
    CHECK(registry.has(op, "CPU", dtype::float32));
    CHECK(registry.has(op, "CPU", dtype::float64));
  }
  for (auto& op : {"Identity", "Add", "Sub", "Mul", "Neg", "Square", "Sum", "Max", "Equal", "Cast",
                   "Reshape", "Fill", "Const", "Placeholder", "VariableV2", "Assign", "AssignAdd",
                   "AssignSub"}) {
    INFO(op);
    CHECK(registry.has(op, "CPU", dtype::int32));
    CHECK(registry.has(op, "CPU", dtype::int64));
  }
  for (auto& op : {"Identity", "Const", "Placeholder", "Equal", "Cast", "Reshape"}) {
    INFO(op);
    CHECK(registry.has(op, "CPU", dtype::boolean));
  }
  CHECK_FALSE(registry.has("Div", "CPU", dtype::int32));
  CHECK_FALSE(registry.has("MatMul", "GPU", dtype::int32));
}

TEST_CASE("creating a kernel that is not registered names op, device type, dtype and node",
          "[kernel_registry]") {
  auto n = make_node("MatMul", "mm", dtype::int32);
  auto made = kernel_registry::global().create(n, "GPU");
  REQUIRE_FALSE(made.ok());
  CHECK(made.error().code() == errc::unimplemented);
  CHECK(made.error().message() ==
        "no kernel registered for op 'MatMul' on device type 'GPU' with dtype int32 (node 'mm')");
}

TEST_CASE("a registry can be filled by hand", "[kernel_registry]") {
  class nothing : public op_kernel {
  public:
    using op_kernel::op_kernel;
    void compute(kernel_context&) override {}
  };
  kernel_registry registry;
  CHECK_FALSE(registry.has("Foo", "CPU", dtype::float32));
  registry.add({"Foo", "CPU", dtype::float32}, make_kernel<nothing>);
  registry.add("Bar", "GPU", {dtype::int32, dtype::int64}, make_kernel<nothing>);
  CHECK(registry.has("Foo", "CPU", dtype::float32));
  CHECK_FALSE(registry.has("Foo", "CPU", dtype::float64));
  CHECK(registry.has("Bar", "GPU", dtype::int64));
  auto made = registry.create(make_node("Bar", "bar", dtype::int32), "GPU");
  REQUIRE(made.ok());
  CHECK((*made)->name() == "bar");
}

TEST_CASE("the registry lists a device type's kernels and the test device has the CPU's",
          "[cpu_device]") {
  auto& registry = kernel_registry::global();
  auto cpu = registry.kernels_for("CPU");
  CHECK(std::find(cpu.begin(), cpu.end(), kernel_key_name("MatMul", dtype::float32)) != cpu.end());
  CHECK(std::find(cpu.begin(), cpu.end(), "MatMul:float32") != cpu.end());
  CHECK(std::is_sorted(cpu.begin(), cpu.end()));
  CHECK(registry.kernels_for(test_device_type) == cpu);
  CHECK(registry.kernels_for("NO_SUCH_TYPE").empty());
}

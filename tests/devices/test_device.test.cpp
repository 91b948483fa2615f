// The test device: the GPU's path (a compute stream on its own thread, device memory, copies
// on streams of their own, completions on a callback thread) on a machine without a GPU.
#include "support/kernel_test_util.hpp"

#include "devices/executor.hpp"
#include "devices/host_stream.hpp"
#include "devices/test_device.hpp"
#include "graph/ops.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

using namespace actorflow;
using namespace actorflow::testing;

namespace {

constexpr auto bounded_wait = std::chrono::seconds(60);

std::unique_ptr<device> make_test_device_with(test_device_options options = {}) {
  return make_test_device(test_device_name(test_device_type), nullptr, options);
}

tensor to_device(device& dev, const tensor& host) {
  auto copy = copy_from_host_and_wait(dev, host);
  REQUIRE(copy.ok());
  return *copy;
}

tensor to_host(device& dev, const tensor& on_device) {
  auto copy = copy_to_host_and_wait(dev, on_device);
  REQUIRE(copy.ok());
  return *copy;
}

/// Records the thread it ran on; waits for `release` first, so a test can show that compute()
/// returned before the kernel ran. Writes `fill` into its input in place when asked to.
class probe_kernel final : public op_kernel {
public:
  explicit probe_kernel(const node& n) : op_kernel(n) {}

  void compute(kernel_context& ctx) override {
    release.get_future().wait_for(bounded_wait);
    ran_on = std::this_thread::get_id();
    if (fill != 0 && ctx.num_inputs() > 0) {
      auto* p = ctx.input(0).data<float>();
      for (std::int64_t i = 0; i < ctx.input(0).num_elements(); ++i)
        p[i] = fill;
    }
  }

  std::promise<void> release;
  std::thread::id ran_on;
  float fill = 0;
};

/// Runs `partition` on `dev` through the executor with `feeds`; returns the fetched tensors.
result<std::vector<tensor>> run_step(device& dev, std::shared_ptr<const graph> partition,
                                     std::vector<std::pair<std::string, tensor>> feeds,
                                     std::vector<std::string> fetches) {
  auto plan = executor_plan::make(std::move(partition), dev, kernel_registry::global());
  if (!plan)
    return plan.error();
  std::promise<result<std::vector<tensor>>> finished;
  auto step = std::make_shared<step_execution>(*plan, 1, step_hooks{});
  step->start(std::move(feeds), std::move(fetches), [&](status s, std::vector<tensor> values) {
    if (!s.ok())
      finished.set_value(std::move(s));
    else
      finished.set_value(std::move(values));
  });
  auto future = finished.get_future();
  REQUIRE(future.wait_for(bounded_wait) == std::future_status::ready);
  return future.get();
}

} // namespace

TEST_CASE("the test device computes on its stream and reports completion on another thread",
          "[test_device]") {
  auto dev = make_test_device_with();
  CHECK_FALSE(dev->is_synchronous());
  REQUIRE(dev->memory() != nullptr);
  CHECK(dev->memory()->device == "/device:TEST:0");
  auto n = make_node("Probe", "probe", dtype::float32);
  probe_kernel kernel{n};
  kernel_context ctx{n, *dev, 1, {}};
  std::promise<std::thread::id> done_on;
  dev->compute(kernel, ctx, [&] { done_on.set_value(std::this_thread::get_id()); });
  // compute() came back while the kernel still waits for its release: it only enqueued it.
  CHECK(kernel.ran_on == std::thread::id{});
  kernel.release.set_value();
  auto future = done_on.get_future();
  REQUIRE(future.wait_for(bounded_wait) == std::future_status::ready);
  auto callback_thread = future.get();
  CHECK(kernel.ran_on != std::thread::id{});
  CHECK(kernel.ran_on != std::this_thread::get_id());
  CHECK(callback_thread != std::this_thread::get_id());
  CHECK(callback_thread != kernel.ran_on);
}

TEST_CASE("tensors in test device memory refuse host accessors and name the device",
          "[test_device]") {
  auto dev = make_test_device_with();
  auto on_device = to_device(*dev, tensor::from_vector<float>({1, 2, 3}));
  CHECK_FALSE(on_device.on_host());
  CHECK(on_device.space() == dev->memory());
  CHECK_THROWS_WITH(on_device.to_vector<float>(),
                    Catch::Contains("to_vector") && Catch::Contains("/device:TEST:0"));
  CHECK_THROWS_AS(on_device.scalar_value<float>(), device_memory_access);
  CHECK_THROWS_AS(on_device.clone(), device_memory_access);
  CHECK_FALSE(on_device.sliced(0, 0, 1).ok());
  CHECK(on_device.debug_string() == "float32[3] in the memory of /device:TEST:0");
  auto back = to_host(*dev, on_device);
  CHECK(back.on_host());
  CHECK(back.to_vector<float>() == std::vector<float>{1, 2, 3});
}

TEST_CASE("a copy to the host waits for the kernel enqueued before it", "[test_device]") {
  auto dev = make_test_device_with();
  auto on_device = to_device(*dev, tensor::from_vector<float>({0, 0, 0, 0}));
  auto n = make_node("Probe", "probe", dtype::float32);
  probe_kernel kernel{n};
  kernel.fill = 7;
  kernel_context ctx{n, *dev, 1, {on_device}};
  std::promise<void> kernel_done;
  dev->compute(kernel, ctx, [&] { kernel_done.set_value(); });
  // Asked for while the kernel is held back: the copy must still see what the kernel writes.
  std::promise<result<tensor>> copied;
  dev->copy_to_host(on_device, [&](result<tensor> r) { copied.set_value(std::move(r)); });
  auto copy_future = copied.get_future();
  CHECK(copy_future.wait_for(std::chrono::milliseconds(20)) == std::future_status::timeout);
  kernel.release.set_value();
  REQUIRE(copy_future.wait_for(bounded_wait) == std::future_status::ready);
  auto host = copy_future.get();
  REQUIRE(host.ok());
  CHECK(host->to_vector<float>() == std::vector<float>{7, 7, 7, 7});
  REQUIRE(kernel_done.get_future().wait_for(bounded_wait) == std::future_status::ready);
}

TEST_CASE("a step on the test device matches the CPU and fetches land in host memory",
          "[test_device]") {
  auto g = std::make_shared<graph>();
  auto x = ops::placeholder(*g, dtype::float32, tensor_shape{2, 3}, "x");
  auto w = ops::constant(*g, std::vector<float>{1, -2, 3, 0.5f, -1, 2}, {3, 2}, "w");
  auto y = ops::relu(ops::matmul(x, w), "y");
  auto total = ops::reduce_sum(y * y, {}, false, "total");
  auto input = tensor::from_vector<float>({1, 2, 3, -4, 5, -6}, {2, 3});

  auto cpu = run_step(*make_cpu_device(test_cpu_name(), nullptr), g, {{"x", input}},
                      {y.tensor_name(), total.tensor_name()});
  REQUIRE(cpu.ok());
  auto dev = make_test_device_with();
  auto on_test = run_step(*dev, g, {{"x", input}}, {y.tensor_name(), total.tensor_name()});
  INFO(on_test.error().to_string());
  REQUIRE(on_test.ok());
  REQUIRE(on_test->size() == 2);
  CHECK(on_test->at(0).on_host());
  CHECK(on_test->at(0).to_vector<float>() == cpu->at(0).to_vector<float>());
  CHECK(on_test->at(1).scalar_value<float>() == cpu->at(1).scalar_value<float>());
  // The intermediate tensors came from the device's allocator.
  auto usage = dev->memory_stats();
  REQUIRE(usage.has_value());
  CHECK(usage->peak_bytes_in_use > 0);
}

TEST_CASE("running out of test device memory fails the step naming the node and the bytes",
          "[test_device]") {
  test_device_options small;
  small.card_bytes = std::size_t{1} << 20;
  auto dev = make_test_device_with(small);
  auto g = std::make_shared<graph>();
  auto big = ops::fill(*g, {1024, 1024}, ops::constant(*g, 1.f, "one"), "big");
  auto r = run_step(*dev, g, {}, {big.tensor_name()});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == errc::resource_exhausted);
  CHECK_THAT(r.error().message(), Catch::Contains("node 'big'") &&
                                    Catch::Contains("/device:TEST:0") &&
                                    Catch::Contains("cannot allocate 4.0 MiB") &&
                                    Catch::Contains("in use"));
  // Nothing is lost: the device still runs a step that fits.
  auto g2 = std::make_shared<graph>();
  auto small_fill = ops::fill(*g2, {16}, ops::constant(*g2, 2.f, "two"), "small");
  auto ok = run_step(*dev, g2, {}, {small_fill.tensor_name()});
  REQUIRE(ok.ok());
  CHECK(ok->at(0).to_vector<float>() == std::vector<float>(16, 2.f));
}

TEST_CASE("the memory fraction caps what a test device may use", "[test_device]") {
  test_device_options options;
  options.card_bytes = std::size_t{8} << 20;
  options.memory_fraction = 0.25;
  auto dev = make_test_device_with(options);
  auto usage = dev->memory_stats();
  REQUIRE(usage.has_value());
  CHECK(usage->bytes_limit == std::size_t{2} << 20);
}

TEST_CASE("host streams run work in order and events order work across streams",
          "[test_device]") {
  std::vector<int> order;
  std::mutex mutex;
  auto note = [&](int v) {
    std::lock_guard<std::mutex> guard{mutex};
    order.push_back(v);
  };
  std::promise<void> release;
  auto released = release.get_future().share();
  {
    host_stream first{"first"}, second{"second"};
    first.enqueue([&, released] {
      released.wait_for(bounded_wait);
      note(1);
    });
    first.enqueue([&] { note(2); });
    second.wait_for(first.record());
    second.enqueue([&] { note(3); });
    release.set_value();
  } // the streams drain before they join
  CHECK(order == std::vector<int>{1, 2, 3});
}

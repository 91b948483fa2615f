#include "devices/device.hpp"
#include "devices/kernel.hpp"

#include <future>

namespace actorflow {

namespace {

status timed_out(device& dev, const char* what, std::chrono::milliseconds timeout) {
  return make_error(errc::deadline_exceeded, std::string{what} + " on " + dev.full_name() +
                                               " did not finish within " +
                                               std::to_string(timeout.count()) + " ms");
}

/// Starts a copy and waits for it; the promise is shared so that a copy finishing after the
/// wait gave up writes into live memory.
template <class Start>
result<tensor> await_copy(device& dev, const char* what, std::chrono::milliseconds timeout,
                          Start start) {
  auto copied = std::make_shared<std::promise<result<tensor>>>();
  auto future = copied->get_future();
  start([copied](result<tensor> r) { copied->set_value(std::move(r)); });
  if (future.wait_for(timeout) != std::future_status::ready)
    return timed_out(dev, what, timeout);
  return future.get();
}

} // namespace

result<tensor> copy_to_host_and_wait(device& dev, const tensor& on_device,
                                     std::chrono::milliseconds timeout) {
  if (on_device.on_host())
    return on_device;
  return await_copy(dev, "a copy to the host", timeout,
                    [&](device::copy_done done) { dev.copy_to_host(on_device, std::move(done)); });
}

result<tensor> device::allocate_copy_of_host(const tensor& host, allocator* memory) const {
  if (!host.on_host())
    return make_error(errc::invalid_argument, "copy_from_host onto " + full_name() +
                                                " was given a tensor in the memory of " +
                                                host.space()->device);
  tensor copy;
  if (auto st = run_guarded([&] { copy = tensor{host.type(), host.shape(), memory}; }); !st.ok())
    return st.with_context("copying " + host.debug_string(0) + " to " + full_name());
  return copy;
}

result<tensor> copy_from_host_and_wait(device& dev, const tensor& host,
                                       std::chrono::milliseconds timeout) {
  // Already where it must go (the host for a CPU, this device's memory): nothing to copy.
  if (host.space() == dev.memory())
    return host;
  return await_copy(dev, "a copy from the host", timeout,
                    [&](device::copy_done done) { dev.copy_from_host(host, std::move(done)); });
}

status compute_and_wait(device& dev, op_kernel& kernel, kernel_context& ctx,
                        std::chrono::milliseconds timeout) {
  auto finished = std::make_shared<std::promise<void>>();
  auto future = finished->get_future();
  dev.compute(kernel, ctx, [finished] { finished->set_value(); });
  if (future.wait_for(timeout) != std::future_status::ready)
    // ctx must outlive the kernel; the caller's ctx is on its stack, so a kernel that never
    // finishes is a broken device, not something to recover from here.
    return timed_out(dev, ("kernel '" + kernel.name() + "'").c_str(), timeout);
  return ctx.status();
}

void report_allocator_bytes(metric_sink& out, const std::string& allocator, std::size_t bytes_in_use,
                            std::size_t peak_bytes_in_use) {
  out.gauge("actorflow_allocator_bytes_in_use", "Bytes an allocator has handed out now.",
            {{"allocator", allocator}}, static_cast<double>(bytes_in_use));
  out.gauge("actorflow_allocator_peak_bytes_in_use", "The most bytes an allocator had handed out.",
            {{"allocator", allocator}}, static_cast<double>(peak_bytes_in_use));
}

metrics_registry::collector_handle report_device_memory(std::weak_ptr<device> dev) {
  return default_metrics().collect([dev = std::move(dev)](metric_sink& out) {
    auto alive = dev.lock();
    if (!alive)
      return;
    if (auto usage = alive->memory_stats())
      report_allocator_bytes(out, alive->full_name(), usage->bytes_in_use, usage->peak_bytes_in_use);
  });
}

} // namespace actorflow

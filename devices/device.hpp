#pragma once
/// Devices: where kernels run. The CPU device runs kernels synchronously on the calling thread;
/// asynchronous devices (GPUs, the test device) enqueue work on a stream and call `done` when
/// it has finished. Tensors of such devices live in their own memory space (tensor::on_host()
/// is false): the executor copies what crosses between host and device memory.
///   auto cpu = make_cpu_device(device_name::parse("/job:localhost/replica:0/task:0/device:CPU:0").value(),
///                              shared_pools);
///   cpu->compute(kernel, ctx, [] { /* outputs are ready */ });
/// A device is owned by the one device actor that drives it; compute() may be called from
/// several threads at once (the inter-op pool), so implementations are thread-safe.

#include "devices/kernel.hpp"
#include "graph/device_name.hpp"
#include "graph/metrics.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace actorflow {

class thread_pool;

class device {
public:
  virtual ~device() = default;

  /// The full name, "/job:localhost/replica:0/task:0/device:CPU:0".
  const device_name& name() const { return name_; }
  const std::string& full_name() const { return full_name_; }
  /// "CPU", "GPU", "TEST".
  const std::string& type() const { return *name_.type; }

  /// Where this device's tensors live.
  virtual allocator* device_allocator() = 0;
  /// The memory its tensors live in; null for devices that compute in host memory (the CPU).
  const memory_space* memory() { return device_allocator()->space(); }
  /// Pool for multithreaded kernels.
  virtual thread_pool& intra_op_pool() = 0;
  resource_manager& resources() { return resources_; }

  /// Bytes in use, at peak and at most of the device's own memory; nullopt for host-memory
  /// devices, whose tensors come from the host pool.
  struct memory_usage {
    std::size_t bytes_in_use = 0;
    std::size_t peak_bytes_in_use = 0;
    std::size_t bytes_limit = 0;
  };
  virtual std::optional<memory_usage> memory_stats() const { return std::nullopt; }

  /// Whether compute() always finishes before it returns (lets the executor run inline).
  virtual bool is_synchronous() const = 0;

  /// Runs `kernel` for one step; `done` runs once the outputs are ready (on a CPU, before
  /// compute returns).
  virtual void compute(op_kernel& kernel, kernel_context& ctx, std::function<void()> done) = 0;

  /// Callback of an asynchronous copy: the copy, or why there is none. Called exactly once,
  /// on any thread, never inside the call that started the copy unless the device is
  /// synchronous.
  using copy_done = std::function<void(result<tensor>)>;
  /// Copies a host tensor into this device's memory, after the work enqueued so far. Devices in
  /// host memory hand the same tensor back.
  virtual void copy_from_host(const tensor& host, copy_done done) = 0;
  /// Copies a tensor of this device to host memory once the work that makes it has finished
  /// (send/recv to another device, task or process; fetches).
  virtual void copy_to_host(const tensor& on_device, copy_done done) = 0;
  /// A deep copy in this device's memory, ordered after the work enqueued so far (Assign's
  /// private copy of its value). Errors name the device (out of memory, mostly).
  virtual result<tensor> copy_on_device(const tensor& on_device) = 0;

protected:
  explicit device(device_name name) : name_(std::move(name)), full_name_(name_.to_string()) {}

  /// For copy_from_host implementations of devices with memory of their own: an uninitialised
  /// tensor of `host`'s type and shape from `memory`, or the error, naming this device (a
  /// source that is not in host memory, out of memory).
  result<tensor> allocate_copy_of_host(const tensor& host, allocator* memory) const;

private:
  device_name name_;
  std::string full_name_;
  resource_manager resources_;
};

/// Blocking forms of a device's asynchronous calls, for code that runs outside steps on a
/// thread that may wait (variable shards serving reads and updates, checkpoints, tests). Each
/// waits at most `timeout`, then fails with deadline_exceeded naming the device; never call
/// them from a device's own stream or callback threads.
result<tensor> copy_to_host_and_wait(device& dev, const tensor& on_device,
                                     std::chrono::milliseconds timeout = std::chrono::minutes(1));
/// A tensor already in `dev`'s memory comes back as it is.
result<tensor> copy_from_host_and_wait(device& dev, const tensor& host,
                                       std::chrono::milliseconds timeout = std::chrono::minutes(1));
/// Runs `kernel` through dev.compute and waits for `done`; the outcome is ctx.status().
status compute_and_wait(device& dev, op_kernel& kernel, kernel_context& ctx,
                        std::chrono::milliseconds timeout = std::chrono::minutes(1));

/// Reports an allocator's bytes in use and peak for the process's metrics
/// (actorflow_allocator_bytes_in_use, actorflow_allocator_peak_bytes_in_use), labelled with
/// `allocator` ("host_pool", or a device's full name for its own memory).
void report_allocator_bytes(metric_sink& out, const std::string& allocator, std::size_t bytes_in_use,
                            std::size_t peak_bytes_in_use);

/// Reports `dev`'s own memory (memory_stats) at every scrape while the handle lives and the
/// device does; devices in host memory report nothing (the host pool covers them).
metrics_registry::collector_handle report_device_memory(std::weak_ptr<device> dev);

/// The CPU device; `intra_op` is shared with other devices or sessions unless the session asks
/// for its own threads.
std::unique_ptr<device> make_cpu_device(device_name name, std::shared_ptr<thread_pool> intra_op);

/// Number of GPUs the CUDA driver shows this process (after CUDA_VISIBLE_DEVICES); 0 without a
/// driver. Asked once, at the first call.
int gpu_count();
/// Why gpu_count() is 0 ("no CUDA driver (...)", "no CUDA device visible ..."); empty when it
/// is not.
std::string gpu_absence_reason();

/// Sets the BLAS's own (process-wide) thread count to `n` so that it does not start a second
/// pool that fights the intra-op pool for cores.
void set_blas_threads(int n);

/// The pools a task's devices compute on: ready nodes on `inter_op`, multithreaded kernels on
/// `intra_op` (whose caller helps, so it has one thread fewer).
struct compute_pools {
  std::shared_ptr<thread_pool> inter_op;
  std::shared_ptr<thread_pool> intra_op;
};

/// Pools of `inter_threads` and `intra_threads` (0: one per core). Leaves the BLAS alone:
/// runtime_env::make_pools also sets its threads to match (devices/runtime_env.hpp).
compute_pools make_compute_pools(int inter_threads, int intra_threads);

/// The BLAS's thread count now.
int blas_threads();

} // namespace actorflow

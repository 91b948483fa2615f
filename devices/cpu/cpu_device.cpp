#include "devices/device.hpp"
#include "devices/cpu/blas_kernels.hpp"
#include "devices/pool_allocator.hpp"
#include "devices/thread_pool.hpp"

#include <cblas.h>

#include <exception>
#include <new>

namespace actorflow {

namespace {

/// Runs kernels on the calling thread; tensors live in host memory from the shared host pool.
class cpu_device final : public device {
public:
  cpu_device(device_name name, std::shared_ptr<thread_pool> intra_op)
    : device(std::move(name)), intra_op_(std::move(intra_op)) {}

  allocator* device_allocator() override { return &host_pool_allocator(); }
  thread_pool& intra_op_pool() override { return *intra_op_; }
  bool is_synchronous() const override { return true; }

  void compute(op_kernel& kernel, kernel_context& ctx, std::function<void()> done) override {
    if (kernel.is_async()) {
      if (auto st = run_guarded([&] { kernel.compute_async(ctx, done); }); !st.ok()) {
        ctx.fail(std::move(st));
        done();
      }
      return;
    }
    if (auto st = run_guarded([&] { kernel.compute(ctx); }); !st.ok())
      ctx.fail(std::move(st));
    if (done)
      done();
  }

  // Host memory is this device's memory: hand the same tensor through.
  void copy_from_host(const tensor& host, copy_done done) override { done(host); }
  void copy_to_host(const tensor& on_device, copy_done done) override { done(on_device); }
  result<tensor> copy_on_device(const tensor& on_device) override {
    tensor copy;
    if (auto st = run_guarded([&] { copy = on_device.clone(device_allocator()); }); !st.ok())
      return st.with_context("copying " + std::to_string(on_device.bytes()) + " bytes on " +
                             full_name());
    return copy;
  }

private:
  std::shared_ptr<thread_pool> intra_op_;
};

} // namespace

std::unique_ptr<device> make_cpu_device(device_name name, std::shared_ptr<thread_pool> intra_op) {
  // Before the first GEMM: the BLAS's kernels by this CPU's features (devices/cpu/blas_kernels.hpp).
  (void)blas_kernels();
  if (intra_op == nullptr)
    intra_op = std::make_shared<thread_pool>("intra_op", 0);
  return std::make_unique<cpu_device>(std::move(name), std::move(intra_op));
}

void set_blas_threads(int n) {
  (void)blas_kernels();
  openblas_set_num_threads(n > 0 ? n : resolve_thread_count(0));
}

int blas_threads() { return openblas_get_num_threads(); }

compute_pools make_compute_pools(int inter_threads, int intra_threads) {
  auto intra = resolve_thread_count(intra_threads);
  compute_pools pools;
  pools.intra_op = std::make_shared<thread_pool>("intra_op", intra - 1);
  pools.inter_op = std::make_shared<thread_pool>("inter_op", resolve_thread_count(inter_threads));
  return pools;
}

} // namespace actorflow

#pragma once
/// What the GPU kernels (devices/cuda/kernels/) share: the compute stream and cuBLAS handle of
/// the device a kernel runs on, a base class whose compute() turns a launch's error into a
/// failed kernel, input checks, and grid sizes. Internal to devices/cuda/; includes the CUDA
/// runtime's header.
///   class relu_kernel final : public cuda_kernel {
///     status launch(kernel_context& ctx, cudaStream_t stream) override {
///       AF_RETURN_IF_ERROR(expect_input(ctx, 0, dtype::float32));
///       ...; relu<<<blocks_for(n), default_block, 0, stream>>>(x, y, n);
///       AF_CUDA_RETURN_IF_ERROR(cudaGetLastError());
///       return {};
///     }
///   };
/// GPU kernels are stream-ordered: launch() enqueues work on `stream` and returns; the device
/// reports the kernel done once it is enqueued, and everything that reads its outputs is
/// enqueued after it on the same stream (or waits for it with an event).

#include "devices/cuda/completion_poller.hpp"
#include "devices/cuda/cuda_check.hpp"
#include "devices/device.hpp"
#include "devices/kernel.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

struct cublasContext;
struct cudnnContext;

namespace actorflow::cuda {

struct cublas_library;

/// The compute stream of the CUDA device `ctx` runs on, with that device made current on the
/// calling thread; an error when ctx's device is not a CUDA device or CUDA fails.
/// (devices/cuda/cuda_device.cpp)
result<cudaStream_t> compute_stream_of(kernel_context& ctx);

struct cuda_card;

/// The card of a kernel that finishes after its compute call returned (a collective across
/// tasks), as it needs it once its kernel_context may be gone: cards live until the process
/// exits. Copyable.
class card_handle {
public:
  /// The card's CUDA ordinal.
  int ordinal() const;
  /// Where its kernels are enqueued.
  cudaStream_t compute_stream() const;
  /// Makes the card current on the calling thread.
  status make_current() const;
  /// A probe (completion_poller) that says whether everything enqueued on the compute stream
  /// until now has finished: an event recorded there now.
  result<completion_poller::probe> compute_stream_probe() const;
  /// Polls `finished` on the card's polling thread until it says so, then calls `done` on its
  /// callback thread (completion_poller::when_done).
  void when_finished(completion_poller::probe finished, completion_poller::callback done) const;

private:
  friend result<card_handle> card_handle_of(kernel_context& ctx);
  explicit card_handle(cuda_card& card) : card_(&card) {}
  cuda_card* card_;
};

/// The card ctx's device runs on; an error when it is not a CUDA device.
/// (devices/cuda/cuda_device.cpp)
result<card_handle> card_handle_of(kernel_context& ctx);

/// Runs `call` with cuBLAS (devices/cuda/cublas_library.hpp) and the handle of ctx's device,
/// which is bound to its compute stream, holding the handle's lock (a cuBLAS handle is not for
/// two threads at once); returns what `call` returns. (devices/cuda/cuda_device.cpp)
status with_cublas(kernel_context& ctx,
                   const std::function<status(const cublas_library&, cublasContext*)>& call);

/// Runs `call` with the cuDNN handle (cudnnHandle_t) of ctx's device, which is bound to its
/// compute stream, holding the handle's lock (a cuDNN handle is not for two threads at once);
/// returns what `call` returns. The handle is made at the first call on each card (it loads
/// cuDNN's sub-libraries: programs without convolutions never pay for it). A build without
/// cuDNN returns errc::unimplemented and never calls `call`. (devices/cuda/cuda_device.cpp)
status with_cudnn(kernel_context& ctx, const std::function<status(cudnnContext*)>& call);

/// Base of the GPU kernels: compute() makes the device current, hands its compute stream to
/// launch(), and fails the kernel with launch()'s error.
class cuda_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;

  void compute(kernel_context& ctx) final {
    auto stream = compute_stream_of(ctx);
    auto st = stream ? launch(ctx, *stream) : stream.error();
    if (!st.ok())
      ctx.fail(std::move(st));
  }

protected:
  /// Checks the inputs, allocates the outputs and enqueues the work on `stream`.
  virtual status launch(kernel_context& ctx, cudaStream_t stream) = 0;
};

/// input_status (devices/kernel.hpp), and input `i` lives in the memory of ctx's device. The
/// executor copies inputs into the device's memory; a kernel that read a host pointer anyway
/// would fault, and a fault ends the CUDA context for the whole process.
inline status expect_input(kernel_context& ctx, int i, dtype expected) {
  AF_RETURN_IF_ERROR(input_status(ctx, i, expected));
  const tensor& t = ctx.input(i);
  if (t.space() != ctx.dev().memory())
    return make_error(errc::internal, ctx.def().op + " input " + std::to_string(i) + " is in " +
                                        (t.on_host() ? std::string{"host memory"}
                                                     : "the memory of " + t.space()->device) +
                                        ", not in the memory of " + ctx.dev().full_name());
  return {};
}

/// expect_input for inputs 0 .. count-1.
inline status expect_inputs(kernel_context& ctx, int count, dtype expected) {
  for (int i = 0; i < count; ++i)
    AF_RETURN_IF_ERROR(expect_input(ctx, i, expected));
  return {};
}

/// Threads per block of the elementwise kernels.
inline constexpr int default_block = 256;

/// Blocks for `n` items at `block` threads each, capped: the kernels loop over the rest
/// (grid-stride), and a few blocks per multiprocessor already fill a card. `n` > 0.
inline unsigned int blocks_for(std::int64_t n, int block = default_block) {
  constexpr std::int64_t max_blocks = 1 << 16;
  return static_cast<unsigned int>(std::min<std::int64_t>((n + block - 1) / block, max_blocks));
}

#ifdef __CUDACC__
/// Launches `body` over `n` items (blocks_for(n) blocks of default_block threads; the kernels
/// loop grid-stride over the rest) on `stream`; the launch's error, if any.
template <class... Params, class... Args>
status launch_over(std::int64_t n, cudaStream_t stream, void (*body)(Params...), Args&&... args) {
  body<<<blocks_for(n), default_block, 0, stream>>>(std::forward<Args>(args)...);
  AF_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}
#endif

} // namespace actorflow::cuda

namespace actorflow::cuda {

/// Registers Kernel<T> under (op, "GPU", dtype_of<T>()) for each listed T; only those
/// instantiations are compiled.
template <template <class> class Kernel, class... Ts>
void add_gpu_kernels(kernel_registry& registry, const std::string& op) {
  (registry.add(kernel_key{op, "GPU", dtype_of<Ts>()}, &make_kernel<Kernel<Ts>>), ...);
}

} // namespace actorflow::cuda

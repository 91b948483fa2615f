// The CUDA GPU device (devices/cuda/cuda_device.hpp). It has the test device's structure
// (devices/test_device.cpp) with CUDA streams for host_streams and an event-polling thread for
// stream_callbacks:
//   compute         kernels enqueue on the card's compute stream and are done once enqueued
//                   (stream order makes every later kernel see their outputs);
//   copy_from_host  host-to-device stream: waits for the compute stream (the destination's
//                   memory may still be read by kernels enqueued before it was freed), copies
//                   (through pinned staging when small), records an event that the compute
//                   stream waits for, and reports the copy once the event has happened;
//   copy_to_host    device-to-host stream: waits for the compute stream (the kernel making
//                   the tensor), copies into host memory (pinned when small), reports the copy
//                   once its event has happened;
//   copy_on_device  on the compute stream, in order with the kernels.
// Tensors a copy reads or writes are held by its completion callback until its event happened.
#include "devices/cuda/cuda_device.hpp"

#include "devices/bfc_allocator.hpp"
#include "devices/cuda/completion_poller.hpp"
#include "devices/cuda/cublas_library.hpp"
#include "devices/cuda/cuda_check.hpp"
#include "devices/cuda/cuda_kernel_util.hpp"
#include "devices/cuda/gpu_memory.hpp"
#include "devices/cuda/kernels/cuda_kernels.hpp"
#include "devices/device_factory.hpp"
#include "devices/thread_pool.hpp"

#include <cuda_runtime_api.h>
#ifdef ACTORFLOW_HAVE_CUDNN
#include <cudnn.h>
#endif

#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace actorflow {

namespace cuda {

namespace {

/// Tensors up to this size go through pinned host memory: a copy from or to pageable memory
/// makes the calling thread wait for the stream (CUDA stages it synchronously); bigger ones pay
/// that rather than hold much pinned memory.
constexpr std::size_t pinned_staging_limit = std::size_t{16} << 20;
/// The most pinned host memory the process takes for staging and copied-back tensors
/// (TensorFlow's gpu_host_allocator); beyond it copies use pageable memory.
constexpr std::size_t pinned_memory_limit = std::size_t{1} << 30;
/// Kernels completed inline, one inside the other's done(), before a completion goes through
/// the callback thread instead: the executor starts the next node from done(), so a long chain
/// of small kernels would otherwise nest that deep.
constexpr int max_nested_completions = 16;

thread_local int nested_completions = 0;

status make_current(int ordinal) {
  AF_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
  return {};
}

/// Device memory regions from cudaMalloc on one card.
class cuda_region_source final : public region_source {
public:
  explicit cuda_region_source(int ordinal) : ordinal_(ordinal) {}

  void* allocate_region(std::size_t bytes) override {
    void* region = nullptr;
    auto st = [&]() -> status {
      AF_RETURN_IF_ERROR(make_current(ordinal_));
      AF_CUDA_RETURN_IF_ERROR(cudaMalloc(&region, bytes));
      return {};
    }();
    if (!st.ok()) {
      remember(st);
      return nullptr;
    }
    return region;
  }

  void free_region(void* region, std::size_t) override {
    auto st = [&]() -> status {
      AF_RETURN_IF_ERROR(make_current(ordinal_));
      AF_CUDA_RETURN_IF_ERROR(cudaFree(region));
      return {};
    }();
    if (!st.ok())
      remember(st);
  }

  /// Why the last region could not be had or freed; empty if nothing failed.
  std::string last_failure() const {
    std::lock_guard<std::mutex> guard{mutex_};
    return last_failure_;
  }

private:
  void remember(const status& st) {
    std::lock_guard<std::mutex> guard{mutex_};
    last_failure_ = st.to_string();
  }

  int ordinal_;
  mutable std::mutex mutex_;
  std::string last_failure_;
};

/// Page-locked host memory (cudaHostAlloc, usable from every card), for staging copies.
class pinned_region_source final : public region_source {
public:
  void* allocate_region(std::size_t bytes) override {
    void* region = nullptr;
    auto st = [&]() -> status {
      AF_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&region, bytes, cudaHostAllocPortable));
      return {};
    }();
    return st.ok() ? region : nullptr;
  }

  void free_region(void* region, std::size_t) override {
    auto st = [&]() -> status {
      AF_CUDA_RETURN_IF_ERROR(cudaFreeHost(region));
      return {};
    }();
    (void)st; // nothing to tell: the memory is gone either way
  }
};

/// The process's pinned host memory; made at first use, never freed (host tensors anywhere may
/// point into it until the process exits).
bfc_allocator& pinned_host_memory() {
  static auto* memory = [] {
    bfc_options o;
    o.memory_limit = pinned_memory_limit;
    o.allow_growth = true;
    return new bfc_allocator{"pinned host memory", std::make_unique<pinned_region_source>(), o};
  }();
  return *memory;
}

/// A host tensor in pinned memory when it is small enough and there is room, else an empty one.
tensor try_pinned(dtype type, const tensor_shape& shape) {
  if (static_cast<std::size_t>(shape.num_elements()) * size_of(type) > pinned_staging_limit)
    return {};
  try {
    return tensor{type, shape, &pinned_host_memory()};
  } catch (const std::bad_alloc&) {
    return {};
  }
}

/// Events for completions and cross-stream waits, reused: creating one costs a driver call.
class event_pool {
public:
  /// An event of the current device (the caller made the card current).
  result<cudaEvent_t> take() {
    {
      std::lock_guard<std::mutex> guard{mutex_};
      if (!free_.empty()) {
        auto event = free_.back();
        free_.pop_back();
        return event;
      }
    }
    cudaEvent_t event = nullptr;
    AF_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    return event;
  }

  void give_back(cudaEvent_t event) {
    std::lock_guard<std::mutex> guard{mutex_};
    free_.push_back(event);
  }

private:
  std::mutex mutex_;
  std::vector<cudaEvent_t> free_;
};

/// An event taken from a pool, handed back when the last holder lets go.
struct pooled_event {
  pooled_event(event_pool& pool, cudaEvent_t event) : pool(pool), event(event) {}
  ~pooled_event() { pool.give_back(event); }
  pooled_event(const pooled_event&) = delete;
  pooled_event& operator=(const pooled_event&) = delete;

  event_pool& pool;
  cudaEvent_t event;
};

/// Whether `event` has happened, for a completion_poller probe: its error when the work before
/// it on its stream failed.
completion_poller::probe_result query(const pooled_event& event) {
  cudaError_t code = cudaSuccess;
  auto st = [&]() -> status {
    code = cudaEventQuery(event.event);
    if (code == cudaErrorNotReady)
      return {};
    AF_CUDA_RETURN_IF_ERROR(code);
    return {};
  }();
  if (code == cudaErrorNotReady)
    return completion_poller::probe_result::pending();
  return st.ok() ? completion_poller::probe_result::done()
                 : completion_poller::probe_result::failed(std::move(st));
}

} // namespace

/// What the process keeps per card (CUDA ordinal): memory, streams, the cuBLAS handle and the
/// completion threads, shared by every device object on the card (see cuda_device.hpp).
/// Made once, never destroyed: tensors and pending completions may refer to it until exit.
struct cuda_card {
  explicit cuda_card(int ordinal)
    : ordinal(ordinal), space{"/device:GPU:" + std::to_string(ordinal)} {}

  /// Only runs when opening the card failed half way.
  ~cuda_card() {
    if (blas != nullptr)
      (void)blas_library->destroy(blas);
#ifdef ACTORFLOW_HAVE_CUDNN
    if (dnn != nullptr)
      (void)cudnnDestroy(dnn);
#endif
    for (auto* stream : {compute, host_to_device, device_to_host})
      if (stream != nullptr)
        (void)cudaStreamDestroy(stream);
  }

  /// Makes `waiter` wait (on the device, not the host) for what is enqueued on `producer` now.
  status stream_wait(cudaStream_t waiter, cudaStream_t producer) {
    auto event = events.take();
    if (!event)
      return event.error();
    pooled_event held{events, *event};
    // The wait captures the event's state now; the pool may hand the event out again after.
    AF_CUDA_RETURN_IF_ERROR(cudaEventRecord(held.event, producer));
    AF_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(waiter, held.event, 0));
    return {};
  }

  /// An event recorded on `stream` after what is enqueued there now.
  result<std::shared_ptr<pooled_event>> record(cudaStream_t stream) {
    auto event = events.take();
    if (!event)
      return event.error();
    auto held = std::make_shared<pooled_event>(events, *event);
    AF_CUDA_RETURN_IF_ERROR(cudaEventRecord(held->event, stream));
    return held;
  }

  /// Calls `done` on the callback thread once `event` has happened (or with the error that
  /// querying it reports: a fault of earlier work on its stream).
  void when_done(std::shared_ptr<pooled_event> event, completion_poller::callback done) {
    completions->when_done([event = std::move(event)]() { return query(*event); },
                           std::move(done));
  }

  int ordinal;
  /// "NVIDIA H200 (compute capability 9.0, 140 GiB)".
  std::string description;
  memory_space space;
  cuda_region_source* regions = nullptr; // owned by `memory`
  std::unique_ptr<bfc_allocator> memory;
  cudaStream_t compute = nullptr;
  cudaStream_t host_to_device = nullptr;
  cudaStream_t device_to_host = nullptr;
  std::mutex blas_mutex;
  const cublas_library* blas_library = nullptr;
  cublasHandle_t blas = nullptr;
  /// Guards `dnn`, which with_cudnn makes at its first call on the card.
  std::mutex dnn_mutex;
  cudnnContext* dnn = nullptr;
  event_pool events;
  std::unique_ptr<completion_poller> completions;
};

namespace {

/// Makes card `ordinal` ready: streams, cuBLAS, the allocator over the share of its memory
/// `options` asks for.
result<std::unique_ptr<cuda_card>> open_card(int ordinal, const gpu_options& options) {
  auto card = std::make_unique<cuda_card>(ordinal);
  AF_RETURN_IF_ERROR(make_current(ordinal));
  cudaDeviceProp properties{};
  AF_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&properties, ordinal));
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  AF_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  card->description = std::string{properties.name} + " (compute capability " +
                      std::to_string(properties.major) + "." + std::to_string(properties.minor) +
                      ", " + format_bytes(total_bytes) + ")";
  if (auto st = check_kernel_image(); !st.ok())
    return st.with_context(card->description + " cannot run this build's kernels (built for "
                           "CMAKE_CUDA_ARCHITECTURES that do not include it)");
  for (auto* stream : {&card->compute, &card->host_to_device, &card->device_to_host})
    AF_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking));
  auto blas = cublas();
  if (!blas)
    return blas.error();
  card->blas_library = *blas;
  AF_CUBLAS_RETURN_IF_ERROR(card->blas_library->create(&card->blas));
  AF_CUBLAS_RETURN_IF_ERROR(card->blas_library->set_stream(card->blas, card->compute));
  // Plain float32 arithmetic: TF32 tensor-op math would be several times faster on large
  // products but rounds inputs to 10 mantissa bits, and the GPU's results should stay close to
  // the CPU's.
  AF_CUBLAS_RETURN_IF_ERROR(card->blas_library->set_math_mode(card->blas, CUBLAS_DEFAULT_MATH));

  auto regions = std::make_unique<cuda_region_source>(ordinal);
  card->regions = regions.get();
  auto bfc = gpu_bfc_options(free_bytes, total_bytes, options, &card->space);
  card->memory = std::make_unique<bfc_allocator>(card->space.device, std::move(regions), bfc);
  if (!bfc.allow_growth && bfc.memory_limit > 0 && card->memory->stats().bytes_reserved == 0)
    return make_error(errc::resource_exhausted,
                      "reserving " + format_bytes(bfc.memory_limit) + " of " + card->description +
                        " (" + format_bytes(free_bytes) + " free) failed: " +
                        card->regions->last_failure());
  card->completions = std::make_unique<completion_poller>("GPU:" + std::to_string(ordinal));
  return card;
}

/// The card with CUDA ordinal `ordinal`, opened by the first caller with its options.
result<cuda_card*> card_of(int ordinal, const gpu_options& options) {
  static std::mutex mutex;
  // Never freed: buffers anywhere in the process may point into the cards' memory until exit.
  static auto* cards = new std::map<int, cuda_card*>;
  std::lock_guard<std::mutex> guard{mutex};
  auto& card = (*cards)[ordinal];
  if (card == nullptr) {
    auto opened = open_card(ordinal, options);
    if (!opened)
      return opened.error();
    card = opened->release();
  }
  return card;
}

class cuda_device final : public device {
public:
  cuda_device(device_name name, std::shared_ptr<thread_pool> intra_op, cuda_card& card)
    : device(std::move(name)), intra_op_(std::move(intra_op)), card_(card) {}

  allocator* device_allocator() override { return card_.memory.get(); }
  thread_pool& intra_op_pool() override { return *intra_op_; }
  bool is_synchronous() const override { return false; }

  std::optional<memory_usage> memory_stats() const override {
    auto s = card_.memory->stats();
    return memory_usage{s.bytes_in_use, s.peak_bytes_in_use, s.memory_limit};
  }

  cuda_card& card() { return card_; }
  status make_current() const { return cuda::make_current(card_.ordinal); }

  void compute(op_kernel& kernel, kernel_context& ctx, std::function<void()> done) override {
    if (auto st = make_current(); !st.ok()) {
      ctx.fail(st.with_context("making " + full_name() + " current"));
      complete(std::move(done));
      return;
    }
    if (kernel.is_async()) {
      // Asynchronous kernels (ordered variable updates) see to their own completion.
      if (auto st = run_guarded([&] { kernel.compute_async(ctx, done); }); !st.ok()) {
        ctx.fail(std::move(st));
        done();
      }
      return;
    }
    // A stale error of this thread (already reported by the call that caused it) must not be
    // blamed on this kernel; cudaGetLastError returns and clears it, so it is not checked.
    (void)cudaGetLastError();
    auto st = run_guarded([&] { kernel.compute(ctx); });
    if (st.ok()) {
      st = [] {
        AF_CUDA_RETURN_IF_ERROR(cudaGetLastError());
        return status{};
      }();
      if (!st.ok())
        st = st.with_context("launching the " + kernel.op() + " kernel of node '" +
                             kernel.name() + "' on " + full_name());
    }
    if (!st.ok())
      ctx.fail(std::move(st));
    complete(std::move(done));
  }

  /// A copy was enqueued on `stream` but could not be handed over (no event, no wait): its
  /// buffers are dropped when the caller returns, so wait here until the copy has stopped.
  static void settle_on_failure(const status& handed_over, cudaStream_t stream) {
    if (!handed_over.ok())
      cudaStreamSynchronize(stream);
  }

  void copy_from_host(const tensor& host, copy_done done) override {
    auto allocated = allocate_copy_of_host(host, card_.memory.get());
    if (!allocated) {
      done(allocated.error());
      return;
    }
    tensor copy = std::move(*allocated);
    auto st = [&]() -> status {
      AF_RETURN_IF_ERROR(make_current());
      auto bytes = host.bytes();
      if (bytes == 0) {
        card_.completions->post([copy, done = std::move(done)](status) mutable { done(copy); });
        return {};
      }
      // Small tensors go through pinned memory, so that the copy runs truly asynchronously.
      tensor staging = try_pinned(host.type(), host.shape());
      const void* source = host.raw_data();
      if (staging.is_initialized()) {
        std::memcpy(staging.raw_data(), source, bytes);
        source = staging.raw_data();
      }
      // The destination's memory may still be read by kernels enqueued before it was freed.
      AF_RETURN_IF_ERROR(card_.stream_wait(card_.host_to_device, card_.compute));
      AF_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(copy.raw_data(), source, bytes,
                                              cudaMemcpyHostToDevice, card_.host_to_device));
      auto handed_over = [&]() -> status {
        auto copied = card_.record(card_.host_to_device);
        if (!copied)
          return copied.error();
        // Kernels enqueued from now on (the copy's consumers among them) start after the copy.
        AF_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(card_.compute, (*copied)->event, 0));
        card_.when_done(std::move(*copied),
                        [host, staging, copy, name = full_name(), done = std::move(done)](status s) {
                          if (!s.ok())
                            done(s.with_context("copying " + host.debug_string(0) + " to " + name));
                          else
                            done(copy);
                        });
        return {};
      }();
      settle_on_failure(handed_over, card_.host_to_device);
      return handed_over;
    }();
    if (!st.ok())
      done(st.with_context("copying " + host.debug_string(0) + " to " + full_name()));
  }

  void copy_to_host(const tensor& on_device, copy_done done) override {
    if (on_device.on_host()) {
      done(on_device);
      return;
    }
    if (on_device.space() != &card_.space) {
      done(make_error(errc::invalid_argument, "copy_to_host from " + full_name() +
                                                " was given a tensor in the memory of " +
                                                on_device.space()->device));
      return;
    }
    tensor copy = try_pinned(on_device.type(), on_device.shape());
    if (!copy.is_initialized())
      if (auto st = run_guarded([&] { copy = tensor{on_device.type(), on_device.shape()}; });
          !st.ok()) {
        done(st.with_context("copying " + on_device.debug_string(0) + " from " + full_name()));
        return;
      }
    auto st = [&]() -> status {
      AF_RETURN_IF_ERROR(make_current());
      auto bytes = on_device.bytes();
      if (bytes == 0) {
        card_.completions->post([copy, done = std::move(done)](status) mutable { done(copy); });
        return {};
      }
      // The copy starts once the kernels enqueued so far (the one making the tensor) are done.
      AF_RETURN_IF_ERROR(card_.stream_wait(card_.device_to_host, card_.compute));
      AF_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(copy.raw_data(), on_device.raw_data(), bytes,
                                              cudaMemcpyDeviceToHost, card_.device_to_host));
      auto copied = card_.record(card_.device_to_host);
      if (!copied) {
        settle_on_failure(copied.error(), card_.device_to_host);
        return copied.error();
      }
      card_.when_done(std::move(*copied), [on_device, copy, name = full_name(),
                                           done = std::move(done)](status s) {
        if (!s.ok())
          done(s.with_context("copying " + on_device.debug_string(0) + " from " + name));
        else
          done(copy);
      });
      return {};
    }();
    if (!st.ok())
      done(st.with_context("copying " + on_device.debug_string(0) + " from " + full_name()));
  }

  result<tensor> copy_on_device(const tensor& on_device) override {
    if (on_device.space() != &card_.space)
      return make_error(errc::invalid_argument,
                        "copy_on_device on " + full_name() + " was given a tensor in " +
                          (on_device.on_host() ? std::string{"host memory"}
                                               : "the memory of " + on_device.space()->device));
    tensor copy;
    if (auto st = run_guarded(
          [&] { copy = tensor{on_device.type(), on_device.shape(), card_.memory.get()}; });
        !st.ok())
      return st.with_context("copying " + on_device.debug_string(0) + " on " + full_name());
    auto st = [&]() -> status {
      AF_RETURN_IF_ERROR(make_current());
      if (on_device.bytes() > 0)
        AF_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(copy.raw_data(), on_device.raw_data(),
                                                on_device.bytes(), cudaMemcpyDeviceToDevice,
                                                card_.compute));
      return {};
    }();
    if (!st.ok())
      return st.with_context("copying " + on_device.debug_string(0) + " on " + full_name());
    return copy;
  }

private:
  /// Reports a kernel done: inline (it is enqueued, and stream order does the rest), unless
  /// this thread is already max_nested_completions deep in such reports.
  void complete(std::function<void()> done) {
    if (nested_completions >= max_nested_completions) {
      card_.completions->post([done = std::move(done)](status) { done(); });
      return;
    }
    ++nested_completions;
    struct unnest {
      ~unnest() { --nested_completions; }
    } guard;
    done();
  }

  std::shared_ptr<thread_pool> intra_op_;
  cuda_card& card_;
};

cuda_device* cuda_device_of(kernel_context& ctx) { return dynamic_cast<cuda_device*>(&ctx.dev()); }

status not_a_cuda_device(kernel_context& ctx) {
  return make_error(errc::internal, "the GPU kernel of " + ctx.def().op + " node '" +
                                      ctx.def().name + "' ran on " + ctx.dev().full_name() +
                                      ", which is not a CUDA device");
}

} // namespace

result<card_handle> card_handle_of(kernel_context& ctx) {
  auto* dev = cuda_device_of(ctx);
  if (dev == nullptr)
    return not_a_cuda_device(ctx);
  return card_handle{dev->card()};
}

int card_handle::ordinal() const { return card_->ordinal; }

cudaStream_t card_handle::compute_stream() const { return card_->compute; }

status card_handle::make_current() const { return cuda::make_current(card_->ordinal); }

result<completion_poller::probe> card_handle::compute_stream_probe() const {
  AF_RETURN_IF_ERROR(make_current());
  auto event = card_->record(card_->compute);
  if (!event)
    return event.error();
  return completion_poller::probe{[event = std::move(*event)] { return query(*event); }};
}

void card_handle::when_finished(completion_poller::probe finished,
                                completion_poller::callback done) const {
  card_->completions->when_done(std::move(finished), std::move(done));
}

result<cudaStream_t> compute_stream_of(kernel_context& ctx) {
  auto* dev = cuda_device_of(ctx);
  if (dev == nullptr)
    return not_a_cuda_device(ctx);
  AF_RETURN_IF_ERROR(dev->make_current());
  return dev->card().compute;
}

status with_cublas(kernel_context& ctx,
                   const std::function<status(const cublas_library&, cublasContext*)>& call) {
  auto* dev = cuda_device_of(ctx);
  if (dev == nullptr)
    return not_a_cuda_device(ctx);
  AF_RETURN_IF_ERROR(dev->make_current());
  auto& card = dev->card();
  std::lock_guard<std::mutex> guard{card.blas_mutex};
  return call(*card.blas_library, card.blas);
}

status with_cudnn(kernel_context& ctx, const std::function<status(cudnnContext*)>& call) {
  auto* dev = cuda_device_of(ctx);
  if (dev == nullptr)
    return not_a_cuda_device(ctx);
#ifdef ACTORFLOW_HAVE_CUDNN
  AF_RETURN_IF_ERROR(dev->make_current());
  auto& card = dev->card();
  std::lock_guard<std::mutex> guard{card.dnn_mutex};
  if (card.dnn == nullptr) {
    // Made here rather than when the card opens: cudnnCreate loads cuDNN's sub-libraries and
    // takes device memory, which programs without convolutions should not pay for.
    cudnnHandle_t handle = nullptr;
    AF_CUDNN_RETURN_IF_ERROR(cudnnCreate(&handle));
    auto bound = [&]() -> status {
      AF_CUDNN_RETURN_IF_ERROR(cudnnSetStream(handle, card.compute));
      return {};
    }();
    if (!bound.ok()) {
      (void)cudnnDestroy(handle);
      return bound;
    }
    card.dnn = handle;
  }
  return call(card.dnn);
#else
  (void)call;
  return make_error(errc::unimplemented, "the kernel of " + ctx.def().op + " node '" +
                                           ctx.def().name + "' needs cuDNN, which this build "
                                           "was made without");
#endif
}

} // namespace cuda

result<std::unique_ptr<device>> make_cuda_device(device_name name, int cuda_ordinal,
                                                 std::shared_ptr<thread_pool> intra_op,
                                                 gpu_options options) {
  auto label = name.to_string();
  auto made = [&]() -> result<std::unique_ptr<device>> {
    // Without a driver cudart would say as much, less clearly.
    if (gpu_count() == 0)
      return make_error(errc::unavailable, gpu_absence_reason());
    int count = 0;
    AF_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
    if (cuda_ordinal < 0 || cuda_ordinal >= count)
      return make_error(errc::not_found, "CUDA shows " + std::to_string(count) +
                                           " GPU(s), none with ordinal " +
                                           std::to_string(cuda_ordinal));
    auto card = cuda::card_of(cuda_ordinal, options);
    if (!card)
      return card.error();
    if (intra_op == nullptr)
      intra_op = std::make_shared<thread_pool>("intra_op", 0);
    return std::unique_ptr<device>{
      std::make_unique<cuda::cuda_device>(std::move(name), std::move(intra_op), **card)};
  }();
  if (!made)
    return made.error().with_context("cannot make " + label + " on CUDA device " +
                                     std::to_string(cuda_ordinal));
  return made;
}

void make_cuda_devices(const device_factory_options& options, made_devices& made) {
  int count = 0;
  auto st = [&]() -> status {
    AF_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
    return {};
  }();
  if (!st.ok()) {
    made.notes.push_back("no GPU devices: " + st.message());
    return;
  }
  if (options.gpu.device_count >= 0 && options.gpu.device_count < count) {
    made.notes.push_back("GPU:" + std::to_string(options.gpu.device_count) + " and after not used: "
                         "the session's device_count asks for " +
                         std::to_string(options.gpu.device_count));
    count = options.gpu.device_count;
  }
  for (int i = 0; i < count; ++i) {
    auto dev = make_cuda_device(task_device_name(options.job, options.task, "GPU", i), i,
                                options.intra_op, options.gpu);
    if (dev)
      made.devices.push_back(std::shared_ptr<device>{std::move(*dev)});
    else
      made.notes.push_back("GPU:" + std::to_string(i) + " not used: " + dev.error().to_string());
  }
}

} // namespace actorflow

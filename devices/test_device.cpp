#include "devices/test_device.hpp"

#include "devices/bfc_allocator.hpp"
#include "devices/host_stream.hpp"
#include "devices/thread_pool.hpp"

#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <tuple>
#include <new>

namespace actorflow {

namespace {

/// The memory of one pretend card: like a GPU's allocator (TensorFlow's GPUProcessState), it
/// belongs to the process, not to a device object, so tensors (variables a shard still holds,
/// say) may outlive the device that made them, and every session's TEST:n shares it.
struct card_memory {
  card_memory(const std::string& name, bfc_options options)
    : space{name}, allocator{name, make_host_region_source(), in_space(options, &space)} {}

  static bfc_options in_space(bfc_options options, const memory_space* space) {
    options.space = space;
    return options;
  }

  memory_space space;
  bfc_allocator allocator;
};

card_memory& card_memory_of(int id, const test_device_options& options) {
  static std::mutex mutex;
  // Never freed: buffers anywhere in the process may point here until it exits.
  static auto* cards = new std::map<std::tuple<int, std::size_t, double, bool>, card_memory*>;
  std::lock_guard<std::mutex> guard{mutex};
  auto key = std::make_tuple(id, options.card_bytes, options.memory_fraction, options.allow_growth);
  auto& card = (*cards)[key];
  if (card == nullptr) {
    auto name = "/device:" + std::string{test_device_type} + ":" + std::to_string(id);
    bfc_options o;
    auto fraction = options.memory_fraction > 0 && options.memory_fraction < 1
                      ? options.memory_fraction
                      : 1.0;
    o.memory_limit = static_cast<std::size_t>(static_cast<double>(options.card_bytes) * fraction);
    o.allow_growth = options.allow_growth;
    card = new card_memory{name, o};
  }
  return *card;
}

class test_device final : public device {
public:
  test_device(device_name name, std::shared_ptr<thread_pool> intra_op, test_device_options options)
    : device(std::move(name)), intra_op_(std::move(intra_op)),
      allocator_(card_memory_of(*this->name().id, options).allocator),
      callbacks_(type() + ":" + std::to_string(*this->name().id) + " done"),
      compute_(type() + ":" + std::to_string(*this->name().id) + " compute"),
      host_to_device_(type() + ":" + std::to_string(*this->name().id) + " h2d"),
      device_to_host_(type() + ":" + std::to_string(*this->name().id) + " d2h") {}

  allocator* device_allocator() override { return &allocator_; }
  thread_pool& intra_op_pool() override { return *intra_op_; }
  bool is_synchronous() const override { return false; }

  std::optional<memory_usage> memory_stats() const override {
    auto s = allocator_.stats();
    return memory_usage{s.bytes_in_use, s.peak_bytes_in_use, s.memory_limit};
  }

  void compute(op_kernel& kernel, kernel_context& ctx, std::function<void()> done) override {
    if (kernel.is_async()) {
      // Asynchronous kernels (ordered variable updates) see to their own completion.
      if (auto st = run_guarded([&] { kernel.compute_async(ctx, done); }); !st.ok()) {
        ctx.fail(std::move(st));
        done();
      }
      return;
    }
    compute_.enqueue([this, &kernel, &ctx] {
      if (auto st = run_guarded([&] { kernel.compute(ctx); }); !st.ok())
        ctx.fail(std::move(st));
    });
    callbacks_.when_done(compute_.record(), std::move(done));
  }

  void copy_from_host(const tensor& host, copy_done done) override {
    auto allocated = allocate_copy_of_host(host, &allocator_);
    if (!allocated) {
      done(allocated.error());
      return;
    }
    tensor copy = std::move(*allocated);
    host_to_device_.enqueue([host, copy] { copy_bytes(copy, host); });
    callbacks_.when_done(host_to_device_.record(),
                         [copy, done = std::move(done)]() mutable { done(std::move(copy)); });
  }

  void copy_to_host(const tensor& on_device, copy_done done) override {
    if (on_device.on_host()) {
      done(on_device);
      return;
    }
    tensor copy;
    if (auto st = run_guarded([&] { copy = tensor{on_device.type(), on_device.shape()}; });
        !st.ok()) {
      done(std::move(st));
      return;
    }
    // The copy starts once the kernels enqueued so far (the one making the tensor) are done.
    device_to_host_.wait_for(compute_.record());
    device_to_host_.enqueue([on_device, copy] { copy_bytes(copy, on_device); });
    callbacks_.when_done(device_to_host_.record(),
                         [copy, done = std::move(done)]() mutable { done(std::move(copy)); });
  }

  result<tensor> copy_on_device(const tensor& on_device) override {
    tensor copy;
    if (auto st = run_guarded(
                          [&] { copy = tensor{on_device.type(), on_device.shape(), &allocator_}; });
        !st.ok())
      return st;
    // On the compute stream this is already the stream's turn; elsewhere wait for it.
    if (compute_.on_stream_thread())
      copy_bytes(copy, on_device);
    else
      compute_.enqueue([on_device, copy] { copy_bytes(copy, on_device); });
    return copy;
  }

private:
  /// Streams copy raw bytes: both buffers hold host memory underneath.
  static void copy_bytes(const tensor& to, const tensor& from) {
    if (from.bytes() > 0)
      std::memcpy(to.raw_data(), from.raw_data(), from.bytes());
  }

  std::shared_ptr<thread_pool> intra_op_;
  bfc_allocator& allocator_;
  // Declared before the streams so that it outlives them: their last events post here.
  stream_callbacks callbacks_;
  host_stream compute_;
  host_stream host_to_device_;
  host_stream device_to_host_;
};

} // namespace

std::unique_ptr<device> make_test_device(device_name name, std::shared_ptr<thread_pool> intra_op,
                                         test_device_options options) {
  if (intra_op == nullptr)
    intra_op = std::make_shared<thread_pool>("intra_op", 0);
  return std::make_unique<test_device>(std::move(name), std::move(intra_op), options);
}

} // namespace actorflow

// Const on the GPU: the "value" attribute copied into the card's memory once, at the first
// compute (there is no stream before), and shared by every step after, as the CPU's Const
// shares its host tensor. TensorFlow's GPU Const also holds its value in device memory;
// outputting the host value instead would cost a host-to-device copy per consumer and step.
#include "devices/cuda/cuda_kernel_util.hpp"
#include "devices/cuda/kernels/cuda_kernels.hpp"
#include "devices/device.hpp"

#include <mutex>

namespace actorflow::cuda {

namespace {

class constant_kernel final : public cuda_kernel {
public:
  constant_kernel(const node& n, tensor value) : cuda_kernel(n), host_value_(std::move(value)) {}

  static result<std::unique_ptr<op_kernel>> make(const node& n) {
    auto* value = n.attr<tensor>("value");
    if (value == nullptr || !value->is_initialized())
      return make_error(errc::invalid_argument,
                        "Const node '" + n.name + "' has no tensor in attribute 'value'");
    if (!value->on_host())
      return make_error(errc::invalid_argument,
                        "Const node '" + n.name + "' has its value in device memory");
    return std::unique_ptr<op_kernel>{std::make_unique<constant_kernel>(n, *value)};
  }

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    std::lock_guard<std::mutex> guard{mutex_};
    if (!device_value_.is_initialized()) {
      tensor copy{host_value_.type(), host_value_.shape(), ctx.dev().device_allocator()};
      // From pageable memory: CUDA stages it before the call returns. Kernels that read the
      // value are enqueued after this on the same stream. host_value_ lives as long as the
      // kernel, so nothing depends on when the staging happens.
      if (host_value_.bytes() > 0)
        AF_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(copy.raw_data(), host_value_.raw_data(),
                                                host_value_.bytes(), cudaMemcpyHostToDevice,
                                                stream));
      device_value_ = std::move(copy);
    }
    // Consumers never write into their inputs, so every step can share the one buffer.
    ctx.set_output(0, device_value_);
    return {};
  }

private:
  tensor host_value_;
  std::mutex mutex_;
  tensor device_value_;
};

} // namespace

void register_constant_kernels(kernel_registry& registry) {
  registry.add("Const", "GPU",
               all_dtypes(),
               &constant_kernel::make);
}

} // namespace actorflow::cuda

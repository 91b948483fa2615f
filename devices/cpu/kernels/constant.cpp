// Const: outputs its "value" attribute, shared, never copied.
#include "devices/cpu/kernels/cpu_kernels.hpp"
#include "devices/kernel.hpp"

namespace actorflow {

namespace {

class constant_kernel : public op_kernel {
public:
  constant_kernel(const node& n, tensor value) : op_kernel(n), value_(std::move(value)) {}

  static result<std::unique_ptr<op_kernel>> make(const node& n) {
    auto* value = n.attr<tensor>("value");
    if (value == nullptr || !value->is_initialized())
      return make_error(errc::invalid_argument,
                        "Const node '" + n.name + "' has no tensor in attribute 'value'");
    return std::unique_ptr<op_kernel>{std::make_unique<constant_kernel>(n, *value)};
  }

  // Consumers never write into their inputs, so every step can share the one buffer.
  void compute(kernel_context& ctx) override { ctx.set_output(0, value_); }

private:
  tensor value_;
};

} // namespace

void register_constant_kernels(kernel_registry& registry) {
  registry.add("Const", "CPU",
               all_dtypes(),
               &constant_kernel::make);
}

} // namespace actorflow

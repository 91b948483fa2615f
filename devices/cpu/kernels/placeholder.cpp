// Placeholder: the executor substitutes fed values, so this kernel only runs when a placeholder
// was not fed, and then it reports exactly that.
#include "devices/cpu/kernels/cpu_kernels.hpp"
#include "devices/kernel.hpp"

namespace actorflow {

namespace {

class placeholder_kernel : public op_kernel {
public:
  explicit placeholder_kernel(const node& n) : op_kernel(n), message_(make_message(n)) {}

  void compute(kernel_context& ctx) override {
    ctx.fail(make_error(errc::invalid_argument, message_));
  }

private:
  static std::string make_message(const node& n) {
    auto type = n.attr_or<dtype>("dtype", n.kernel_type);
    std::string message = "You must feed a value for placeholder tensor '" + n.name +
                          "' with dtype " + to_string(type);
    if (auto* shape = n.attr<tensor_shape>("shape"); shape != nullptr && shape->rank_known())
      message += " and shape " + shape->to_string();
    else if (auto* dims = n.attr<std::vector<std::int64_t>>("shape"))
      message += " and shape " + tensor_shape{*dims}.to_string();
    return message;
  }

  std::string message_;
};

} // namespace

void register_placeholder_kernels(kernel_registry& registry) {
  registry.add("Placeholder", "CPU",
               all_dtypes(),
               make_kernel<placeholder_kernel>);
}

} // namespace actorflow

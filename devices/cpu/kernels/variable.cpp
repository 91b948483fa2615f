// VariableV2: outputs the variable's current value, sharing its buffer. An uninitialised
// variable outputs an empty tensor; the executor reports that when a consumer needs the value,
// so that running only the initializer (which does not read it) works.
#include "devices/cpu/kernels/cpu_kernels.hpp"
#include "devices/kernel.hpp"

namespace actorflow {

namespace {

class variable_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;

  void compute(kernel_context& ctx) override {
    auto state = ctx.resources().variable(name());
    tensor value;
    {
      // Copying the handle under the lock is what lets Assign* see this reader in use_count.
      std::lock_guard<std::mutex> guard{state->mutex};
      value = state->value;
    }
    ctx.set_output(0, std::move(value));
  }
};

/// IsVariableInitialized: whether the variable the node names holds a value, without reading it.
class is_initialized_kernel : public op_kernel {
public:
  explicit is_initialized_kernel(const node& n)
    : op_kernel(n), variable_(n.attr_or<std::string>("variable", "")) {}

  void compute(kernel_context& ctx) override {
    bool initialized = false;
    if (auto state = ctx.resources().find_variable(variable_)) {
      std::lock_guard<std::mutex> guard{state->mutex};
      initialized = state->value.is_initialized() || state->table != nullptr;
    }
    auto out = ctx.allocate_output(0, dtype::boolean, tensor_shape{});
    out.data<bool>()[0] = initialized;
  }

private:
  std::string variable_;
};

} // namespace

void register_variable_kernels(kernel_registry& registry) {
  registry.add("VariableV2", "CPU", {dtype::float32, dtype::float64, dtype::int32, dtype::int64},
               make_kernel<variable_kernel>);
  registry.add("IsVariableInitialized", "CPU",
               {dtype::float32, dtype::float64, dtype::int32, dtype::int64, dtype::boolean},
               make_kernel<is_initialized_kernel>);
}

} // namespace actorflow

// VariableV2: outputs the variable's current value, sharing its buffer. An uninitialised
// variable outputs an empty tensor; the executor reports that when a consumer needs the value,
// so that running only the initializer (which does not read it) works.
#include "devices/cpu/kernels/cpu_kernels.hpp"
#include "devices/kernel.hpp"

#include <cstring>

namespace actorflow {

namespace {

class variable_kernel : public op_kernel {
public:
  explicit variable_kernel(const node& n)
    : op_kernel(n), ref_only_(n.attr_or<bool>("_ref_only", false)) {}

  void compute(kernel_context& ctx) override {
    auto state = ctx.resources().variable(name());
    // Its consumers all take it as a ref (graph/variable_gather.hpp): no alias, so their
    // updates find the value theirs to write in place.
    if (ref_only_) {
      ctx.set_output(0, tensor{});
      return;
    }
    tensor value;
    {
      // Copying the handle under the lock is what lets Assign* see this reader in use_count.
      std::lock_guard<std::mutex> guard{state->mutex};
      value = state->value;
    }
    ctx.set_output(0, std::move(value));
  }

private:
  bool ref_only_;
};

/// _VariableGather: rows of the variable the node names at the ids of input 1, copied under the
/// variable's lock (graph/variable_gather.hpp), so no alias of the value outlives the copy.
class variable_gather_kernel : public op_kernel {
public:
  explicit variable_gather_kernel(const node& n)
    : op_kernel(n), variable_(n.attr_or<std::string>("variable", "")) {}

  void compute(kernel_context& ctx) override {
    auto state = ctx.resources().find_variable(variable_);
    auto& ids = ctx.input(1);
    if (!ids.is_initialized() || (ids.type() != dtype::int32 && ids.type() != dtype::int64))
      return ctx.fail(make_error(errc::invalid_argument, "_VariableGather takes int32 or int64 ids"));
    std::unique_lock<std::mutex> guard;
    if (state)
      guard = std::unique_lock<std::mutex>{state->mutex};
    if (!state || !state->value.is_initialized())
      return ctx.fail(make_error(errc::failed_precondition,
                                 "attempting to use uninitialized value '" + variable_ + "'"));
    auto& value = state->value;
    if (value.shape().rank() < 1)
      return ctx.fail(make_error(errc::invalid_argument, "_VariableGather: variable '" + variable_ +
                                                           "' is a scalar"));
    auto rows = value.shape().dim(0);
    std::vector<std::int64_t> dims = ids.shape().dims();
    for (int d = 1; d < value.shape().rank(); ++d)
      dims.push_back(value.shape().dim(d));
    auto out = ctx.allocate_output(0, value.type(), tensor_shape{dims});
    auto row_bytes = rows == 0 ? 0 : value.bytes() / static_cast<std::size_t>(rows);
    auto* from = static_cast<const char*>(value.raw_data());
    auto* to = static_cast<char*>(out.raw_data());
    for (std::int64_t i = 0; i < ids.num_elements(); ++i) {
      auto id = ids.type() == dtype::int64 ? ids.data<std::int64_t>()[i]
                                           : static_cast<std::int64_t>(ids.data<std::int32_t>()[i]);
      if (id < 0 || id >= rows)
        return ctx.fail(make_error(errc::invalid_argument,
                                   "Gather index " + std::to_string(id) + " is out of range [0, " +
                                     std::to_string(rows) + ") of variable '" + variable_ + "'"));
      std::memcpy(to + static_cast<std::size_t>(i) * row_bytes,
                  from + static_cast<std::size_t>(id) * row_bytes, row_bytes);
    }
  }

private:
  std::string variable_;
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
  registry.add("_VariableGather", "CPU", {dtype::float32, dtype::float64, dtype::int32, dtype::int64},
               make_kernel<variable_gather_kernel>);
  registry.add("IsVariableInitialized", "CPU",
               {dtype::float32, dtype::float64, dtype::int32, dtype::int64, dtype::boolean},
               make_kernel<is_initialized_kernel>);
}

} // namespace actorflow

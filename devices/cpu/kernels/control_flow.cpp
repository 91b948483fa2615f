// The kernels of the control-flow ops: Switch, Merge, Enter, Exit and NextIteration are run by
// the executor itself (devices/executor.cpp), so their entries here only say where they may be
// placed (LoopCond forwards its predicate: Identity's kernel, LogicalNot is a unary op);
// StackPush and StackPop keep a while loop's forward values in the step's resources for its
// gradient; Gather.
#include "devices/concat_layout.hpp"
#include "devices/cpu/kernels/cpu_kernels.hpp"
#include "devices/cpu/kernels/kernel_util.hpp"

#include <cstring>

namespace actorflow {

namespace {

/// Placeholders for the primitives the executor runs; reaching compute() is a bug.
class executor_primitive : public op_kernel {
public:
  using op_kernel::op_kernel;
  void compute(kernel_context& ctx) override {
    ctx.fail(make_error(errc::internal, op() + " is run by the executor, not by a kernel"));
  }
};

/// The stack indices: inputs `first` onward, scalars of int32 or int64.
result<step_resources::index> indices_of(const kernel_context& ctx, int first) {
  step_resources::index at;
  for (int i = first; i < ctx.num_inputs(); ++i) {
    auto& t = ctx.input(i);
    if (!t.is_initialized() || t.num_elements() != 1)
      return make_error(errc::invalid_argument, "stack index " + std::to_string(i - first) +
                                                  " must be a scalar");
    AF_RETURN_IF_ERROR(t.check_on_host("a stack index"));
    at.push_back(t.scalar_value<std::int64_t>());
  }
  return at;
}

status no_step(const op_kernel& k) {
  return make_error(errc::failed_precondition, k.op() + " runs only inside a step");
}

class stack_push_kernel : public op_kernel {
public:
  explicit stack_push_kernel(const node& n)
    : op_kernel(n), stack_(n.attr_or<std::string>("stack_name", n.name)) {}
  bool host_memory_input(int i) const override { return i > 0; }
  void compute(kernel_context& ctx) override {
    auto at = indices_of(ctx, 1);
    if (!at)
      return ctx.fail(at.error());
    if (ctx.resources_of_step() == nullptr)
      return ctx.fail(no_step(*this));
    ctx.resources_of_step()->push(stack_, *at, ctx.input(0));
  }

private:
  std::string stack_;
};

/// Waits for the push of its indices (a backward loop may get ahead of the forward one's last
/// iterations); an aborted step ends the wait.
class stack_pop_kernel : public op_kernel {
public:
  explicit stack_pop_kernel(const node& n)
    : op_kernel(n), stack_(n.attr_or<std::string>("stack_name", n.name)) {}
  bool host_memory_input(int) const override { return true; }
  bool is_async() const override { return true; }
  void compute(kernel_context& ctx) override {
    ctx.fail(make_error(errc::internal, "StackPop runs asynchronously"));
  }
  void compute_async(kernel_context& ctx, std::function<void()> done) override {
    auto at = indices_of(ctx, 0);
    if (!at) {
      ctx.fail(at.error());
      return done();
    }
    if (ctx.resources_of_step() == nullptr) {
      ctx.fail(no_step(*this));
      return done();
    }
    ctx.resources_of_step()->pop(stack_, *at, [&ctx, done = std::move(done), stack = stack_,
                                               at = *at](result<tensor> value) {
      if (!value) {
        ctx.fail(value.error());
      } else if (!value->is_initialized()) {
        std::string where;
        for (auto i : at)
          where += (where.empty() ? "" : ",") + std::to_string(i);
        ctx.fail(make_error(errc::internal, "stack '" + stack + "' holds nothing at [" + where + "]"));
      } else {
        ctx.set_output(0, std::move(*value));
      }
      done();
    });
  }

private:
  std::string stack_;
};

/// Gather along an axis: out[outer, i, inner] = params[outer, indices[i], inner].
class gather_kernel : public op_kernel {
public:
  explicit gather_kernel(const node& n) : op_kernel(n), axis_(n.attr_or<std::int64_t>("axis", 0)) {}
  bool host_memory_input(int i) const override { return i == 1; }
  void compute(kernel_context& ctx) override {
    auto& params = ctx.input(0);
    auto& indices = ctx.input(1);
    auto layout = make_gather_layout(params.shape(), indices.shape(), axis_);
    if (!layout)
      return ctx.fail(layout.error());
    auto [outer, extent, inner, count, out_shape] = *layout;
    auto out = ctx.allocate_output(0, params.type(), out_shape);
    auto element = size_of(params.type());
    auto* src = static_cast<const char*>(params.raw_data());
    auto* dst = static_cast<char*>(out.raw_data());
    for (std::int64_t k = 0; k < count; ++k) {
      auto at = indices.type() == dtype::int32 ? indices.data<std::int32_t>()[k]
                                               : indices.data<std::int64_t>()[k];
      if (at < 0 || at >= extent)
        return ctx.fail(make_error(errc::invalid_argument,
                                   "Gather index " + std::to_string(at) + " is out of range [0, " +
                                     std::to_string(extent) + ")"));
      for (std::int64_t o = 0; o < outer; ++o)
        std::memcpy(dst + ((o * count + k) * inner) * element,
                    src + ((o * extent + at) * inner) * element,
                    static_cast<std::size_t>(inner) * element);
    }
  }

private:
  std::int64_t axis_;
};

} // namespace

void register_control_flow_kernels(kernel_registry& registry) {
  for (auto op : {"Switch", "Merge", "Enter", "Exit", "NextIteration"})
    registry.add(op, "CPU", all_dtypes(), make_kernel<executor_primitive>);
  registry.add("StackPush", "CPU", all_dtypes(), make_kernel<stack_push_kernel>);
  registry.add("StackPop", "CPU", all_dtypes(), make_kernel<stack_pop_kernel>);
  registry.add("Gather", "CPU", all_dtypes(), make_kernel<gather_kernel>);
}

} // namespace actorflow

// Assign, AssignAdd, AssignSub: update the variable named by attr "variable". Input 0 is the
// variable's own output (possibly an empty tensor), input 1 the value; the output is the new
// value. A stored buffer is only written in place when nothing outside this kernel call holds
// it, so readers never see a half-made update and no other tensor is ever changed behind its
// owner's back.
#include "devices/cpu/kernels/kernel_util.hpp"
#include "devices/device.hpp"

namespace actorflow {

namespace {

using namespace cpu;

/// References to `t`'s buffer held by this kernel call's inputs; they end with the call, so
/// they do not count as other users.
long references_from_inputs(const kernel_context& ctx, const tensor& t) {
  long count = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.input(i).shares_buffer_with(t))
      ++count;
  return count;
}

/// Whether `held` (a handle this call owns, e.g. the variable's slot) is the only reference to
/// its buffer besides this call's inputs.
bool exclusively_owned(const kernel_context& ctx, const tensor& held) {
  return held.buffer_ref().use_count() == 1 + references_from_inputs(ctx, held);
}

class assign_base : public op_kernel {
public:
  explicit assign_base(const node& n)
    : op_kernel(n), variable_(n.attr_or<std::string>("variable", "")) {}

protected:
  /// The variable's state; fails the kernel when the "variable" attribute is missing.
  std::shared_ptr<variable_state> state(kernel_context& ctx) const {
    if (variable_.empty()) {
      ctx.fail(make_error(errc::invalid_argument, op() + " node '" + name() +
                                                    "' has no 'variable' attribute naming its variable"));
      return nullptr;
    }
    return ctx.resources().variable(variable_);
  }

  std::string variable_;
};

template <class T>
class assign_kernel : public assign_base {
public:
  using assign_base::assign_base;

  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 1, dtype_of<T>()))
      return;
    auto var = state(ctx);
    if (var == nullptr)
      return;
    const tensor& value = ctx.input(1);
    std::lock_guard<std::mutex> guard{var->mutex};
    auto& stored = var->value;
    // Only ctx holds the value: adopt its buffer, no copy.
    if (value.buffer_ref().use_count() == references_from_inputs(ctx, value)) {
      stored = value;
    } else if (stored.is_initialized() && stored.type() == value.type() &&
               stored.shape() == value.shape() && !stored.shares_buffer_with(value) &&
               exclusively_owned(ctx, stored)) {
      // Nobody reads the old buffer any more: overwrite it and allocate nothing.
      std::memcpy(stored.raw_data(), value.raw_data(), value.bytes());
    } else {
      auto copy = ctx.dev().copy_on_device(value);
      if (!copy) {
        ctx.fail(copy.error());
        return;
      }
      stored = std::move(*copy);
    }
    ++var->version;
    ctx.set_output(0, stored);
  }
};

struct add_update {
  template <class A, class B>
  static auto apply(const A& a, const B& b) { return a + b; }
};
struct sub_update {
  template <class A, class B>
  static auto apply(const A& a, const B& b) { return a - b; }
};

template <class T, class Update>
class assign_update_kernel : public assign_base {
public:
  using assign_base::assign_base;

  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 1, dtype_of<T>()))
      return;
    auto var = state(ctx);
    if (var == nullptr)
      return;
    const tensor& delta = ctx.input(1);
    std::lock_guard<std::mutex> guard{var->mutex};
    auto& stored = var->value;
    if (!stored.is_initialized()) {
      ctx.fail(make_error(errc::failed_precondition,
                          "Attempting to use uninitialized value " + variable_ + " (in " + op() +
                            " node '" + name() + "')"));
      return;
    }
    if (stored.type() != delta.type() || stored.shape() != delta.shape()) {
      ctx.fail(make_error(errc::invalid_argument,
                          op() + " to variable '" + variable_ + "': the variable is " +
                            to_string(stored.type()) + stored.shape().to_string() +
                            " but the value is " + to_string(delta.type()) +
                            delta.shape().to_string()));
      return;
    }
    const T* pd = delta.data<T>();
    if (exclusively_owned(ctx, stored)) {
      T* ps = stored.data<T>();
      for_blocks(ctx, stored.num_elements(), [&](std::int64_t begin, std::int64_t end) {
        auto s = view(ps + begin, end - begin);
        s = Update::apply(s, view(pd + begin, end - begin));
      });
    } else {
      // Someone still reads the old value: build the new one beside it and swap.
      tensor fresh{stored.type(), stored.shape(), ctx.dev().device_allocator()};
      const T* ps = stored.data<T>();
      T* pf = fresh.data<T>();
      for_blocks(ctx, stored.num_elements(), [&](std::int64_t begin, std::int64_t end) {
        view(pf + begin, end - begin) =
          Update::apply(view(ps + begin, end - begin), view(pd + begin, end - begin));
      });
      stored = std::move(fresh);
    }
    ++var->version;
    ctx.set_output(0, stored);
  }
};

template <class T>
using assign_add_kernel = assign_update_kernel<T, add_update>;
template <class T>
using assign_sub_kernel = assign_update_kernel<T, sub_update>;

} // namespace

void register_assign_kernels(kernel_registry& registry) {
  add_typed_kernels<assign_kernel, float, double, std::int32_t, std::int64_t>(registry, "Assign");
  add_typed_kernels<assign_add_kernel, float, double, std::int32_t, std::int64_t>(registry,
                                                                                  "AssignAdd");
  add_typed_kernels<assign_sub_kernel, float, double, std::int32_t, std::int64_t>(registry,
                                                                                  "AssignSub");
}

} // namespace actorflow

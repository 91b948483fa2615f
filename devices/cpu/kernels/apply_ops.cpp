// ApplyGradientDescent, ApplyMomentum, ApplyAdam: the optimizer updates (TensorFlow's
// training_ops), for float32 and float64. Input 0 is the variable (attr "variable" names it);
// the slot inputs (accum; m and v) are variables too (attr "slots": their names, comma-separated,
// in input order). The kernel holds every updated variable's mutex for the whole update and
// writes each stored buffer in place when nothing outside this call shares it; otherwise the
// new value goes to a fresh buffer that replaces the stored one (AssignAdd's rule), so readers
// never see a half-made update. The output is the variable's new value.
#include "devices/cpu/kernels/kernel_util.hpp"
#include "devices/device.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <mutex>

namespace actorflow {

namespace {

using namespace cpu;

std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> names;
  std::string::size_type begin = 0;
  while (begin <= list.size() && !list.empty()) {
    auto end = list.find(',', begin);
    if (end == std::string::npos)
      end = list.size();
    names.push_back(list.substr(begin, end - begin));
    begin = end + 1;
  }
  return names;
}

/// One variable an update writes: where to read its old value and where to write the new one
/// (the same memory when updated in place).
template <class T>
struct updated_variable {
  const T* in = nullptr;
  T* out = nullptr;
};

/// The shared part of the update kernels: finds and locks the `Refs` variables (input 0 and
/// the slots), checks them and the other inputs, and decides in place or copy-on-write.
/// `like_variable` lists the non-ref inputs that must have the variable's shape, `scalars`
/// those that must hold one element.
template <class T, std::size_t Refs>
class apply_kernel_base : public op_kernel {
public:
  explicit apply_kernel_base(const node& n) : op_kernel(n) {
    variables_[0] = n.attr_or<std::string>("variable", "");
    auto slots = split_names(n.attr_or<std::string>("slots", ""));
    for (std::size_t i = 1; i < Refs; ++i)
      variables_[i] = i - 1 < slots.size() ? slots[i - 1] : std::string{};
  }

protected:
  /// Runs `update(begin, end, vars)` over the elements, each block under every variable's lock,
  /// after the checks; vars[i] is variable i's (input i's) old and new memory.
  template <class Update>
  void run(kernel_context& ctx, const std::vector<int>& like_variable,
           const std::vector<int>& scalars, std::int64_t cost, Update&& update) {
    for (std::size_t i = 0; i < Refs; ++i)
      if (variables_[i].empty()) {
        ctx.fail(make_error(errc::invalid_argument,
                            op() + " node '" + name() + "' has no " +
                              (i == 0 ? std::string{"'variable' attribute naming its variable"}
                                      : "'slots' attribute naming its slot variable " +
                                          std::to_string(i))));
        return;
      }
    for (int i = static_cast<int>(Refs); i < ctx.num_inputs(); ++i)
      if (!check_input(ctx, i, dtype_of<T>()))
        return;
    std::array<std::shared_ptr<variable_state>, Refs> states;
    for (std::size_t i = 0; i < Refs; ++i) {
      states[i] = ctx.resources().variable(variables_[i]);
      for (std::size_t j = 0; j < i; ++j)
        if (states[j] == states[i]) {
          ctx.fail(make_error(errc::invalid_argument, op() + " node '" + name() +
                                                        "' names variable '" + variables_[i] +
                                                        "' twice"));
          return;
        }
    }
    // Lock in address order: two updates sharing variables can never wait on each other.
    std::array<variable_state*, Refs> order;
    for (std::size_t i = 0; i < Refs; ++i)
      order[i] = states[i].get();
    std::sort(order.begin(), order.end(), std::less<variable_state*>{});
    std::array<std::unique_lock<std::mutex>, Refs> locks;
    for (std::size_t i = 0; i < Refs; ++i)
      locks[i] = std::unique_lock<std::mutex>{order[i]->mutex};

    for (std::size_t i = 0; i < Refs; ++i)
      if (!states[i]->value.is_initialized()) {
        ctx.fail(make_error(errc::failed_precondition,
                            "Attempting to use uninitialized value " + variables_[i] + " (in " +
                              op() + " node '" + name() + "')"));
        return;
      }
    tensor& var = states[0]->value;
    if (var.type() != dtype_of<T>()) {
      ctx.fail(make_error(errc::invalid_argument, op() + " to variable '" + variables_[0] +
                                                    "': the variable is " + to_string(var.type()) +
                                                    " but the update is " +
                                                    to_string(dtype_of<T>())));
      return;
    }
    auto mismatch = [&](const std::string& what, const tensor& t) {
      ctx.fail(make_error(errc::invalid_argument,
                          op() + " to variable '" + variables_[0] + "': the variable is " +
                            to_string(var.type()) + var.shape().to_string() + " but " + what +
                            " is " + to_string(t.type()) + t.shape().to_string()));
    };
    for (std::size_t i = 1; i < Refs; ++i) {
      tensor& slot = states[i]->value;
      if (slot.type() != var.type() || slot.shape() != var.shape()) {
        mismatch("slot variable '" + variables_[i] + "'", slot);
        return;
      }
    }
    for (auto i : like_variable)
      if (ctx.input(i).shape() != var.shape()) {
        mismatch("input " + std::to_string(i), ctx.input(i));
        return;
      }
    for (auto i : scalars)
      if (ctx.input(i).num_elements() != 1) {
        mismatch("input " + std::to_string(i) + " (a scalar)", ctx.input(i));
        return;
      }

    std::array<updated_variable<T>, Refs> vars;
    std::array<tensor, Refs> fresh;
    for (std::size_t i = 0; i < Refs; ++i) {
      tensor& stored = states[i]->value;
      vars[i].in = stored.data<T>();
      if (writable_in_place(ctx, stored)) {
        vars[i].out = stored.data<T>();
      } else {
        // Someone still reads the old value: build the new one beside it and swap.
        fresh[i] = tensor{stored.type(), stored.shape(), ctx.dev().device_allocator()};
        vars[i].out = fresh[i].template data<T>();
      }
    }
    for_blocks(ctx, var.num_elements(),
               [&](std::int64_t begin, std::int64_t end) { update(begin, end, vars); }, cost);
    for (std::size_t i = 0; i < Refs; ++i)
      if (fresh[i].is_initialized())
        states[i]->value = std::move(fresh[i]);
    ++states[0]->version;
    ctx.set_output(0, states[0]->value);
  }

  /// A scalar input's value (checked by run's `scalars`).
  static T scalar(const kernel_context& ctx, int i) { return ctx.input(i).data<T>()[0]; }

private:
  /// Whether the stored buffer `held` may be written in place: its only other holders are this
  /// call's ref inputs (the variables' own outputs, which end with the call and are never read
  /// as values here). A data input sharing it — or any reader elsewhere — forces a copy.
  static bool writable_in_place(const kernel_context& ctx, const tensor& held) {
    long from_refs = 0;
    for (std::size_t i = 0; i < Refs && static_cast<int>(i) < ctx.num_inputs(); ++i)
      if (ctx.input(static_cast<int>(i)).shares_buffer_with(held))
        ++from_refs;
    return held.buffer_ref().use_count() == 1 + from_refs;
  }

  std::array<std::string, Refs> variables_;
};

/// var -= alpha * delta
template <class T>
class apply_gradient_descent_kernel : public apply_kernel_base<T, 1> {
public:
  using apply_kernel_base<T, 1>::apply_kernel_base;

  void compute(kernel_context& ctx) override {
    if (ctx.num_inputs() != 3)
      return ctx.fail(make_error(errc::invalid_argument, "ApplyGradientDescent needs 3 inputs"));
    this->run(ctx, {2}, {1}, 2, [&](std::int64_t begin, std::int64_t end, auto& vars) {
      auto n = end - begin;
      T alpha = this->scalar(ctx, 1);
      const T* delta = ctx.input(2).template data<T>() + begin;
      view(vars[0].out + begin, n) = view(vars[0].in + begin, n) - alpha * view(delta, n);
    });
  }
};

/// accum = accum * momentum + grad;
/// var -= lr * accum, or with Nesterov var -= lr * (grad + momentum * accum).
template <class T>
class apply_momentum_kernel : public apply_kernel_base<T, 2> {
public:
  explicit apply_momentum_kernel(const node& n)
    : apply_kernel_base<T, 2>(n), use_nesterov_(n.attr_or<bool>("use_nesterov", false)) {}

  void compute(kernel_context& ctx) override {
    if (ctx.num_inputs() != 5)
      return ctx.fail(make_error(errc::invalid_argument, "ApplyMomentum needs 5 inputs"));
    this->run(ctx, {3}, {2, 4}, 5, [&](std::int64_t begin, std::int64_t end, auto& vars) {
      auto n = end - begin;
      T lr = this->scalar(ctx, 2);
      T momentum = this->scalar(ctx, 4);
      auto grad = view(static_cast<const T*>(ctx.input(3).template data<T>()) + begin, n);
      auto accum_out = view(vars[1].out + begin, n);
      accum_out = view(vars[1].in + begin, n) * momentum + grad;
      auto var_out = view(vars[0].out + begin, n);
      auto var_in = view(vars[0].in + begin, n);
      if (use_nesterov_)
        var_out = var_in - lr * (grad + momentum * accum_out);
      else
        var_out = var_in - lr * accum_out;
    });
  }

private:
  bool use_nesterov_;
};

/// lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power);
/// m += (grad - m) * (1 - beta1);  v += (grad^2 - v) * (1 - beta2);
/// var -= lr_t * m / (sqrt(v) + epsilon)
template <class T>
class apply_adam_kernel : public apply_kernel_base<T, 3> {
public:
  using apply_kernel_base<T, 3>::apply_kernel_base;

  void compute(kernel_context& ctx) override {
    if (ctx.num_inputs() != 10)
      return ctx.fail(make_error(errc::invalid_argument, "ApplyAdam needs 10 inputs"));
    auto update = [&](std::int64_t begin, std::int64_t end, auto& vars) {
      auto n = end - begin;
      T beta1_power = this->scalar(ctx, 3);
      T beta2_power = this->scalar(ctx, 4);
      T lr = this->scalar(ctx, 5);
      T beta1 = this->scalar(ctx, 6);
      T beta2 = this->scalar(ctx, 7);
      T epsilon = this->scalar(ctx, 8);
      T lr_t = lr * std::sqrt(T(1) - beta2_power) / (T(1) - beta1_power);
      auto grad = view(static_cast<const T*>(ctx.input(9).template data<T>()) + begin, n);
      auto m_in = view(vars[1].in + begin, n);
      auto m = view(vars[1].out + begin, n);
      m = m_in + (grad - m_in) * (T(1) - beta1);
      auto v_in = view(vars[2].in + begin, n);
      auto v = view(vars[2].out + begin, n);
      v = v_in + (grad.square() - v_in) * (T(1) - beta2);
      view(vars[0].out + begin, n) = view(vars[0].in + begin, n) - lr_t * m / (v.sqrt() + epsilon);
    };
    this->run(ctx, {9}, {3, 4, 5, 6, 7, 8}, 12, update);
  }
};

} // namespace

void register_apply_kernels(kernel_registry& registry) {
  add_typed_kernels<apply_gradient_descent_kernel, float, double>(registry, "ApplyGradientDescent");
  add_typed_kernels<apply_momentum_kernel, float, double>(registry, "ApplyMomentum");
  add_typed_kernels<apply_adam_kernel, float, double>(registry, "ApplyAdam");
}

} // namespace actorflow

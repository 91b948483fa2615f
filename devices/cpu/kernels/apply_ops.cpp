// ApplyGradientDescent, ApplyMomentum, ApplyAdam, ApplyAdagrad, ApplyFtrl(V2): the optimizer updates (TensorFlow's
// training_ops), for float32 and float64. Input 0 is the variable (attr "variable" names it);
// the slot inputs (accum; m and v) are variables too (attr "slots": their names, comma-separated,
// in input order). The kernel holds every updated variable's mutex for the whole update and
// writes each stored buffer in place when nothing outside this call shares it; otherwise the
// new value goes to a fresh buffer that replaces the stored one (AssignAdd's rule), so readers
// never see a half-made update. The output is the variable's new value. Those rules live in
// devices/variable_update.hpp, shared with the GPU; this file keeps the arithmetic.
#include "devices/cpu/kernels/kernel_util.hpp"
#include "devices/device.hpp"
#include "devices/ftrl.hpp"
#include "devices/variable_update.hpp"

#include <cmath>
#include <cstring>

namespace actorflow {

namespace {

using namespace cpu;

/// The CPU's part of the shared update rules: check_input's words, and no memory rules (these
/// kernels also run on the test device, whose memory they address like the host's).
const update_rules cpu_update_rules{&check_as_status<&check_input>, false};

/// The update kernels' common part: the `Refs` variables (input 0 and the slots) come from the
/// node's attributes; variable_update checks and locks them and decides in place or
/// copy-on-write, and this runs the arithmetic over the elements.
template <class T, std::size_t Refs>
class apply_kernel_base : public op_kernel {
public:
  explicit apply_kernel_base(const node& n)
    : op_kernel(n), variables_(updated_variable_names(n, Refs)) {}

protected:
  /// Runs `update(begin, end, vars)` over the elements, each block under every variable's lock,
  /// after variable_update::prepare's checks (`like_variable`: the inputs of the variable's
  /// shape, `scalars`: those of one element); vars[i] is variable i's (input i's) old and new
  /// memory.
  template <class Update>
  void run(kernel_context& ctx, const std::vector<int>& like_variable,
           const std::vector<int>& scalars, std::int64_t cost, Update&& update) {
    variable_update held{cpu_update_rules};
    auto prepared = held.prepare(ctx, *this, variables_, dtype_of<T>(), like_variable, scalars);
    if (!prepared.ok())
      return ctx.fail(std::move(prepared));
    auto vars = held.variables<T, Refs>();
    for_blocks(ctx, held.num_elements(),
               [&](std::int64_t begin, std::int64_t end) { update(begin, end, vars); }, cost);
    held.commit(ctx);
  }

  /// A scalar input's value (checked by run's `scalars`).
  static T scalar(const kernel_context& ctx, int i) { return ctx.input(i).data<T>()[0]; }

private:
  std::vector<std::string> variables_;
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

/// accum += grad^2; var -= lr * grad / sqrt(accum)
template <class T>
class apply_adagrad_kernel : public apply_kernel_base<T, 2> {
public:
  using apply_kernel_base<T, 2>::apply_kernel_base;

  void compute(kernel_context& ctx) override {
    if (ctx.num_inputs() != 4)
      return ctx.fail(make_error(errc::invalid_argument, "ApplyAdagrad needs 4 inputs"));
    this->run(ctx, {3}, {2}, 5, [&](std::int64_t begin, std::int64_t end, auto& vars) {
      auto n = end - begin;
      T lr = this->scalar(ctx, 2);
      auto grad = view(static_cast<const T*>(ctx.input(3).template data<T>()) + begin, n);
      auto accum = view(vars[1].out + begin, n);
      accum = view(vars[1].in + begin, n) + grad.square();
      view(vars[0].out + begin, n) = view(vars[0].in + begin, n) - lr * grad / accum.sqrt();
    });
  }
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

/// FTRL-Proximal (devices/ftrl.hpp): ApplyFtrl(var, accum, linear, grad, lr, l1, l2, lr_power)
/// and, with `V2`, ApplyFtrlV2(var, accum, linear, grad, lr, l1, l2, l2_shrinkage, lr_power):
/// TF's input orders.
template <class T, bool V2>
class apply_ftrl_kernel : public apply_kernel_base<T, 3> {
public:
  using apply_kernel_base<T, 3>::apply_kernel_base;

  void compute(kernel_context& ctx) override {
    const int inputs = V2 ? 9 : 8;
    if (ctx.num_inputs() != inputs)
      return ctx.fail(make_error(errc::invalid_argument, this->op() + " needs " +
                                                           std::to_string(inputs) + " inputs"));
    for (int i = 4; i < inputs; ++i)
      if (!ctx.input(i).is_initialized() || ctx.input(i).type() != dtype_of<T>() ||
          ctx.input(i).num_elements() != 1)
        return ctx.fail(make_error(errc::invalid_argument, this->op() + " node '" + this->name() +
                                                             "': input " + std::to_string(i) +
                                                             " must be a scalar of the variable's type"));
    ftrl_parameters<T> p{this->scalar(ctx, 4), this->scalar(ctx, 5), this->scalar(ctx, 6),
                         V2 ? this->scalar(ctx, 7) : T(0), this->scalar(ctx, inputs - 1)};
    if (auto checked = check_ftrl_parameters(p, this->op() + " node '" + this->name() + "'"); !checked.ok())
      return ctx.fail(std::move(checked));
    std::vector<int> scalars{4, 5, 6, 7};
    if (V2)
      scalars.push_back(8);
    this->run(ctx, {3}, scalars, 20, [&](std::int64_t begin, std::int64_t end, auto& vars) {
      auto n = end - begin;
      // ftrl_update works in place: a fresh buffer starts as the old value.
      for (auto& v : vars)
        if (v.out != v.in)
          std::memcpy(v.out + begin, v.in + begin, static_cast<std::size_t>(n) * sizeof(T));
      ftrl_update(vars[0].out + begin, vars[1].out + begin, vars[2].out + begin,
                  ctx.input(3).template data<T>() + begin, n, p);
    });
  }
};
template <class T>
using apply_ftrl_v1_kernel = apply_ftrl_kernel<T, false>;
template <class T>
using apply_ftrl_v2_kernel = apply_ftrl_kernel<T, true>;

} // namespace

void register_apply_kernels(kernel_registry& registry) {
  add_typed_kernels<apply_gradient_descent_kernel, float, double>(registry, "ApplyGradientDescent");
  add_typed_kernels<apply_momentum_kernel, float, double>(registry, "ApplyMomentum");
  add_typed_kernels<apply_adam_kernel, float, double>(registry, "ApplyAdam");
  add_typed_kernels<apply_adagrad_kernel, float, double>(registry, "ApplyAdagrad");
  add_typed_kernels<apply_ftrl_v1_kernel, float, double>(registry, "ApplyFtrl");
  add_typed_kernels<apply_ftrl_v2_kernel, float, double>(registry, "ApplyFtrlV2");
}

} // namespace actorflow

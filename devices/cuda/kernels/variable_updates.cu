// Variable updates on the GPU, with the CPU kernels' variable-state rules, dtypes and messages
// (devices/cpu/kernels/assign.cpp, apply_ops.cpp):
//   Assign, AssignAdd, AssignSub (float32, float64, int32, int64);
//   ApplyGradientDescent, ApplyMomentum, ApplyAdam (float32, float64).
// A stored buffer is written in place only when nothing outside this kernel call holds it;
// otherwise the new value goes to a fresh buffer that replaces it, so readers never see a
// half-made update. On the GPU "written" means "a write enqueued on the compute stream": the
// variable's lock is held while the work is enqueued, and stream order puts it after every
// kernel enqueued earlier that read the old value (those that still hold it, copies to the
// host among them, make the update use a fresh buffer).
// Scalar inputs (learning rates, betas) are read by the kernels in device memory: no value
// ever travels to the host.
#include "devices/cuda/cuda_kernel_util.hpp"
#include "devices/cuda/kernels/cuda_kernels.hpp"
#include "devices/cuda/kernels/device_math.cuh"

#include <algorithm>
#include <array>
#include <functional>
#include <mutex>

namespace actorflow::cuda {

namespace {

/// References to `t`'s buffer held by this kernel call's inputs; they end with the call.
long references_from_inputs(const kernel_context& ctx, const tensor& t) {
  long count = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.input(i).shares_buffer_with(t))
      ++count;
  return count;
}

/// Whether `held` is the only reference to its buffer besides this call's inputs.
bool exclusively_owned(const kernel_context& ctx, const tensor& held) {
  return held.buffer_ref().use_count() == 1 + references_from_inputs(ctx, held);
}

// --- Assign, AssignAdd, AssignSub ----------------------------------------------------------

class assign_base : public cuda_kernel {
public:
  explicit assign_base(const node& n)
    : cuda_kernel(n), variable_(n.attr_or<std::string>("variable", "")) {}

protected:
  /// The variable's state, or the error for a missing "variable" attribute.
  result<std::shared_ptr<variable_state>> state(kernel_context& ctx) const {
    if (variable_.empty())
      return make_error(errc::invalid_argument, op() + " node '" + name() +
                                                  "' has no 'variable' attribute naming its variable");
    return ctx.resources().variable(variable_);
  }

  std::string variable_;
};

template <class T>
class assign_kernel final : public assign_base {
public:
  using assign_base::assign_base;

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_input(ctx, 1, dtype_of<T>()));
    auto var = state(ctx);
    if (!var)
      return var.error();
    const tensor& value = ctx.input(1);
    std::lock_guard<std::mutex> guard{(*var)->mutex};
    auto& stored = (*var)->value;
    if (value.buffer_ref().use_count() == references_from_inputs(ctx, value)) {
      // Only ctx holds the value: adopt its buffer, no copy.
      stored = value;
    } else if (stored.is_initialized() && stored.type() == value.type() &&
               stored.shape() == value.shape() && !stored.shares_buffer_with(value) &&
               stored.space() == value.space() && exclusively_owned(ctx, stored)) {
      // Nobody holds the old buffer any more: overwrite it and allocate nothing.
      if (value.bytes() > 0)
        AF_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(stored.raw_data(), value.raw_data(),
                                                value.bytes(), cudaMemcpyDeviceToDevice, stream));
    } else {
      auto copy = ctx.dev().copy_on_device(value);
      if (!copy)
        return copy.error();
      stored = std::move(*copy);
    }
    ++(*var)->version;
    ctx.set_output(0, stored);
    return {};
  }
};

/// out = in + sign * delta (out may be in: each element is read before it is written).
template <class T>
__global__ void add_scaled(const T* in, const T* delta, T* out, std::int64_t n, T sign) {
  AF_GRID_STRIDE_LOOP(i, n) out[i] = in[i] + sign * delta[i];
}

template <class T>
status launch_add_scaled(cudaStream_t stream, const T* in, const T* delta, T* out,
                         std::int64_t n, T sign) {
  add_scaled<T><<<blocks_for(n), default_block, 0, stream>>>(in, delta, out, n, sign);
  AF_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

/// AssignAdd (sign 1) and AssignSub (sign -1).
template <class T, int sign>
class assign_update_kernel final : public assign_base {
public:
  using assign_base::assign_base;

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_input(ctx, 1, dtype_of<T>()));
    auto var = state(ctx);
    if (!var)
      return var.error();
    const tensor& delta = ctx.input(1);
    std::lock_guard<std::mutex> guard{(*var)->mutex};
    auto& stored = (*var)->value;
    if (!stored.is_initialized())
      return make_error(errc::failed_precondition, "Attempting to use uninitialized value " +
                                                     variable_ + " (in " + op() + " node '" +
                                                     name() + "')");
    if (stored.type() != delta.type() || stored.shape() != delta.shape())
      return make_error(errc::invalid_argument,
                        op() + " to variable '" + variable_ + "': the variable is " +
                          to_string(stored.type()) + stored.shape().to_string() +
                          " but the value is " + to_string(delta.type()) +
                          delta.shape().to_string());
    auto n = stored.num_elements();
    if (exclusively_owned(ctx, stored)) {
      if (n > 0)
        AF_RETURN_IF_ERROR(launch_add_scaled<T>(stream, stored.data<T>(), delta.data<T>(),
                                                stored.data<T>(), n, T(sign)));
    } else {
      // Someone still holds the old value: build the new one beside it and swap.
      tensor fresh{stored.type(), stored.shape(), ctx.dev().device_allocator()};
      if (n > 0)
        AF_RETURN_IF_ERROR(launch_add_scaled<T>(stream, stored.data<T>(), delta.data<T>(),
                                                fresh.data<T>(), n, T(sign)));
      stored = std::move(fresh);
    }
    ++(*var)->version;
    ctx.set_output(0, stored);
    return {};
  }
};

template <class T>
using assign_add_kernel = assign_update_kernel<T, 1>;
template <class T>
using assign_sub_kernel = assign_update_kernel<T, -1>;

// --- the optimizer updates -----------------------------------------------------------------

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

/// One variable an update writes: its old value and where the new one goes (the same memory
/// when updated in place). Plain pointers: the kernels get arrays of them by value.
template <class T>
struct updated_variable {
  const T* in;
  T* out;
};

/// The shared part of the update kernels (apply_ops.cpp's apply_kernel_base): finds and locks
/// the `Refs` variables (input 0 and the slots named by attr "slots"), checks them and the
/// other inputs, decides in place or fresh buffer, enqueues `update(vars)`, and installs fresh
/// buffers. `like_variable` lists the non-ref inputs that must have the variable's shape,
/// `scalars` those that must hold one element.
template <class T, std::size_t Refs>
class apply_kernel_base : public cuda_kernel {
public:
  explicit apply_kernel_base(const node& n) : cuda_kernel(n) {
    variables_[0] = n.attr_or<std::string>("variable", "");
    auto slots = split_names(n.attr_or<std::string>("slots", ""));
    for (std::size_t i = 1; i < Refs; ++i)
      variables_[i] = i - 1 < slots.size() ? slots[i - 1] : std::string{};
  }

protected:
  using variables = std::array<updated_variable<T>, Refs>;

  template <class Update>
  status run(kernel_context& ctx, const std::vector<int>& like_variable,
             const std::vector<int>& scalars, Update&& update) {
    for (std::size_t i = 0; i < Refs; ++i)
      if (variables_[i].empty())
        return make_error(errc::invalid_argument,
                          op() + " node '" + name() + "' has no " +
                            (i == 0 ? std::string{"'variable' attribute naming its variable"}
                                    : "'slots' attribute naming its slot variable " +
                                        std::to_string(i)));
    for (int i = static_cast<int>(Refs); i < ctx.num_inputs(); ++i)
      AF_RETURN_IF_ERROR(expect_input(ctx, i, dtype_of<T>()));
    std::array<std::shared_ptr<variable_state>, Refs> states;
    for (std::size_t i = 0; i < Refs; ++i) {
      states[i] = ctx.resources().variable(variables_[i]);
      for (std::size_t j = 0; j < i; ++j)
        if (states[j] == states[i])
          return make_error(errc::invalid_argument, op() + " node '" + name() +
                                                      "' names variable '" + variables_[i] +
                                                      "' twice");
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
      if (!states[i]->value.is_initialized())
        return make_error(errc::failed_precondition, "Attempting to use uninitialized value " +
                                                       variables_[i] + " (in " + op() +
                                                       " node '" + name() + "')");
    tensor& var = states[0]->value;
    if (var.type() != dtype_of<T>())
      return make_error(errc::invalid_argument, op() + " to variable '" + variables_[0] +
                                                  "': the variable is " + to_string(var.type()) +
                                                  " but the update is " +
                                                  to_string(dtype_of<T>()));
    auto mismatch = [&](const std::string& what, const tensor& t) {
      return make_error(errc::invalid_argument,
                        op() + " to variable '" + variables_[0] + "': the variable is " +
                          to_string(var.type()) + var.shape().to_string() + " but " + what +
                          " is " + to_string(t.type()) + t.shape().to_string());
    };
    for (std::size_t i = 1; i < Refs; ++i) {
      tensor& slot = states[i]->value;
      if (slot.type() != var.type() || slot.shape() != var.shape())
        return mismatch("slot variable '" + variables_[i] + "'", slot);
    }
    for (auto i : like_variable)
      if (ctx.input(i).shape() != var.shape())
        return mismatch("input " + std::to_string(i), ctx.input(i));
    for (auto i : scalars)
      if (ctx.input(i).num_elements() != 1)
        return mismatch("input " + std::to_string(i) + " (a scalar)", ctx.input(i));
    for (std::size_t i = 0; i < Refs; ++i)
      if (states[i]->value.space() != ctx.dev().memory())
        return make_error(errc::internal, op() + ": variable '" + variables_[i] +
                                            "' is not in the memory of " + ctx.dev().full_name());

    variables vars;
    std::array<tensor, Refs> fresh;
    for (std::size_t i = 0; i < Refs; ++i) {
      tensor& stored = states[i]->value;
      vars[i].in = stored.data<T>();
      if (writable_in_place(ctx, stored)) {
        vars[i].out = stored.data<T>();
      } else {
        // Someone still holds the old value: build the new one beside it and swap.
        fresh[i] = tensor{stored.type(), stored.shape(), ctx.dev().device_allocator()};
        vars[i].out = fresh[i].template data<T>();
      }
    }
    if (var.num_elements() > 0)
      AF_RETURN_IF_ERROR(update(vars, var.num_elements()));
    for (std::size_t i = 0; i < Refs; ++i)
      if (fresh[i].is_initialized())
        states[i]->value = std::move(fresh[i]);
    ++states[0]->version;
    ctx.set_output(0, states[0]->value);
    return {};
  }

  /// Input i's data (a scalar's lives in device memory too).
  static const T* data(const kernel_context& ctx, int i) { return ctx.input(i).data<T>(); }

private:
  /// Whether the stored buffer `held` may be written in place: its only other holders are this
  /// call's ref inputs (the variables' own outputs, which end with the call and are never read
  /// as values here). A data input sharing it, or any holder elsewhere, forces a fresh buffer.
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
__global__ void gradient_descent_body(updated_variable<T> var, const T* alpha, const T* delta,
                                      std::int64_t n) {
  T a = *alpha;
  AF_GRID_STRIDE_LOOP(i, n) var.out[i] = var.in[i] - a * delta[i];
}

template <class T>
class apply_gradient_descent_kernel final : public apply_kernel_base<T, 1> {
public:
  using apply_kernel_base<T, 1>::apply_kernel_base;

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    if (ctx.num_inputs() != 3)
      return make_error(errc::invalid_argument, "ApplyGradientDescent needs 3 inputs");
    return this->run(ctx, {2}, {1}, [&](auto& vars, std::int64_t n) -> status {
      gradient_descent_body<T><<<blocks_for(n), default_block, 0, stream>>>(
        vars[0], this->data(ctx, 1), this->data(ctx, 2), n);
      AF_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      return {};
    });
  }
};

/// accum = accum * momentum + grad;
/// var -= lr * accum, or with Nesterov var -= lr * (grad + momentum * accum).
template <class T>
__global__ void momentum_body(updated_variable<T> var, updated_variable<T> accum, const T* lr,
                              const T* grad, const T* momentum, bool use_nesterov,
                              std::int64_t n) {
  T l = *lr;
  T m = *momentum;
  AF_GRID_STRIDE_LOOP(i, n) {
    T a = accum.in[i] * m + grad[i];
    accum.out[i] = a;
    var.out[i] = use_nesterov ? var.in[i] - l * (grad[i] + m * a) : var.in[i] - l * a;
  }
}

template <class T>
class apply_momentum_kernel final : public apply_kernel_base<T, 2> {
public:
  explicit apply_momentum_kernel(const node& n)
    : apply_kernel_base<T, 2>(n), use_nesterov_(n.attr_or<bool>("use_nesterov", false)) {}

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    if (ctx.num_inputs() != 5)
      return make_error(errc::invalid_argument, "ApplyMomentum needs 5 inputs");
    return this->run(ctx, {3}, {2, 4}, [&](auto& vars, std::int64_t n) -> status {
      momentum_body<T><<<blocks_for(n), default_block, 0, stream>>>(
        vars[0], vars[1], this->data(ctx, 2), this->data(ctx, 3), this->data(ctx, 4),
        use_nesterov_, n);
      AF_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      return {};
    });
  }

private:
  bool use_nesterov_;
};

/// lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power);
/// m += (grad - m) * (1 - beta1);  v += (grad^2 - v) * (1 - beta2);
/// var -= lr_t * m / (sqrt(v) + epsilon)
template <class T>
struct adam_scalars {
  const T* beta1_power;
  const T* beta2_power;
  const T* lr;
  const T* beta1;
  const T* beta2;
  const T* epsilon;
};

template <class T>
__global__ void adam_body(updated_variable<T> var, updated_variable<T> m, updated_variable<T> v,
                          adam_scalars<T> s, const T* grad, std::int64_t n) {
  T beta1 = *s.beta1;
  T beta2 = *s.beta2;
  T epsilon = *s.epsilon;
  T lr_t = *s.lr * sqrt_of(T(1) - *s.beta2_power) / (T(1) - *s.beta1_power);
  AF_GRID_STRIDE_LOOP(i, n) {
    T g = grad[i];
    T m_new = m.in[i] + (g - m.in[i]) * (T(1) - beta1);
    T v_new = v.in[i] + (g * g - v.in[i]) * (T(1) - beta2);
    m.out[i] = m_new;
    v.out[i] = v_new;
    var.out[i] = var.in[i] - lr_t * m_new / (sqrt_of(v_new) + epsilon);
  }
}

template <class T>
class apply_adam_kernel final : public apply_kernel_base<T, 3> {
public:
  using apply_kernel_base<T, 3>::apply_kernel_base;

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    if (ctx.num_inputs() != 10)
      return make_error(errc::invalid_argument, "ApplyAdam needs 10 inputs");
    return this->run(ctx, {9}, {3, 4, 5, 6, 7, 8}, [&](auto& vars, std::int64_t n) -> status {
      adam_scalars<T> s{this->data(ctx, 3), this->data(ctx, 4), this->data(ctx, 5),
                        this->data(ctx, 6), this->data(ctx, 7), this->data(ctx, 8)};
      adam_body<T><<<blocks_for(n), default_block, 0, stream>>>(vars[0], vars[1], vars[2], s,
                                                                this->data(ctx, 9), n);
      AF_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      return {};
    });
  }
};

} // namespace

void register_variable_update_kernels(kernel_registry& registry) {
  using std::int32_t;
  using std::int64_t;
  add_gpu_kernels<assign_kernel, float, double, int32_t, int64_t>(registry, "Assign");
  add_gpu_kernels<assign_add_kernel, float, double, int32_t, int64_t>(registry, "AssignAdd");
  add_gpu_kernels<assign_sub_kernel, float, double, int32_t, int64_t>(registry, "AssignSub");
  add_gpu_kernels<apply_gradient_descent_kernel, float, double>(registry, "ApplyGradientDescent");
  add_gpu_kernels<apply_momentum_kernel, float, double>(registry, "ApplyMomentum");
  add_gpu_kernels<apply_adam_kernel, float, double>(registry, "ApplyAdam");
}

} // namespace actorflow::cuda

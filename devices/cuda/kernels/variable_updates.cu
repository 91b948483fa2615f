// Variable updates on the GPU, with the CPU kernels' variable-state rules, dtypes and messages,
// which both take from devices/variable_update.hpp:
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
#include "devices/variable_update.hpp"

namespace actorflow::cuda {

namespace {

/// What the shared update logic asks of the GPU: expect_input's checks and words (an input
/// must be in the card's memory), and variables and copies in the card's memory only.
const update_rules gpu_update_rules{&expect_input, true};

// --- Assign, AssignAdd, AssignSub ----------------------------------------------------------

template <class T>
class assign_kernel final : public cuda_kernel {
public:
  explicit assign_kernel(const node& n)
    : cuda_kernel(n), variable_(n.attr_or<std::string>("variable", "")) {}

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    auto overwrite = [stream](tensor& stored, const tensor& value) -> status {
      if (value.bytes() > 0)
        AF_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(stored.raw_data(), value.raw_data(),
                                                value.bytes(), cudaMemcpyDeviceToDevice, stream));
      return {};
    };
    return assign_variable(ctx, *this, variable_, dtype_of<T>(), gpu_update_rules, overwrite);
  }

private:
  std::string variable_;
};

/// out = in + sign * delta (out may be in: each element is read before it is written).
template <class T>
__global__ void add_scaled(const T* in, const T* delta, T* out, std::int64_t n, T sign) {
  AF_GRID_STRIDE_LOOP(i, n) out[i] = in[i] + sign * delta[i];
}

template <class T>
status launch_add_scaled(cudaStream_t stream, const T* in, const T* delta, T* out,
                         std::int64_t n, T sign) {
  return launch_over(n, stream, add_scaled<T>, in, delta, out, n, sign);
}

/// AssignAdd (sign 1) and AssignSub (sign -1).
template <class T, int sign>
class assign_update_kernel final : public cuda_kernel {
public:
  explicit assign_update_kernel(const node& n)
    : cuda_kernel(n), variable_(n.attr_or<std::string>("variable", "")) {}

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    variable_update held{gpu_update_rules};
    AF_RETURN_IF_ERROR(held.prepare_assign_update(ctx, *this, variable_, dtype_of<T>()));
    auto var = held.variable<T>(0);
    if (auto n = held.num_elements(); n > 0)
      AF_RETURN_IF_ERROR(
        launch_add_scaled<T>(stream, var.in, ctx.input(1).data<T>(), var.out, n, T(sign)));
    held.commit(ctx);
    return {};
  }

private:
  std::string variable_;
};

template <class T>
using assign_add_kernel = assign_update_kernel<T, 1>;
template <class T>
using assign_sub_kernel = assign_update_kernel<T, -1>;

// --- the optimizer updates -----------------------------------------------------------------

/// The optimizer updates' common part: the `Refs` variables (input 0 and the slots named by
/// attr "slots") come from the node's attributes; variable_update checks and locks them and
/// decides in place or fresh buffer, and run() enqueues the arithmetic.
template <class T, std::size_t Refs>
class apply_kernel_base : public cuda_kernel {
public:
  explicit apply_kernel_base(const node& n)
    : cuda_kernel(n), variables_(updated_variable_names(n, Refs)) {}

protected:
  /// After variable_update::prepare's checks (`like_variable`: the inputs of the variable's
  /// shape, `scalars`: those of one element), enqueues `update(vars, n)` for the n > 0
  /// elements, vars[i] being variable i's old and new memory, and installs the result.
  template <class Update>
  status run(kernel_context& ctx, const std::vector<int>& like_variable,
             const std::vector<int>& scalars, Update&& update) {
    variable_update held{gpu_update_rules};
    AF_RETURN_IF_ERROR(held.prepare(ctx, *this, variables_, dtype_of<T>(), like_variable, scalars));
    auto vars = held.variables<T, Refs>();
    if (auto n = held.num_elements(); n > 0)
      AF_RETURN_IF_ERROR(update(vars, n));
    held.commit(ctx);
    return {};
  }

  /// Input i's data (a scalar's lives in device memory too).
  static const T* data(const kernel_context& ctx, int i) { return ctx.input(i).data<T>(); }

private:
  std::vector<std::string> variables_;
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
      return launch_over(n, stream, gradient_descent_body<T>, vars[0], this->data(ctx,
          1), this->data(ctx, 2), n);
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
      return launch_over(n, stream, momentum_body<T>, vars[0], vars[1], this->data(ctx,
          2), this->data(ctx, 3), this->data(ctx, 4), use_nesterov_, n);
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
      return launch_over(n, stream, adam_body<T>, vars[0], vars[1], vars[2], s, this->data(ctx,
          9), n);
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

// Elementwise kernels on the GPU, with the CPU kernels' semantics, dtypes and messages
// (devices/cpu/kernels/unary_ops.cpp, binary_ops.cpp, gradient_kernels.cpp, cast.cpp,
// fill.cpp):
//   unary       Neg, Square, Abs, Sign (float32, float64, int32, int64); Sqrt, Exp, Log, Relu,
//               Sigmoid, Tanh, Floor, Ceil, Round, Sin, Cos, Log1p, Expm1 (float32,
//               float64); IsNan, IsInf, IsFinite (float32, float64; bool output); LogicalNot
//               (bool)
//   Gather      (float32, float64, int32, int64; indices int32 or int64)
//   binary      Add, Sub, Mul, Maximum, Minimum, Pow, FloorDiv, FloorMod, SquaredDifference
//               (float32, float64, int32, int64; the scalar rules of devices/elementwise_math.hpp),
//               Div (float32, float64), Equal, NotEqual, Less, LessEqual, Greater,
//               GreaterEqual, LogicalAnd, LogicalOr (those and bool; bool output), numpy
//               broadcasting (broadcast_index.hpp). An integer divisor of 0 or a negative integer
//               power is not checked here (the operands are not on the host), as in TensorFlow.
//   SelectV2    condition ? t : e, the three broadcast together
//   gradients   ReluGrad, SigmoidGrad, TanhGrad (float32, float64); AddN, OnesLike, ZerosLike,
//               BroadcastToShapeOf (float32, float64, int32, int64)
//   Cast        every pair of the five dtypes; Fill (float32, float64, int32, int64)
// Each family: the __global__ kernel, a launcher taking the stream, the op_kernel entry point.
#include "devices/concat_layout.hpp"
#include "devices/cuda/broadcast_index.hpp"
#include "devices/cuda/cuda_kernel_util.hpp"
#include "devices/cuda/kernels/cuda_kernels.hpp"
#include "devices/cuda/kernels/device_math.cuh"
#include "devices/elementwise_math.hpp"

#include <type_traits>

namespace actorflow::cuda {

namespace {

// --- unary ---------------------------------------------------------------------------------

struct neg_op {
  template <class T>
  __device__ T operator()(T x) const { return -x; }
};
struct square_op {
  template <class T>
  __device__ T operator()(T x) const { return x * x; }
};
struct sqrt_op {
  template <class T>
  __device__ T operator()(T x) const { return sqrt_of(x); }
};
struct exp_op {
  template <class T>
  __device__ T operator()(T x) const { return exp_of(x); }
};
struct log_op {
  template <class T>
  __device__ T operator()(T x) const { return log_of(x); }
};
struct relu_op {
  template <class T>
  __device__ T operator()(T x) const { return x > T(0) ? x : T(0); }
};
struct sigmoid_op {
  // exp(-x) overflows to inf for very negative x, which still gives the right limit, 0.
  template <class T>
  __device__ T operator()(T x) const { return T(1) / (T(1) + exp_of(-x)); }
};
struct tanh_op {
  template <class T>
  __device__ T operator()(T x) const { return tanh_of(x); }
};
struct logical_not_op {
  __device__ bool operator()(bool x) const { return !x; }
};
struct abs_op {
  template <class T>
  __device__ T operator()(T x) const { return x < T(0) ? -x : x; }
};
struct sign_op {
  template <class T>
  __device__ T operator()(T x) const { return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x); }
};
struct floor_op {
  __device__ float operator()(float x) const { return floorf(x); }
  __device__ double operator()(double x) const { return floor(x); }
};
struct ceil_op {
  __device__ float operator()(float x) const { return ceilf(x); }
  __device__ double operator()(double x) const { return ceil(x); }
};
struct round_op {
  // rint: half to even, as on the CPU.
  __device__ float operator()(float x) const { return rintf(x); }
  __device__ double operator()(double x) const { return rint(x); }
};

struct sin_op {
  __device__ float operator()(float x) const { return sinf(x); }
  __device__ double operator()(double x) const { return sin(x); }
};
struct cos_op {
  __device__ float operator()(float x) const { return cosf(x); }
  __device__ double operator()(double x) const { return cos(x); }
};
struct log1p_op {
  __device__ float operator()(float x) const { return log1pf(x); }
  __device__ double operator()(double x) const { return log1p(x); }
};
struct expm1_op {
  __device__ float operator()(float x) const { return expm1f(x); }
  __device__ double operator()(double x) const { return expm1(x); }
};
struct is_nan_op {
  template <class T>
  __device__ bool operator()(T x) const { return isnan(x); }
};
struct is_inf_op {
  template <class T>
  __device__ bool operator()(T x) const { return isinf(x); }
};
struct is_finite_op {
  template <class T>
  __device__ bool operator()(T x) const { return isfinite(x); }
};

template <class T, class Op, class Out>
__global__ void unary_kernel_body(const T* x, Out* y, std::int64_t n) {
  Op op;
  AF_GRID_STRIDE_LOOP(i, n) y[i] = op(x[i]);
}

template <class T, class Op, class Out = T>
status launch_unary(cudaStream_t stream, const T* x, Out* y, std::int64_t n) {
  return launch_over(n, stream, unary_kernel_body<T, Op, Out>, x, y, n);
}

/// Out[i] = Op(x[i]), of dtype Out (T for math, bool for the tests).
template <class T, class Op, class Out = T>
class unary_kernel final : public cuda_kernel {
public:
  using cuda_kernel::cuda_kernel;

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_input(ctx, 0, dtype_of<T>()));
    const tensor& x = ctx.input(0);
    tensor out = ctx.allocate_output(0, dtype_of<Out>(), x.shape());
    if (x.num_elements() == 0)
      return {};
    return launch_unary<T, Op, Out>(stream, x.data<T>(), out.data<Out>(), x.num_elements());
  }
};

template <class T>
using neg_kernel = unary_kernel<T, neg_op>;
template <class T>
using square_kernel = unary_kernel<T, square_op>;
template <class T>
using sqrt_kernel = unary_kernel<T, sqrt_op>;
template <class T>
using exp_kernel = unary_kernel<T, exp_op>;
template <class T>
using log_kernel = unary_kernel<T, log_op>;
template <class T>
using relu_kernel = unary_kernel<T, relu_op>;
template <class T>
using sigmoid_kernel = unary_kernel<T, sigmoid_op>;
template <class T>
using tanh_kernel = unary_kernel<T, tanh_op>;
template <class T>
using logical_not_kernel = unary_kernel<T, logical_not_op>;
template <class T>
using abs_kernel = unary_kernel<T, abs_op>;
template <class T>
using sign_kernel = unary_kernel<T, sign_op>;
template <class T>
using floor_kernel = unary_kernel<T, floor_op>;
template <class T>
using ceil_kernel = unary_kernel<T, ceil_op>;
template <class T>
using round_kernel = unary_kernel<T, round_op>;
template <class T>
using sin_kernel = unary_kernel<T, sin_op>;
template <class T>
using cos_kernel = unary_kernel<T, cos_op>;
template <class T>
using log1p_kernel = unary_kernel<T, log1p_op>;
template <class T>
using expm1_kernel = unary_kernel<T, expm1_op>;
template <class T>
using is_nan_kernel = unary_kernel<T, is_nan_op, bool>;
template <class T>
using is_inf_kernel = unary_kernel<T, is_inf_op, bool>;
template <class T>
using is_finite_kernel = unary_kernel<T, is_finite_op, bool>;

// --- Gather ----------------------------------------------------------------------------------

/// out[o, k, i] = params[o, indices[k], i]. An index out of [0, extent) gives zeros, as
/// TensorFlow's GPU kernel does (the CPU kernel reports it: the indices are not on the host).
template <class T, class Index>
__global__ void gather_body(const T* params, const Index* indices, T* out, std::int64_t count,
                            std::int64_t extent, std::int64_t inner, std::int64_t n) {
  AF_GRID_STRIDE_LOOP(i, n) {
    auto within = i % inner;
    auto k = (i / inner) % count;
    auto o = i / (inner * count);
    auto at = static_cast<std::int64_t>(indices[k]);
    out[i] = at >= 0 && at < extent ? params[(o * extent + at) * inner + within] : T(0);
  }
}

template <class T>
class gather_kernel final : public cuda_kernel {
public:
  explicit gather_kernel(const node& n) : cuda_kernel(n), axis_(n.attr_or<std::int64_t>("axis", 0)) {}

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_input(ctx, 0, dtype_of<T>()));
    // The indices' dtype picks the check below: make sure they exist before reading it.
    auto wide = ctx.num_inputs() > 1 && ctx.input(1).type() == dtype::int64;
    AF_RETURN_IF_ERROR(expect_input(ctx, 1, wide ? dtype::int64 : dtype::int32));
    const tensor& params = ctx.input(0);
    const tensor& indices = ctx.input(1);
    auto layout = make_gather_layout(params.shape(), indices.shape(), axis_);
    if (!layout)
      return layout.error();
    auto [outer, extent, inner, count, out_shape] = *layout;
    tensor out = ctx.allocate_output(0, dtype_of<T>(), out_shape);
    auto n = out.num_elements();
    if (n == 0)
      return {};
    if (wide)
      return launch_over(n, stream, gather_body<T, std::int64_t>, params.data<T>(),
                         indices.data<std::int64_t>(), out.data<T>(), count, extent, inner, n);
    return launch_over(n, stream, gather_body<T, std::int32_t>, params.data<T>(),
                       indices.data<std::int32_t>(), out.data<T>(), count, extent, inner, n);
  }

private:
  std::int64_t axis_;
};

// --- binary, with broadcasting -------------------------------------------------------------

struct add_op {
  template <class T>
  using out_type = T;
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct sub_op {
  template <class T>
  using out_type = T;
  template <class T>
  __device__ T operator()(T a, T b) const { return a - b; }
};
struct mul_op {
  template <class T>
  using out_type = T;
  template <class T>
  __device__ T operator()(T a, T b) const { return a * b; }
};
struct div_op {
  template <class T>
  using out_type = T;
  template <class T>
  __device__ T operator()(T a, T b) const { return a / b; }
};
struct equal_op {
  template <class T>
  using out_type = bool;
  template <class T>
  __device__ bool operator()(T a, T b) const { return a == b; }
};
struct less_op {
  template <class T>
  using out_type = bool;
  template <class T>
  __device__ bool operator()(T a, T b) const { return a < b; }
};
struct less_equal_op {
  template <class T>
  using out_type = bool;
  template <class T>
  __device__ bool operator()(T a, T b) const { return a <= b; }
};
struct greater_op {
  template <class T>
  using out_type = bool;
  template <class T>
  __device__ bool operator()(T a, T b) const { return a > b; }
};
struct greater_equal_op {
  template <class T>
  using out_type = bool;
  template <class T>
  __device__ bool operator()(T a, T b) const { return a >= b; }
};
struct logical_and_op {
  template <class T>
  using out_type = bool;
  template <class T>
  __device__ bool operator()(T a, T b) const { return a && b; }
};
struct not_equal_op {
  template <class T>
  using out_type = bool;
  template <class T>
  __device__ bool operator()(T a, T b) const { return a != b; }
};
struct logical_or_op {
  template <class T>
  using out_type = bool;
  template <class T>
  __device__ bool operator()(T a, T b) const { return a || b; }
};
struct squared_difference_op {
  template <class T>
  using out_type = T;
  template <class T>
  __device__ T operator()(T a, T b) const { return (a - b) * (a - b); }
};
/// An op applying one of devices/elementwise_math.hpp's scalar rules.
template <template <class> class Rule>
struct scalar_rule_op {
  template <class T>
  using out_type = T;
  template <class T>
  __device__ T operator()(T a, T b) const { return Rule<T>{}(a, b); }
};
/// The activation gradients: inputs in the CPU kernels' order.
struct relu_grad_op {
  // (dy, y): the gradient passes where the activation was positive.
  template <class T>
  using out_type = T;
  template <class T>
  // A multiply by the 0/1 mask, as on the CPU (a NaN gradient stays NaN).
  __device__ T operator()(T dy, T y) const { return dy * (y > T(0) ? T(1) : T(0)); }
};
struct sigmoid_grad_op {
  // (y, dy)
  template <class T>
  using out_type = T;
  template <class T>
  __device__ T operator()(T y, T dy) const { return dy * y * (T(1) - y); }
};
struct tanh_grad_op {
  // (y, dy)
  template <class T>
  using out_type = T;
  template <class T>
  __device__ T operator()(T y, T dy) const { return dy * (T(1) - y * y); }
};

template <class T, class Out, class Op>
__global__ void binary_same_shape(const T* a, const T* b, Out* out, std::int64_t n) {
  Op op;
  AF_GRID_STRIDE_LOOP(i, n) out[i] = op(a[i], b[i]);
}

template <class T, class Out, class Op>
__global__ void binary_broadcast(const T* a, const T* b, Out* out, broadcast_strides s) {
  Op op;
  AF_GRID_STRIDE_LOOP(i, s.count) {
    std::int64_t ia;
    std::int64_t ib;
    operand_offsets(s, i, ia, ib);
    out[i] = op(a[ia], b[ib]);
  }
}

template <class T, class Out, class Op>
status launch_binary_same_shape(cudaStream_t stream, const T* a, const T* b, Out* out,
                                std::int64_t n) {
  return launch_over(n, stream, binary_same_shape<T, Out, Op>, a, b, out, n);
}

template <class T, class Out, class Op>
status launch_binary_broadcast(cudaStream_t stream, const T* a, const T* b, Out* out,
                               const broadcast_strides& s) {
  return launch_over(s.count, stream, binary_broadcast<T, Out, Op>, a, b, out, s);
}

template <class T, class Op>
class binary_kernel final : public cuda_kernel {
public:
  using out_type = typename Op::template out_type<T>;
  using cuda_kernel::cuda_kernel;

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_inputs(ctx, 2, dtype_of<T>()));
    const tensor& a = ctx.input(0);
    const tensor& b = ctx.input(1);
    if (a.shape() == b.shape()) {
      tensor out = ctx.allocate_output(0, dtype_of<out_type>(), a.shape());
      if (a.num_elements() == 0)
        return {};
      return launch_binary_same_shape<T, out_type, Op>(stream, a.data<T>(), b.data<T>(),
                                                       out.data<out_type>(), a.num_elements());
    }
    auto shape = broadcast_shapes(a.shape(), b.shape());
    if (!shape)
      return shape.error();
    auto strides = make_broadcast_strides(a.shape(), b.shape());
    if (!strides)
      return strides.error();
    tensor out = ctx.allocate_output(0, dtype_of<out_type>(), *shape);
    if (out.num_elements() == 0)
      return {};
    return launch_binary_broadcast<T, out_type, Op>(stream, a.data<T>(), b.data<T>(),
                                                    out.data<out_type>(), *strides);
  }
};

template <class T>
using add_kernel = binary_kernel<T, add_op>;
template <class T>
using sub_kernel = binary_kernel<T, sub_op>;
template <class T>
using mul_kernel = binary_kernel<T, mul_op>;
template <class T>
using div_kernel = binary_kernel<T, div_op>;
template <class T>
using equal_kernel = binary_kernel<T, equal_op>;
template <class T>
using less_kernel = binary_kernel<T, less_op>;
template <class T>
using less_equal_kernel = binary_kernel<T, less_equal_op>;
template <class T>
using greater_kernel = binary_kernel<T, greater_op>;
template <class T>
using greater_equal_kernel = binary_kernel<T, greater_equal_op>;
template <class T>
using logical_and_kernel = binary_kernel<T, logical_and_op>;
template <class T>
using not_equal_kernel = binary_kernel<T, not_equal_op>;
template <class T>
using logical_or_kernel = binary_kernel<T, logical_or_op>;
template <class T>
using squared_difference_kernel = binary_kernel<T, squared_difference_op>;
template <class T>
using maximum_kernel = binary_kernel<T, scalar_rule_op<maximum_rule>>;
template <class T>
using minimum_kernel = binary_kernel<T, scalar_rule_op<minimum_rule>>;
template <class T>
using pow_kernel = binary_kernel<T, scalar_rule_op<pow_rule>>;
template <class T>
using floor_div_kernel = binary_kernel<T, scalar_rule_op<floor_div_rule>>;
template <class T>
using floor_mod_kernel = binary_kernel<T, scalar_rule_op<floor_mod_rule>>;

// --- SelectV2 ------------------------------------------------------------------------------

/// out[i] = c[ic] ? t[it] : e[ie], each operand's offset from its own strides against the
/// output (broadcast_index.hpp maps the output index to the first operand's offset).
template <class T>
__global__ void select_body(const bool* c, const T* t, const T* e, T* out, broadcast_strides sc,
                            broadcast_strides st, broadcast_strides se) {
  AF_GRID_STRIDE_LOOP(i, sc.count) {
    std::int64_t ic, it, ie, unused;
    operand_offsets(sc, i, ic, unused);
    operand_offsets(st, i, it, unused);
    operand_offsets(se, i, ie, unused);
    out[i] = c[ic] ? t[it] : e[ie];
  }
}

/// Registered under the condition's dtype (bool), which keys the node's kernel; the branches'
/// dtype is dispatched here with visit_dtype, as on the CPU (devices/cpu/kernels/select.cpp).
class select_kernel final : public cuda_kernel {
public:
  using cuda_kernel::cuda_kernel;

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_input(ctx, 0, dtype::boolean));
    auto type = ctx.num_inputs() > 1 ? ctx.input(1).type() : dtype::float32;
    AF_RETURN_IF_ERROR(expect_input(ctx, 1, type));
    AF_RETURN_IF_ERROR(expect_input(ctx, 2, type));
    return visit_dtype(type, [&](auto zero) { return run<decltype(zero)>(ctx, stream); });
  }

private:
  template <class T>
  static status run(kernel_context& ctx, cudaStream_t stream) {
    const tensor& c = ctx.input(0);
    const tensor& t = ctx.input(1);
    const tensor& e = ctx.input(2);
    auto shape = select_shape(c.shape(), t.shape(), e.shape(), ctx.def().name);
    if (!shape)
      return shape.error();
    auto sc = make_broadcast_strides(c.shape(), *shape);
    auto st = make_broadcast_strides(t.shape(), *shape);
    auto se = make_broadcast_strides(e.shape(), *shape);
    for (auto* s : {&sc, &st, &se})
      if (!*s)
        return s->error();
    tensor out = ctx.allocate_output(0, dtype_of<T>(), *shape);
    if (out.num_elements() == 0)
      return {};
    return launch_over(out.num_elements(), stream, select_body<T>, c.data<bool>(), t.data<T>(),
                       e.data<T>(), out.data<T>(), *sc, *st, *se);
  }
};

/// ReluGrad, SigmoidGrad, TanhGrad: two inputs of one shape.
template <class T, class Op>
class activation_grad_kernel final : public cuda_kernel {
public:
  using cuda_kernel::cuda_kernel;

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_inputs(ctx, 2, dtype_of<T>()));
    const tensor& a = ctx.input(0);
    const tensor& b = ctx.input(1);
    if (a.shape() != b.shape())
      return make_error(errc::invalid_argument, ctx.def().op + ": inputs have different shapes: " +
                                                  a.shape().to_string() + " and " +
                                                  b.shape().to_string());
    tensor out = ctx.allocate_output(0, dtype_of<T>(), a.shape());
    if (a.num_elements() == 0)
      return {};
    return launch_binary_same_shape<T, T, Op>(stream, a.data<T>(), b.data<T>(), out.data<T>(),
                                              a.num_elements());
  }
};

template <class T>
using relu_grad_kernel = activation_grad_kernel<T, relu_grad_op>;
template <class T>
using sigmoid_grad_kernel = activation_grad_kernel<T, sigmoid_grad_op>;
template <class T>
using tanh_grad_kernel = activation_grad_kernel<T, tanh_grad_op>;

// --- AddN ----------------------------------------------------------------------------------

/// Up to eight summands per launch, passed by value.
template <class T>
struct summands {
  static constexpr int max = 8;
  const T* p[max];
  int count;
};

/// out = sum of s (out may be one of them: each element is read before it is written).
template <class T>
__global__ void add_n_body(summands<T> s, T* out, std::int64_t n) {
  AF_GRID_STRIDE_LOOP(i, n) {
    T sum = s.p[0][i];
    for (int k = 1; k < s.count; ++k)
      sum += s.p[k][i];
    out[i] = sum;
  }
}

template <class T>
status launch_add_n(cudaStream_t stream, const summands<T>& s, T* out, std::int64_t n) {
  return launch_over(n, stream, add_n_body<T>, s, out, n);
}

template <class T>
class add_n_kernel final : public cuda_kernel {
public:
  using cuda_kernel::cuda_kernel;

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    if (ctx.num_inputs() == 0)
      return make_error(errc::invalid_argument, ctx.def().op + ": needs at least one input");
    AF_RETURN_IF_ERROR(expect_inputs(ctx, ctx.num_inputs(), dtype_of<T>()));
    const auto& shape = ctx.input(0).shape();
    for (int i = 1; i < ctx.num_inputs(); ++i)
      if (ctx.input(i).shape() != shape)
        return make_error(errc::invalid_argument,
                          ctx.def().op + ": inputs have different shapes: " + shape.to_string() +
                            " and " + ctx.input(i).shape().to_string());
    if (ctx.num_inputs() == 1) {
      ctx.set_output(0, ctx.input(0));
      return {};
    }
    tensor out = ctx.allocate_output(0, dtype_of<T>(), shape);
    auto n = out.num_elements();
    if (n == 0)
      return {};
    // The first launch sums up to eight inputs; each further one adds up to seven to `out`.
    summands<T> s{};
    int next = 0;
    while (next < ctx.num_inputs()) {
      s.count = 0;
      if (next > 0)
        s.p[s.count++] = out.data<T>();
      while (s.count < summands<T>::max && next < ctx.num_inputs())
        s.p[s.count++] = ctx.input(next++).data<T>();
      AF_RETURN_IF_ERROR(launch_add_n<T>(stream, s, out.data<T>(), n));
    }
    return {};
  }
};

// --- constants: OnesLike, ZerosLike, Fill --------------------------------------------------

template <class T>
__global__ void fill_constant(T* out, std::int64_t n, T value) {
  AF_GRID_STRIDE_LOOP(i, n) out[i] = value;
}

/// out[i] = *value, with value in device memory (Fill's scalar input never visits the host).
template <class T>
__global__ void fill_from_device(T* out, std::int64_t n, const T* value) {
  T v = *value;
  AF_GRID_STRIDE_LOOP(i, n) out[i] = v;
}

template <class T>
status launch_fill_constant(cudaStream_t stream, T* out, std::int64_t n, T value) {
  return launch_over(n, stream, fill_constant<T>, out, n, value);
}

template <class T>
status launch_fill_from_device(cudaStream_t stream, T* out, std::int64_t n, const T* value) {
  return launch_over(n, stream, fill_from_device<T>, out, n, value);
}

template <class T, int value>
class constant_like_kernel final : public cuda_kernel {
public:
  using cuda_kernel::cuda_kernel;

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    if (ctx.num_inputs() < 1)
      return make_error(errc::invalid_argument, ctx.def().op + " expects one input");
    tensor out = ctx.allocate_output(0, dtype_of<T>(), ctx.input(0).shape());
    if (out.num_elements() == 0)
      return {};
    if (value == 0) {
      // All-zero bytes are zero in every dtype.
      AF_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.raw_data(), 0, out.bytes(), stream));
      return {};
    }
    return launch_fill_constant<T>(stream, out.data<T>(), out.num_elements(), T(value));
  }
};

template <class T>
using ones_like_kernel = constant_like_kernel<T, 1>;
template <class T>
using zeros_like_kernel = constant_like_kernel<T, 0>;

template <class T>
class fill_kernel final : public cuda_kernel {
public:
  fill_kernel(const node& n, tensor_shape shape) : cuda_kernel(n), shape_(std::move(shape)) {}

  static result<std::unique_ptr<op_kernel>> make(const node& n) {
    std::optional<tensor_shape> shape;
    if (auto* s = n.attr<tensor_shape>("shape"))
      shape = *s;
    else if (auto* dims = n.attr<std::vector<std::int64_t>>("shape"))
      shape = tensor_shape{*dims};
    if (!shape || !shape->fully_defined())
      return make_error(errc::invalid_argument, "node '" + n.name + "' (" + n.op +
                                                  "): attribute 'shape' must be a fully "
                                                  "defined shape");
    return std::unique_ptr<op_kernel>{std::make_unique<fill_kernel>(n, std::move(*shape))};
  }

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_input(ctx, 0, dtype_of<T>()));
    const tensor& value = ctx.input(0);
    if (value.num_elements() != 1)
      return make_error(errc::invalid_argument,
                        "Fill: value must be a scalar, got shape " + value.shape().to_string());
    tensor out = ctx.allocate_output(0, dtype_of<T>(), shape_);
    if (out.num_elements() == 0)
      return {};
    return launch_fill_from_device<T>(stream, out.data<T>(), out.num_elements(), value.data<T>());
  }

private:
  tensor_shape shape_;
};

template <class T>
result<std::unique_ptr<op_kernel>> make_fill(const node& n) {
  return fill_kernel<T>::make(n);
}

// --- Cast ----------------------------------------------------------------------------------

template <class From, class To>
__global__ void cast_body(const From* x, To* y, std::int64_t n) {
  // static_cast semantics, as on the CPU: float to int truncates, nonzero to bool is true.
  AF_GRID_STRIDE_LOOP(i, n) y[i] = static_cast<To>(x[i]);
}

template <class From, class To>
status launch_cast(cudaStream_t stream, const From* x, To* y, std::int64_t n) {
  return launch_over(n, stream, cast_body<From, To>, x, y, n);
}

/// Registered under the source dtype (the node's kernel type is its input's); the destination
/// comes from attr "dtype".
template <class From>
class cast_kernel final : public cuda_kernel {
public:
  explicit cast_kernel(const node& n)
    : cuda_kernel(n), to_(n.attr_or<dtype>("dtype", n.output_types.empty() ? dtype_of<From>()
                                                                           : n.output_types[0])) {}

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_input(ctx, 0, dtype_of<From>()));
    const tensor& x = ctx.input(0);
    if (to_ == dtype_of<From>()) {
      // Nothing to convert: share the buffer like Identity.
      ctx.set_output(0, x);
      return {};
    }
    tensor out = ctx.allocate_output(0, to_, x.shape());
    if (x.num_elements() == 0)
      return {};
    return visit_dtype(to_, [&](auto zero) {
      using To = decltype(zero);
      return launch_cast<From, To>(stream, x.data<From>(), out.data<To>(), x.num_elements());
    });
  }

private:
  dtype to_;
};

// --- BroadcastToShapeOf --------------------------------------------------------------------

/// out[i] = dy[offset of i in dy] * scale.
template <class T>
__global__ void broadcast_scaled(const T* dy, T* out, broadcast_strides s, T scale) {
  AF_GRID_STRIDE_LOOP(i, s.count) {
    std::int64_t ia;
    std::int64_t ib;
    operand_offsets(s, i, ia, ib);
    out[i] = dy[ia] * scale;
  }
}

template <class T>
status launch_broadcast_scaled(cudaStream_t stream, const T* dy, T* out,
                               const broadcast_strides& s, T scale) {
  return launch_over(s.count, stream, broadcast_scaled<T>, dy, out, s, scale);
}

/// dy, the result of reducing x over `axes` (with or without keep_dims), repeated along the
/// reduced axes to x's run-time shape (input 1 is read for its shape only).
template <class T>
class broadcast_to_shape_kernel final : public cuda_kernel {
public:
  explicit broadcast_to_shape_kernel(const node& n)
    : cuda_kernel(n), axes_(n.attr_or<std::vector<std::int64_t>>("axes", {})),
      divide_by_count_(n.attr_or<bool>("divide_by_count", false)) {}

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_input(ctx, 0, dtype_of<T>()));
    if (ctx.num_inputs() < 2)
      return make_error(errc::invalid_argument, ctx.def().op + " expects 2 inputs");
    const tensor& dy = ctx.input(0);
    const tensor_shape& x = ctx.input(1).shape();
    auto rank = x.rank();
    std::vector<bool> reduced(static_cast<std::size_t>(rank), axes_.empty());
    for (auto axis : axes_) {
      if (axis < -rank || axis >= rank)
        return make_error(errc::invalid_argument, "Invalid reduction dimension " +
                                                    std::to_string(axis) +
                                                    " is out of range for a tensor of rank " +
                                                    std::to_string(rank));
      reduced[static_cast<std::size_t>(axis < 0 ? axis + rank : axis)] = true;
    }
    std::vector<std::int64_t> kept_dims;
    for (int i = 0; i < rank; ++i)
      kept_dims.push_back(reduced[static_cast<std::size_t>(i)] ? 1 : x.dim(i));
    tensor_shape kept{kept_dims};
    if (dy.num_elements() != kept.num_elements())
      return make_error(errc::invalid_argument,
                        ctx.def().op + ": a reduced gradient of shape " + dy.shape().to_string() +
                          " does not match shape " + x.to_string() + " reduced to " +
                          kept.to_string());
    tensor out = ctx.allocate_output(0, dtype_of<T>(), x);
    auto total = out.num_elements();
    if (total == 0)
      return {};
    T scale = T(1);
    if (divide_by_count_)
      scale = T(1) / static_cast<T>(total / std::max<std::int64_t>(1, kept.num_elements()));
    auto strides = make_broadcast_strides(kept, x);
    if (!strides)
      return strides.error();
    return launch_broadcast_scaled<T>(stream, dy.data<T>(), out.data<T>(), *strides, scale);
  }

private:
  std::vector<std::int64_t> axes_;
  bool divide_by_count_;
};

} // namespace

status check_kernel_image() {
  cudaFuncAttributes attributes{};
  AF_CUDA_RETURN_IF_ERROR(cudaFuncGetAttributes(&attributes, fill_constant<float>));
  return {};
}

void register_elementwise_kernels(kernel_registry& registry) {
  using std::int32_t;
  using std::int64_t;
  add_gpu_kernels<neg_kernel, float, double, int32_t, int64_t>(registry, "Neg");
  add_gpu_kernels<square_kernel, float, double, int32_t, int64_t>(registry, "Square");
  add_gpu_kernels<sqrt_kernel, float, double>(registry, "Sqrt");
  add_gpu_kernels<exp_kernel, float, double>(registry, "Exp");
  add_gpu_kernels<log_kernel, float, double>(registry, "Log");
  add_gpu_kernels<relu_kernel, float, double>(registry, "Relu");
  add_gpu_kernels<sigmoid_kernel, float, double>(registry, "Sigmoid");
  add_gpu_kernels<tanh_kernel, float, double>(registry, "Tanh");
  add_gpu_kernels<logical_not_kernel, bool>(registry, "LogicalNot");
  add_gpu_kernels<abs_kernel, float, double, int32_t, int64_t>(registry, "Abs");
  add_gpu_kernels<sign_kernel, float, double, int32_t, int64_t>(registry, "Sign");
  add_gpu_kernels<floor_kernel, float, double>(registry, "Floor");
  add_gpu_kernels<ceil_kernel, float, double>(registry, "Ceil");
  add_gpu_kernels<round_kernel, float, double>(registry, "Round");
  add_gpu_kernels<sin_kernel, float, double>(registry, "Sin");
  add_gpu_kernels<cos_kernel, float, double>(registry, "Cos");
  add_gpu_kernels<log1p_kernel, float, double>(registry, "Log1p");
  add_gpu_kernels<expm1_kernel, float, double>(registry, "Expm1");
  add_gpu_kernels<is_nan_kernel, float, double>(registry, "IsNan");
  add_gpu_kernels<is_inf_kernel, float, double>(registry, "IsInf");
  add_gpu_kernels<is_finite_kernel, float, double>(registry, "IsFinite");
  add_gpu_kernels<gather_kernel, float, double, int32_t, int64_t>(registry, "Gather");

  add_gpu_kernels<add_kernel, float, double, int32_t, int64_t>(registry, "Add");
  add_gpu_kernels<sub_kernel, float, double, int32_t, int64_t>(registry, "Sub");
  add_gpu_kernels<mul_kernel, float, double, int32_t, int64_t>(registry, "Mul");
  add_gpu_kernels<div_kernel, float, double>(registry, "Div");
  add_gpu_kernels<equal_kernel, float, double, int32_t, int64_t, bool>(registry, "Equal");
  add_gpu_kernels<less_kernel, float, double, int32_t, int64_t>(registry, "Less");
  add_gpu_kernels<less_equal_kernel, float, double, int32_t, int64_t>(registry, "LessEqual");
  add_gpu_kernels<greater_kernel, float, double, int32_t, int64_t>(registry, "Greater");
  add_gpu_kernels<greater_equal_kernel, float, double, int32_t, int64_t>(registry, "GreaterEqual");
  add_gpu_kernels<logical_and_kernel, bool>(registry, "LogicalAnd");
  add_gpu_kernels<not_equal_kernel, float, double, int32_t, int64_t, bool>(registry, "NotEqual");
  add_gpu_kernels<logical_or_kernel, bool>(registry, "LogicalOr");
  add_gpu_kernels<squared_difference_kernel, float, double, int32_t, int64_t>(registry,
                                                                              "SquaredDifference");
  add_gpu_kernels<maximum_kernel, float, double, int32_t, int64_t>(registry, "Maximum");
  add_gpu_kernels<minimum_kernel, float, double, int32_t, int64_t>(registry, "Minimum");
  add_gpu_kernels<pow_kernel, float, double, int32_t, int64_t>(registry, "Pow");
  add_gpu_kernels<floor_div_kernel, float, double, int32_t, int64_t>(registry, "FloorDiv");
  add_gpu_kernels<floor_mod_kernel, float, double, int32_t, int64_t>(registry, "FloorMod");
  registry.add({"SelectV2", "GPU", dtype::boolean}, &make_kernel<select_kernel>);

  add_gpu_kernels<relu_grad_kernel, float, double>(registry, "ReluGrad");
  add_gpu_kernels<sigmoid_grad_kernel, float, double>(registry, "SigmoidGrad");
  add_gpu_kernels<tanh_grad_kernel, float, double>(registry, "TanhGrad");
  add_gpu_kernels<add_n_kernel, float, double, int32_t, int64_t>(registry, "AddN");
  add_gpu_kernels<ones_like_kernel, float, double, int32_t, int64_t>(registry, "OnesLike");
  add_gpu_kernels<zeros_like_kernel, float, double, int32_t, int64_t>(registry, "ZerosLike");
  add_gpu_kernels<broadcast_to_shape_kernel, float, double, int32_t, int64_t>(
    registry, "BroadcastToShapeOf");

  add_gpu_kernels<cast_kernel, float, double, int32_t, int64_t, bool>(registry, "Cast");
  registry.add({"Fill", "GPU", dtype::float32}, &make_fill<float>);
  registry.add({"Fill", "GPU", dtype::float64}, &make_fill<double>);
  registry.add({"Fill", "GPU", dtype::int32}, &make_fill<int32_t>);
  registry.add({"Fill", "GPU", dtype::int64}, &make_fill<int64_t>);
}

} // namespace actorflow::cuda

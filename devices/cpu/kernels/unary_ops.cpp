// Elementwise unary math: Neg, Square, Sqrt, Exp, Log, Relu, Sigmoid, Tanh, LogicalNot, Abs,
// Sign, Floor, Ceil, Round, Sin, Cos, Log1p, Expm1; and the float tests IsNan, IsInf, IsFinite
// (bool results).
#include "devices/cpu/kernels/kernel_util.hpp"

namespace actorflow {

namespace {

using namespace cpu;

struct neg_op {
  template <class X>
  static auto apply(const X& x) { return -x; }
};
struct square_op {
  template <class X>
  static auto apply(const X& x) { return x.square(); }
};
struct sqrt_op {
  template <class X>
  static auto apply(const X& x) { return x.sqrt(); }
};
struct exp_op {
  template <class X>
  static auto apply(const X& x) { return x.exp(); }
};
struct log_op {
  template <class X>
  static auto apply(const X& x) { return x.log(); }
};
struct relu_op {
  template <class X>
  static auto apply(const X& x) { return x.max(typename X::Scalar(0)); }
};
struct sigmoid_op {
  // Eigen's logistic() is vectorised and saturates cleanly for large |x|.
  template <class X>
  static auto apply(const X& x) { return x.logistic(); }
};
struct tanh_op {
  template <class X>
  static auto apply(const X& x) { return x.tanh(); }
};
struct logical_not_op {
  template <class X>
  static auto apply(const X& x) { return !x; }
};

struct abs_op {
  template <class X>
  static auto apply(const X& x) { return x.abs(); }
};
struct sign_op {
  template <class X>
  static auto apply(const X& x) { return x.sign(); }
};
struct floor_op {
  template <class X>
  static auto apply(const X& x) { return x.floor(); }
};
struct ceil_op {
  template <class X>
  static auto apply(const X& x) { return x.ceil(); }
};
struct round_op {
  // rint: half to even in the default rounding mode, as TensorFlow's Round and numpy's round.
  template <class X>
  static auto apply(const X& x) { return x.rint(); }
};

struct sin_op {
  template <class X>
  static auto apply(const X& x) { return x.sin(); }
};
struct cos_op {
  template <class X>
  static auto apply(const X& x) { return x.cos(); }
};
struct log1p_op {
  template <class X>
  static auto apply(const X& x) { return x.log1p(); }
};
struct expm1_op {
  template <class X>
  static auto apply(const X& x) { return x.expm1(); }
};
struct is_nan_op {
  template <class X>
  static auto apply(const X& x) { return x.isNaN(); }
};
struct is_inf_op {
  template <class X>
  static auto apply(const X& x) { return x.isInf(); }
};
struct is_finite_op {
  template <class X>
  static auto apply(const X& x) { return x.isFinite(); }
};

/// Out[i] = Op(x[i]), of dtype Out (T for math, bool for the tests).
template <class T, class Op, class Out = T>
class unary_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;

  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, dtype_of<T>()))
      return;
    const tensor& x = ctx.input(0);
    tensor out = ctx.allocate_output(0, dtype_of<Out>(), x.shape());
    const T* px = x.data<T>();
    Out* po = out.data<Out>();
    for_blocks(ctx, x.num_elements(), [&](std::int64_t begin, std::int64_t end) {
      view(po + begin, end - begin) = Op::apply(view(px + begin, end - begin));
    });
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

} // namespace

void register_unary_kernels(kernel_registry& registry) {
  add_typed_kernels<neg_kernel, float, double, std::int32_t, std::int64_t>(registry, "Neg");
  add_typed_kernels<square_kernel, float, double, std::int32_t, std::int64_t>(registry, "Square");
  add_typed_kernels<sqrt_kernel, float, double>(registry, "Sqrt");
  add_typed_kernels<exp_kernel, float, double>(registry, "Exp");
  add_typed_kernels<log_kernel, float, double>(registry, "Log");
  add_typed_kernels<relu_kernel, float, double>(registry, "Relu");
  add_typed_kernels<sigmoid_kernel, float, double>(registry, "Sigmoid");
  add_typed_kernels<tanh_kernel, float, double>(registry, "Tanh");
  add_typed_kernels<logical_not_kernel, bool>(registry, "LogicalNot");
  add_typed_kernels<abs_kernel, float, double, std::int32_t, std::int64_t>(registry, "Abs");
  add_typed_kernels<sign_kernel, float, double, std::int32_t, std::int64_t>(registry, "Sign");
  add_typed_kernels<floor_kernel, float, double>(registry, "Floor");
  add_typed_kernels<ceil_kernel, float, double>(registry, "Ceil");
  add_typed_kernels<round_kernel, float, double>(registry, "Round");
  add_typed_kernels<sin_kernel, float, double>(registry, "Sin");
  add_typed_kernels<cos_kernel, float, double>(registry, "Cos");
  add_typed_kernels<log1p_kernel, float, double>(registry, "Log1p");
  add_typed_kernels<expm1_kernel, float, double>(registry, "Expm1");
  add_typed_kernels<is_nan_kernel, float, double>(registry, "IsNan");
  add_typed_kernels<is_inf_kernel, float, double>(registry, "IsInf");
  add_typed_kernels<is_finite_kernel, float, double>(registry, "IsFinite");
}

} // namespace actorflow

// Add, Sub, Mul, Div, Maximum, Minimum, Pow, FloorDiv, FloorMod, SquaredDifference, the
// comparisons (Equal, NotEqual, Less, LessEqual, Greater, GreaterEqual), LogicalAnd and
// LogicalOr, with numpy broadcasting.
#include "devices/cpu/kernels/kernel_util.hpp"
#include "devices/elementwise_math.hpp"

#include <type_traits>

namespace actorflow {

namespace {

using namespace cpu;

struct add_op {
  template <class T>
  using out_type = T;
  template <class A, class B>
  static auto apply(const A& a, const B& b) { return a + b; }
};
struct sub_op {
  template <class T>
  using out_type = T;
  template <class A, class B>
  static auto apply(const A& a, const B& b) { return a - b; }
};
struct mul_op {
  template <class T>
  using out_type = T;
  template <class A, class B>
  static auto apply(const A& a, const B& b) { return a * b; }
};
struct div_op {
  template <class T>
  using out_type = T;
  template <class A, class B>
  static auto apply(const A& a, const B& b) { return a / b; }
};
struct equal_op {
  template <class T>
  using out_type = bool;
  template <class A, class B>
  static auto apply(const A& a, const B& b) { return a == b; }
};
struct less_op {
  template <class T>
  using out_type = bool;
  template <class A, class B>
  static auto apply(const A& a, const B& b) { return a < b; }
};
struct less_equal_op {
  template <class T>
  using out_type = bool;
  template <class A, class B>
  static auto apply(const A& a, const B& b) { return a <= b; }
};
struct greater_op {
  template <class T>
  using out_type = bool;
  template <class A, class B>
  static auto apply(const A& a, const B& b) { return a > b; }
};
struct greater_equal_op {
  template <class T>
  using out_type = bool;
  template <class A, class B>
  static auto apply(const A& a, const B& b) { return a >= b; }
};
struct logical_and_op {
  template <class T>
  using out_type = bool;
  template <class A, class B>
  static auto apply(const A& a, const B& b) { return a && b; }
};
struct not_equal_op {
  template <class T>
  using out_type = bool;
  template <class A, class B>
  static auto apply(const A& a, const B& b) { return a != b; }
};
struct logical_or_op {
  template <class T>
  using out_type = bool;
  template <class A, class B>
  static auto apply(const A& a, const B& b) { return a || b; }
};
struct squared_difference_op {
  template <class T>
  using out_type = T;
  template <class A, class B>
  static auto apply(const A& a, const B& b) { return (a - b).square(); }
};
/// The ops with a scalar rule of their own (devices/elementwise_math.hpp, shared with the GPU):
/// Eigen applies it per element.
template <template <class> class Rule>
struct scalar_rule_op {
  template <class T>
  using out_type = T;
  template <class A, class B>
  static auto apply(const A& a, const B& b) {
    return a.binaryExpr(b, Rule<typename A::Scalar>{});
  }
  template <class T>
  static const char* refuse(const T* y, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i)
      if (const char* why = Rule<T>::refuse(y[i]))
        return why;
    return nullptr;
  }
};
using maximum_op = scalar_rule_op<maximum_rule>;
using minimum_op = scalar_rule_op<minimum_rule>;
using pow_op = scalar_rule_op<pow_rule>;
using floor_div_op = scalar_rule_op<floor_div_rule>;
using floor_mod_op = scalar_rule_op<floor_mod_rule>;

template <class Op, class T, class = void>
struct refuses_operands : std::false_type {};
template <class Op, class T>
struct refuses_operands<Op, T, std::void_t<decltype(Op::template refuse<T>(nullptr, 0))>>
  : std::true_type {};

/// out[0, n) = a op b where a and b either advance with the output (stride 1) or repeat one
/// element (stride 0); a repeated element becomes an Eigen constant so the loop vectorises.
template <class Op, class T, class Out>
void apply_run(Out* out, const T* a, bool a_advances, const T* b, bool b_advances,
               std::int64_t n) {
  auto o = view(out, n);
  auto size = static_cast<Eigen::Index>(n);
  if (a_advances && b_advances)
    o = Op::apply(view(a, n), view(b, n));
  else if (a_advances)
    o = Op::apply(view(a, n), array<T>::Constant(size, *b));
  else if (b_advances)
    o = Op::apply(array<T>::Constant(size, *a), view(b, n));
  else
    o = Op::apply(array<T>::Constant(size, *a), array<T>::Constant(size, *b));
}

template <class T, class Op>
class binary_kernel : public op_kernel {
public:
  using out_type = typename Op::template out_type<T>;
  using op_kernel::op_kernel;

  void compute(kernel_context& ctx) override {
    if (!check_inputs(ctx, 2, dtype_of<T>()))
      return;
    const tensor& a = ctx.input(0);
    const tensor& b = ctx.input(1);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    // An integer divisor of 0 or a negative integer power: refused before anything is computed.
    if constexpr (refuses_operands<Op, T>::value) {
      if (const char* why = Op::template refuse<T>(pb, b.num_elements())) {
        ctx.fail(make_error(errc::invalid_argument, ctx.def().op + " '" + ctx.def().name +
                                                      "': " + why));
        return;
      }
    }
    if (a.shape() == b.shape()) {
      tensor out = ctx.allocate_output(0, dtype_of<out_type>(), a.shape());
      auto* po = out.data<out_type>();
      for_blocks(ctx, a.num_elements(), [&](std::int64_t begin, std::int64_t end) {
        apply_run<Op>(po + begin, pa + begin, true, pb + begin, true, end - begin);
      });
      return;
    }
    auto plan = make_broadcast_plan(a.shape(), b.shape());
    if (!plan) {
      ctx.fail(plan.error());
      return;
    }
    tensor out = ctx.allocate_output(0, dtype_of<out_type>(), plan->out_shape);
    auto* po = out.data<out_type>();
    auto total = out.num_elements();
    if (total == 0)
      return;
    // Scalar against tensor: one flat run, split into blocks.
    if (b.num_elements() == 1 && a.num_elements() == total) {
      for_blocks(ctx, total, [&](std::int64_t begin, std::int64_t end) {
        apply_run<Op>(po + begin, pa + begin, true, pb, false, end - begin);
      });
      return;
    }
    if (a.num_elements() == 1 && b.num_elements() == total) {
      for_blocks(ctx, total, [&](std::int64_t begin, std::int64_t end) {
        apply_run<Op>(po + begin, pa, false, pb + begin, true, end - begin);
      });
      return;
    }
    // Everything else, bias rows [n] over [m,n] included, runs row by row: the plan has merged
    // dimensions so each row is one contiguous vectorised run.
    const auto& p = *plan;
    auto inner = p.inner();
    bool a_advances = p.a_strides.back() != 0;
    bool b_advances = p.b_strides.back() != 0;
    for_blocks(
      ctx, p.rows(),
      [&](std::int64_t row_begin, std::int64_t row_end) {
        for_each_broadcast_row(p, row_begin, row_end,
                               [&](std::int64_t o, std::int64_t ia, std::int64_t ib) {
                                 apply_run<Op>(po + o, pa + ia, a_advances, pb + ib, b_advances,
                                               inner);
                               });
      },
      inner);
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
using maximum_kernel = binary_kernel<T, maximum_op>;
template <class T>
using minimum_kernel = binary_kernel<T, minimum_op>;
template <class T>
using pow_kernel = binary_kernel<T, pow_op>;
template <class T>
using floor_div_kernel = binary_kernel<T, floor_div_op>;
template <class T>
using floor_mod_kernel = binary_kernel<T, floor_mod_op>;

} // namespace

void register_binary_kernels(kernel_registry& registry) {
  add_typed_kernels<add_kernel, float, double, std::int32_t, std::int64_t>(registry, "Add");
  add_typed_kernels<sub_kernel, float, double, std::int32_t, std::int64_t>(registry, "Sub");
  add_typed_kernels<mul_kernel, float, double, std::int32_t, std::int64_t>(registry, "Mul");
  add_typed_kernels<div_kernel, float, double>(registry, "Div");
  add_typed_kernels<equal_kernel, float, double, std::int32_t, std::int64_t, bool>(registry,
                                                                                   "Equal");
  add_typed_kernels<less_kernel, float, double, std::int32_t, std::int64_t>(registry, "Less");
  add_typed_kernels<less_equal_kernel, float, double, std::int32_t, std::int64_t>(registry,
                                                                                  "LessEqual");
  add_typed_kernels<greater_kernel, float, double, std::int32_t, std::int64_t>(registry, "Greater");
  add_typed_kernels<greater_equal_kernel, float, double, std::int32_t, std::int64_t>(
    registry, "GreaterEqual");
  add_typed_kernels<logical_and_kernel, bool>(registry, "LogicalAnd");
  add_typed_kernels<not_equal_kernel, float, double, std::int32_t, std::int64_t, bool>(registry,
                                                                                       "NotEqual");
  add_typed_kernels<logical_or_kernel, bool>(registry, "LogicalOr");
  add_typed_kernels<squared_difference_kernel, float, double, std::int32_t, std::int64_t>(
    registry, "SquaredDifference");
  add_typed_kernels<maximum_kernel, float, double, std::int32_t, std::int64_t>(registry, "Maximum");
  add_typed_kernels<minimum_kernel, float, double, std::int32_t, std::int64_t>(registry, "Minimum");
  add_typed_kernels<pow_kernel, float, double, std::int32_t, std::int64_t>(registry, "Pow");
  add_typed_kernels<floor_div_kernel, float, double, std::int32_t, std::int64_t>(registry,
                                                                                 "FloorDiv");
  add_typed_kernels<floor_mod_kernel, float, double, std::int32_t, std::int64_t>(registry,
                                                                                 "FloorMod");
}

} // namespace actorflow

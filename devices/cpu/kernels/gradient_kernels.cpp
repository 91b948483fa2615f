// Kernels of the ops only gradients build (graph/gradient_ops.cpp lists them): AddN, ReluGrad,
// SigmoidGrad, TanhGrad, SumToShapeOf, BroadcastToShapeOf, ReshapeLike, OnesLike, ZerosLike.
// The shape-of ops read the second input's run-time shape only, never its values.
#include "devices/cpu/kernels/kernel_util.hpp"

namespace actorflow {

namespace {

using namespace cpu;

status shape_error(const node& n, const std::string& what) {
  return make_error(errc::invalid_argument, n.op + ": " + what);
}

// --- AddN --------------------------------------------------------------------------------------

template <class T>
class add_n_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;

  void compute(kernel_context& ctx) override {
    if (ctx.num_inputs() == 0) {
      ctx.fail(shape_error(ctx.def(), "needs at least one input"));
      return;
    }
    if (!check_inputs(ctx, ctx.num_inputs(), dtype_of<T>()))
      return;
    const auto& shape = ctx.input(0).shape();
    for (int i = 1; i < ctx.num_inputs(); ++i)
      if (ctx.input(i).shape() != shape) {
        ctx.fail(shape_error(ctx.def(), "inputs have different shapes: " + shape.to_string() +
                                          " and " + ctx.input(i).shape().to_string()));
        return;
      }
    if (ctx.num_inputs() == 1) {
      ctx.set_output(0, ctx.input(0));
      return;
    }
    tensor out = ctx.allocate_output(0, dtype_of<T>(), shape);
    T* po = out.data<T>();
    for_blocks(
      ctx, out.num_elements(),
      [&](std::int64_t begin, std::int64_t end) {
        auto o = view(po + begin, end - begin);
        o = const_view<T>(ctx.input(0), begin, end) + const_view<T>(ctx.input(1), begin, end);
        for (int i = 2; i < ctx.num_inputs(); ++i)
          o += const_view<T>(ctx.input(i), begin, end);
      },
      ctx.num_inputs());
  }
};

// --- elementwise backward of activations -------------------------------------------------------

struct relu_grad_op {
  // Inputs (dy, y): the gradient passes where the activation was positive.
  template <class A, class B>
  static auto apply(const A& dy, const B& y) {
    using T = typename A::Scalar;
    // A multiply by the 0/1 mask vectorises; select() compiles to a mispredicted branch per
    // element, which made this the second most expensive op of an MLP step.
    return dy * (y > T(0)).template cast<T>();
  }
};
struct sigmoid_grad_op {
  // Inputs (y, dy).
  template <class A, class B>
  static auto apply(const A& y, const B& dy) {
    using T = typename A::Scalar;
    return dy * y * (T(1) - y);
  }
};
struct tanh_grad_op {
  // Inputs (y, dy).
  template <class A, class B>
  static auto apply(const A& y, const B& dy) {
    using T = typename A::Scalar;
    return dy * (T(1) - y * y);
  }
};

template <class T, class Op>
class activation_grad_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;

  void compute(kernel_context& ctx) override {
    if (!check_inputs(ctx, 2, dtype_of<T>()))
      return;
    const tensor& a = ctx.input(0);
    const tensor& b = ctx.input(1);
    if (a.shape() != b.shape()) {
      ctx.fail(shape_error(ctx.def(), "inputs have different shapes: " + a.shape().to_string() +
                                        " and " + b.shape().to_string()));
      return;
    }
    tensor out = ctx.allocate_output(0, dtype_of<T>(), a.shape());
    T* po = out.data<T>();
    for_blocks(ctx, a.num_elements(), [&](std::int64_t begin, std::int64_t end) {
      view(po + begin, end - begin) =
        Op::apply(const_view<T>(a, begin, end), const_view<T>(b, begin, end));
    });
  }
};

template <class T>
using relu_grad_kernel = activation_grad_kernel<T, relu_grad_op>;
template <class T>
using sigmoid_grad_kernel = activation_grad_kernel<T, sigmoid_grad_op>;
template <class T>
using tanh_grad_kernel = activation_grad_kernel<T, tanh_grad_op>;

// --- SumToShapeOf ------------------------------------------------------------------------------

/// A run of output-aligned dimensions that are either all summed away or all kept.
struct dim_group {
  std::int64_t size;
  bool reduced;
};

/// Sums `grad` (shape G) down to `target` (shape X, broadcastable to G): numpy broadcasting run
/// backwards. Leading dimensions G has beyond X's rank, and dimensions where X has 1 and G not,
/// are summed.
template <class T>
class sum_to_shape_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;

  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, dtype_of<T>()))
      return;
    const tensor& grad = ctx.input(0);
    const tensor_shape& g = grad.shape();
    const tensor_shape& x = ctx.input(1).shape();
    if (g == x) {
      ctx.set_output(0, grad);
      return;
    }
    auto mismatch = [&] {
      ctx.fail(shape_error(ctx.def(), "cannot sum a gradient of shape " + g.to_string() +
                                        " down to shape " + x.to_string()));
    };
    if (x.rank() > g.rank()) {
      mismatch();
      return;
    }
    auto lead = g.rank() - x.rank();
    std::vector<dim_group> groups;
    for (int i = 0; i < g.rank(); ++i) {
      auto gd = g.dim(i);
      auto xd = i < lead ? 1 : x.dim(i - lead);
      if (xd != gd && xd != 1) {
        mismatch();
        return;
      }
      if (gd == 1)
        continue;
      bool reduced = xd == 1;
      if (!groups.empty() && groups.back().reduced == reduced)
        groups.back().size *= gd;
      else
        groups.push_back({gd, reduced});
    }
    tensor out = ctx.allocate_output(0, dtype_of<T>(), x);
    T* po = out.data<T>();
    auto out_count = out.num_elements();
    view(po, out_count).setZero();
    if (grad.num_elements() == 0 || out_count == 0)
      return;
    const T* pg = grad.data<T>();
    if (groups.empty()) {
      *po = *pg;
      return;
    }
    // Odometer over the outer groups; the innermost group is one contiguous row, either added
    // to an output row (kept) or summed into one output element (reduced).
    auto outer = groups.size() - 1;
    std::vector<std::int64_t> out_strides(groups.size(), 0);
    std::int64_t stride = 1;
    for (std::size_t i = groups.size(); i-- > 0;)
      if (!groups[i].reduced) {
        out_strides[i] = stride;
        stride *= groups[i].size;
      }
    auto inner = groups.back().size;
    bool inner_reduced = groups.back().reduced;
    std::int64_t rows = grad.num_elements() / inner;
    std::vector<std::int64_t> index(outer, 0);
    std::int64_t o = 0;
    for (std::int64_t row = 0; row < rows; ++row) {
      const T* in_row = pg + row * inner;
      if (inner_reduced)
        po[o] += view(in_row, inner).sum();
      else
        view(po + o, inner) += view(in_row, inner);
      for (std::size_t d = outer; d-- > 0;) {
        o += out_strides[d];
        if (++index[d] < groups[d].size)
          break;
        o -= index[d] * out_strides[d];
        index[d] = 0;
      }
    }
  }
};

// --- BroadcastToShapeOf ------------------------------------------------------------------------

/// dy, the result of reducing x over `axes` (with or without keep_dims), repeated along the
/// reduced axes to x's run-time shape.
template <class T>
class broadcast_to_shape_kernel : public op_kernel {
public:
  explicit broadcast_to_shape_kernel(const node& n)
    : op_kernel(n), axes_(n.attr_or<std::vector<std::int64_t>>("axes", {})),
      divide_by_count_(n.attr_or<bool>("divide_by_count", false)) {}

  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, dtype_of<T>()))
      return;
    const tensor& dy = ctx.input(0);
    const tensor_shape& x = ctx.input(1).shape();
    auto rank = x.rank();
    auto reduced_or_error = reduced_dimensions(axes_, rank);
    if (!reduced_or_error) {
      ctx.fail(reduced_or_error.error());
      return;
    }
    auto& reduced = *reduced_or_error;
    std::vector<std::int64_t> kept_dims;
    for (int i = 0; i < rank; ++i)
      kept_dims.push_back(reduced[static_cast<std::size_t>(i)] ? 1 : x.dim(i));
    tensor_shape kept{kept_dims};
    if (dy.num_elements() != kept.num_elements()) {
      ctx.fail(shape_error(ctx.def(), "a reduced gradient of shape " + dy.shape().to_string() +
                                        " does not match shape " + x.to_string() +
                                        " reduced to " + kept.to_string()));
      return;
    }
    tensor out = ctx.allocate_output(0, dtype_of<T>(), x);
    auto total = out.num_elements();
    if (total == 0)
      return;
    T scale = T(1);
    if (divide_by_count_)
      scale = T(1) / static_cast<T>(total / std::max<std::int64_t>(1, kept.num_elements()));
    T* po = out.data<T>();
    const T* pd = dy.data<T>();
    auto plan = make_broadcast_plan(kept, x);
    if (!plan) {
      ctx.fail(plan.error());
      return;
    }
    const auto& p = *plan;
    auto inner = p.inner();
    bool advances = p.a_strides.back() != 0;
    for_blocks(
      ctx, p.rows(),
      [&](std::int64_t row_begin, std::int64_t row_end) {
        for_each_broadcast_row(p, row_begin, row_end,
                               [&](std::int64_t o, std::int64_t ia, std::int64_t) {
                                 auto row = view(po + o, inner);
                                 if (advances)
                                   row = view(pd + ia, inner) * scale;
                                 else
                                   row.setConstant(pd[ia] * scale);
                               });
      },
      inner);
  }

private:
  std::vector<std::int64_t> axes_;
  bool divide_by_count_;
};

// --- ReshapeLike, OnesLike, ZerosLike ----------------------------------------------------------

class reshape_like_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;

  void compute(kernel_context& ctx) override {
    const tensor& dy = ctx.input(0);
    auto reshaped = dy.reshaped(ctx.input(1).shape());
    if (!reshaped) {
      ctx.fail(shape_error(ctx.def(), "cannot reshape " + dy.shape().to_string() + " to " +
                                        ctx.input(1).shape().to_string()));
      return;
    }
    ctx.set_output(0, std::move(*reshaped));
  }
};

template <class T, int value>
class constant_like_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;

  void compute(kernel_context& ctx) override {
    tensor out = ctx.allocate_output(0, dtype_of<T>(), ctx.input(0).shape());
    T* po = out.data<T>();
    for_blocks(ctx, out.num_elements(), [&](std::int64_t begin, std::int64_t end) {
      view(po + begin, end - begin).setConstant(T(value));
    });
  }
};

template <class T>
using ones_like_kernel = constant_like_kernel<T, 1>;
template <class T>
using zeros_like_kernel = constant_like_kernel<T, 0>;

} // namespace

void register_gradient_kernels(kernel_registry& registry) {
  add_typed_kernels<add_n_kernel, float, double, std::int32_t, std::int64_t>(registry, "AddN");
  add_typed_kernels<relu_grad_kernel, float, double>(registry, "ReluGrad");
  add_typed_kernels<sigmoid_grad_kernel, float, double>(registry, "SigmoidGrad");
  add_typed_kernels<tanh_grad_kernel, float, double>(registry, "TanhGrad");
  add_typed_kernels<sum_to_shape_kernel, float, double, std::int32_t, std::int64_t>(registry,
                                                                                    "SumToShapeOf");
  add_typed_kernels<broadcast_to_shape_kernel, float, double, std::int32_t, std::int64_t>(
    registry, "BroadcastToShapeOf");
  registry.add("ReshapeLike", "CPU", all_dtypes(), &make_kernel<reshape_like_kernel>);
  add_typed_kernels<ones_like_kernel, float, double, std::int32_t, std::int64_t>(registry, "OnesLike");
  add_typed_kernels<zeros_like_kernel, float, double, std::int32_t, std::int64_t>(registry,
                                                                                  "ZerosLike");
}

} // namespace actorflow

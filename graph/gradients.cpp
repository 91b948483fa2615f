// Symbolic reverse-mode differentiation: the graph walk (gradients()) and the gradient function
// of every differentiable standard op (gradient_registry). Helper ops the gradient functions
// build (SumToShapeOf, BroadcastToShapeOf, ReluGrad, ...) are defined in graph/gradient_ops.cpp.
#include "graph/gradients.hpp"
#include "graph/math_ops.hpp"
#include "graph/sampled_losses.hpp"
#include "graph/shape_ops.hpp"
#include "graph/strided_slice.hpp"
#include "graph/sparse_ops.hpp"

#include "graph/control_flow.hpp"
#include "graph/op_registry.hpp"
#include "graph/ops.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <queue>
#include <utility>

namespace actorflow {

output input_of(graph& g, const node& op, int i) {
  auto& e = op.inputs[static_cast<std::size_t>(i)];
  return g.output_of(e.node_id, e.index);
}

namespace {

// --- building blocks for gradient functions --------------------------------------------------

/// Output `i` of the forward node.
output output_of(graph& g, const node& op, int i = 0) { return g.output_of(op.id, i); }

/// ops::make named after the op unless `name` is given.
output make(graph& g, const std::string& op, std::vector<output> inputs,
            std::map<std::string, attr_value> attrs = {}, const std::string& name = "") {
  return ops::make(g, op, name.empty() ? op : name, std::move(inputs), std::move(attrs));
}

output scalar(graph& g, const output& like, double value, const std::string& name = "Const") {
  return ops::scalar_like(g, like.type(), value, name);
}

bool same_static_shape(const tensor_shape& a, const tensor_shape& b) {
  return a.fully_defined() && b.fully_defined() && a == b;
}

/// `grad` (the gradient of a broadcast result) summed down to x's shape; nothing is added when
/// both static shapes are fully defined and equal.
output sum_to_shape_of(graph& g, output grad, const output& x) {
  if (same_static_shape(grad.shape(), x.shape()))
    return grad;
  return make(g, "SumToShapeOf", {grad, x});
}

/// The reduction attributes of a Sum/Mean/Max node.
std::vector<std::int64_t> axes_of(const node& op) {
  return op.attr_or<std::vector<std::int64_t>>("axes", {});
}
bool keep_dims_of(const node& op) { return op.attr_or<bool>("keep_dims", false); }

/// dy (the result of reducing x like `op` does) repeated back to x's run-time shape.
output broadcast_to_shape_of(graph& g, const node& op, output dy, const output& x,
                             bool divide_by_count = false) {
  std::map<std::string, attr_value> attrs{{"axes", axes_of(op)}, {"keep_dims", keep_dims_of(op)}};
  if (divide_by_count)
    attrs["divide_by_count"] = true;
  return make(g, "BroadcastToShapeOf", {dy, x}, std::move(attrs));
}

/// The number of elements `op` reduces into each output, when x's static shape tells it.
std::optional<std::int64_t> static_reduced_count(const node& op, const tensor_shape& x) {
  if (!x.rank_known())
    return std::nullopt;
  auto axes = axes_of(op);
  std::vector<bool> reduced(static_cast<std::size_t>(x.rank()), axes.empty());
  for (auto a : axes) {
    auto axis = a < 0 ? a + x.rank() : a;
    if (axis < 0 || axis >= x.rank())
      return std::nullopt;
    reduced[static_cast<std::size_t>(axis)] = true;
  }
  std::int64_t count = 1;
  for (int i = 0; i < x.rank(); ++i) {
    if (!reduced[static_cast<std::size_t>(i)])
      continue;
    if (x.dim(i) < 0)
      return std::nullopt;
    count *= x.dim(i);
  }
  return count;
}

// --- gradient functions ----------------------------------------------------------------------
// Each receives the forward node and the gradients of its outputs and fills the gradients of
// its inputs. Formulas follow TensorFlow's math_grad.py / nn_grad.py / array_grad.py.

using grads = std::vector<output>;

status identity_grad(graph&, const node&, const grads& dy, grads& dx) {
  dx[0] = dy[0];
  return {};
}

status neg_grad(graph&, const node&, const grads& dy, grads& dx) {
  dx[0] = ops::neg(dy[0], "Neg");
  return {};
}

status square_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  auto x = input_of(g, op, 0);
  dx[0] = ops::mul(dy[0], ops::mul(x, scalar(g, x, 2.0), "Mul"), "Mul");
  return {};
}

status sqrt_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  auto y = output_of(g, op);
  // d sqrt(x) = 0.5 / sqrt(x)
  dx[0] = ops::div(ops::mul(dy[0], scalar(g, y, 0.5), "Mul"), y, "RealDiv");
  return {};
}

status exp_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  dx[0] = ops::mul(dy[0], output_of(g, op), "Mul");
  return {};
}

status log_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  dx[0] = ops::div(dy[0], input_of(g, op, 0), "RealDiv");
  return {};
}

status relu_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  dx[0] = make(g, "ReluGrad", {dy[0], output_of(g, op)});
  return {};
}

status sigmoid_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  dx[0] = make(g, "SigmoidGrad", {output_of(g, op), dy[0]});
  return {};
}

status tanh_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  dx[0] = make(g, "TanhGrad", {output_of(g, op), dy[0]});
  return {};
}

status add_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  dx[0] = sum_to_shape_of(g, dy[0], input_of(g, op, 0));
  dx[1] = sum_to_shape_of(g, dy[0], input_of(g, op, 1));
  return {};
}

status sub_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  dx[0] = sum_to_shape_of(g, dy[0], input_of(g, op, 0));
  dx[1] = sum_to_shape_of(g, ops::neg(dy[0], "Neg"), input_of(g, op, 1));
  return {};
}

status mul_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  auto x = input_of(g, op, 0);
  auto y = input_of(g, op, 1);
  dx[0] = sum_to_shape_of(g, ops::mul(dy[0], y, "Mul"), x);
  dx[1] = sum_to_shape_of(g, ops::mul(x, dy[0], "Mul"), y);
  return {};
}

status div_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  auto x = input_of(g, op, 0);
  auto y = input_of(g, op, 1);
  dx[0] = sum_to_shape_of(g, ops::div(dy[0], y, "RealDiv"), x);
  // d(x/y)/dy = -x / y^2, written as (x / y) / y like TensorFlow.
  auto x_over_y2 = ops::div(ops::div(x, y, "RealDiv"), y, "RealDiv");
  dx[1] = sum_to_shape_of(g, ops::mul(ops::neg(dy[0], "Neg"), x_over_y2, "Mul"), y);
  return {};
}

status matmul_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  auto a = input_of(g, op, 0);
  auto b = input_of(g, op, 1);
  auto d = dy[0];
  bool ta = op.attr_or<bool>("transpose_a", false);
  bool tb = op.attr_or<bool>("transpose_b", false);
  if (!ta && !tb) { // c = a b
    dx[0] = ops::matmul(d, b, false, true);
    dx[1] = ops::matmul(a, d, true, false);
  } else if (!ta && tb) { // c = a b^T
    dx[0] = ops::matmul(d, b, false, false);
    dx[1] = ops::matmul(d, a, true, false);
  } else if (ta && !tb) { // c = a^T b
    dx[0] = ops::matmul(b, d, false, true);
    dx[1] = ops::matmul(a, d, false, false);
  } else { // c = a^T b^T
    dx[0] = ops::matmul(b, d, true, true);
    dx[1] = ops::matmul(d, a, true, true);
  }
  return {};
}

status sum_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  dx[0] = broadcast_to_shape_of(g, op, dy[0], input_of(g, op, 0));
  return {};
}

status mean_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  auto x = input_of(g, op, 0);
  if (auto count = static_reduced_count(op, x.shape()); count && *count > 0) {
    auto spread = broadcast_to_shape_of(g, op, dy[0], x);
    dx[0] = ops::div(spread, scalar(g, spread, static_cast<double>(*count), "count"), "RealDiv");
  } else {
    dx[0] = broadcast_to_shape_of(g, op, dy[0], x, true);
  }
  return {};
}

/// Max's and Min's: the gradient goes to the positions equal to the extremum, split evenly
/// between ties.
status extremum_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  auto x = input_of(g, op, 0);
  auto y = output_of(g, op);
  auto y_spread = broadcast_to_shape_of(g, op, y, x);
  auto mask = ops::cast(ops::equal(x, y_spread, "Equal"), x.type(), "Cast");
  auto ties = ops::reduce_sum(mask, axes_of(op), keep_dims_of(op), "Sum");
  dx[0] = ops::mul(broadcast_to_shape_of(g, op, ops::div(dy[0], ties, "RealDiv"), x), mask, "Mul");
  return {};
}

status prod_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  dx[0] = make(g, "ProdGrad", {input_of(g, op, 0), dy[0]},
               {{"axes", axes_of(op)}, {"keep_dims", keep_dims_of(op)}});
  return {};
}

/// dy where `condition` holds to input `then` of op, the rest to input `otherwise`, each
/// summed to its input's shape: the gradient of a select, and of Maximum's and Minimum's
/// choice.
void split_by_condition(graph& g, const node& op, const output& condition, const output& dy,
                        int then, int otherwise, grads& dx) {
  auto zero = scalar(g, dy, 0.0, "zeros");
  dx[static_cast<std::size_t>(then)] =
    sum_to_shape_of(g, ops::select(condition, dy, zero, "SelectV2"), input_of(g, op, then));
  dx[static_cast<std::size_t>(otherwise)] = sum_to_shape_of(
    g, ops::select(condition, zero, dy, "SelectV2_1"), input_of(g, op, otherwise));
}

status maximum_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  auto x_wins = ops::greater_equal(input_of(g, op, 0), input_of(g, op, 1));
  split_by_condition(g, op, x_wins, dy[0], 0, 1, dx);
  return {};
}

status minimum_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  auto x_wins = ops::less_equal(input_of(g, op, 0), input_of(g, op, 1));
  split_by_condition(g, op, x_wins, dy[0], 0, 1, dx);
  return {};
}

status pow_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  auto x = input_of(g, op, 0);
  auto y = input_of(g, op, 1);
  auto z = output_of(g, op);
  // dz/dx = y x^(y-1); dz/dy = z log(x), taken as 0 where x <= 0 (TensorFlow's rule for reals).
  auto x_to_y_minus_1 = ops::pow(x, ops::sub(y, scalar(g, y, 1.0), "sub"), "Pow");
  dx[0] = sum_to_shape_of(g, ops::mul(dy[0], ops::mul(y, x_to_y_minus_1, "mul"), "mul_1"), x);
  auto positive = ops::greater(x, scalar(g, x, 0.0, "zeros"), "Greater");
  auto safe_x = ops::select(positive, x, scalar(g, x, 1.0, "ones"), "SelectV2");
  auto log_x = ops::select(positive, ops::log(safe_x, "Log"), scalar(g, x, 0.0, "zeros_1"),
                           "SelectV2_1");
  dx[1] = sum_to_shape_of(g, ops::mul(dy[0], ops::mul(z, log_x, "mul_2"), "mul_3"), y);
  return {};
}

status floor_mod_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  // x mod y = x - floor(x / y) y
  auto x = input_of(g, op, 0);
  auto y = input_of(g, op, 1);
  dx[0] = sum_to_shape_of(g, dy[0], x);
  auto quotient = ops::floor_div(x, y, "FloorDiv");
  dx[1] = sum_to_shape_of(g, ops::mul(dy[0], ops::neg(quotient, "Neg"), "mul"), y);
  return {};
}

status squared_difference_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  auto x = input_of(g, op, 0);
  auto y = input_of(g, op, 1);
  auto d = ops::mul(ops::mul(dy[0], scalar(g, x, 2.0), "mul"), ops::sub(x, y, "sub"), "mul_1");
  dx[0] = sum_to_shape_of(g, d, x);
  dx[1] = sum_to_shape_of(g, ops::neg(d, "Neg"), y);
  return {};
}

status abs_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  dx[0] = ops::mul(dy[0], ops::sign(input_of(g, op, 0), "Sign"), "mul");
  return {};
}

status cumsum_grad(graph&, const node& op, const grads& dy, grads& dx) {
  // Each input adds to the sums after it (before it, reversed): the reverse cumsum of dy.
  dx[0] = ops::cumsum(dy[0], op.attr_or<std::int64_t>("axis", 0), op.attr_or<bool>("exclusive", false),
                      !op.attr_or<bool>("reverse", false), "Cumsum");
  return {};
}

status sin_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  dx[0] = ops::mul(dy[0], ops::cos(input_of(g, op, 0), "Cos"), "mul");
  return {};
}

status cos_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  dx[0] = ops::neg(ops::mul(dy[0], ops::sin(input_of(g, op, 0), "Sin"), "mul"), "Neg");
  return {};
}

status log1p_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  auto x = input_of(g, op, 0);
  dx[0] = ops::div(dy[0], ops::add(x, scalar(g, x, 1.0), "add"), "truediv");
  return {};
}

status expm1_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  dx[0] = ops::mul(dy[0], ops::exp(input_of(g, op, 0), "Exp"), "mul");
  return {};
}

status sign_grad(graph& g, const node& op, const grads&, grads& dx) {
  dx[0] = make(g, "ZerosLike", {input_of(g, op, 0)});
  return {};
}

status select_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  split_by_condition(g, op, input_of(g, op, 0), dy[0], 1, 2, dx);
  return {};
}

status reshape_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  auto x = input_of(g, op, 0);
  if (x.shape().fully_defined())
    dx[0] = ops::reshape(dy[0], x.shape().dims(), "Reshape");
  else
    dx[0] = make(g, "ReshapeLike", {dy[0], x});
  return {};
}

status concat_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  // Each input gets its slice of dy; the offsets come from the inputs' run-time shapes, so
  // unknown dimensions are fine.
  std::vector<output> inputs{dy[0]};
  for (std::size_t i = 0; i < op.inputs.size(); ++i)
    inputs.push_back(input_of(g, op, static_cast<int>(i)));
  auto split = make(g, "SplitToShapesOf", std::move(inputs),
                    {{"axis", op.attr_or<std::int64_t>("axis", 0)}});
  for (std::size_t i = 0; i < op.inputs.size(); ++i)
    dx[i] = g.output_of(split.node_id, static_cast<int>(i));
  return {};
}

status softmax_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  // dx = (dy - sum(dy * y, -1, keep_dims)) * y
  auto y = output_of(g, op);
  auto dot = ops::reduce_sum(ops::mul(dy[0], y, "mul"), {-1}, true, "Sum");
  dx[0] = ops::mul(ops::sub(dy[0], dot, "sub"), y, "mul_1");
  return {};
}

status xent_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  auto logits = input_of(g, op, 0);
  output d_logits, d_labels;
  if (dy[0].valid()) {
    // The loss gradient per example, as a column: [batch, 1].
    auto column = ops::reshape(dy[0], {-1, 1}, "ExpandDims");
    d_logits = ops::mul(column, output_of(g, op, 1), "mul");
    // d loss / d labels = -log_softmax(logits), from max-shifted logits for stability.
    auto shifted = ops::sub(logits, ops::reduce_max(logits, {-1}, true, "Max"), "sub");
    auto log_sum = ops::log(ops::reduce_sum(ops::exp(shifted, "Exp"), {-1}, true, "Sum"), "Log");
    auto log_softmax = ops::sub(shifted, log_sum, "LogSoftmax");
    d_labels = ops::mul(ops::neg(column, "Neg"), log_softmax, "mul_1");
  }
  if (dy[1].valid()) {
    // Second-order use: backprop = softmax(logits) - labels.
    auto s = ops::softmax(logits, "Softmax");
    auto dot = ops::reduce_sum(ops::mul(dy[1], s, "mul_2"), {-1}, true, "Sum_1");
    auto through_softmax = ops::mul(ops::sub(dy[1], dot, "sub_1"), s, "mul_3");
    d_logits = d_logits.valid() ? ops::add(d_logits, through_softmax, "add") : through_softmax;
    auto minus = ops::neg(dy[1], "Neg_1");
    d_labels = d_labels.valid() ? ops::add(d_labels, minus, "add_1") : minus;
  }
  dx[0] = d_logits;
  dx[1] = d_labels;
  return {};
}

/// The attributes a convolution's or pool's gradient op repeats from the op.
std::map<std::string, attr_value> window_attrs(const node& op) {
  std::map<std::string, attr_value> attrs;
  for (auto* name : {"ksize", "strides", "padding"})
    if (auto i = op.attrs.find(name); i != op.attrs.end())
      attrs.emplace(name, i->second);
  return attrs;
}

status conv2d_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  auto x = input_of(g, op, 0);
  auto filter = input_of(g, op, 1);
  dx[0] = make(g, "Conv2DBackpropInput", {x, filter, dy[0]}, window_attrs(op));
  dx[1] = make(g, "Conv2DBackpropFilter", {x, filter, dy[0]}, window_attrs(op));
  return {};
}

status max_pool_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  dx[0] = make(g, "MaxPoolGrad", {input_of(g, op, 0), output_of(g, op), dy[0]}, window_attrs(op));
  return {};
}

status avg_pool_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  dx[0] = make(g, "AvgPoolGrad", {input_of(g, op, 0), dy[0]}, window_attrs(op));
  return {};
}

status cast_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  auto from = input_of(g, op, 0).type();
  auto to = op.attr_or<dtype>("dtype", output_of(g, op).type());
  // Only float-to-float casts are differentiable; anything else stops the gradient.
  if (is_floating(from) && is_floating(to))
    dx[0] = from == to ? dy[0] : ops::cast(dy[0], from, "Cast");
  return {};
}

status fill_grad(graph&, const node&, const grads& dy, grads& dx) {
  dx[0] = ops::reduce_sum(dy[0], {}, false, "Sum");
  return {};
}

// Gradients of the helper ops, so that gradients of gradients work.

status add_n_grad(graph&, const node& op, const grads& dy, grads& dx) {
  for (std::size_t i = 0; i < op.inputs.size(); ++i)
    dx[i] = dy[0];
  return {};
}

status sum_to_shape_of_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  // Broadcasting undone is broadcasting again: dy + zeros of the original gradient's shape.
  auto grad = input_of(g, op, 0);
  dx[0] = ops::add(dy[0], make(g, "ZerosLike", {grad}), "add");
  return {};
}

status broadcast_to_shape_of_grad(graph&, const node& op, const grads& dy, grads& dx) {
  auto reduce = op.attr_or<bool>("divide_by_count", false) ? ops::reduce_mean : ops::reduce_sum;
  dx[0] = reduce(dy[0], axes_of(op), keep_dims_of(op), "Sum");
  return {};
}

status reshape_like_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  dx[0] = make(g, "ReshapeLike", {dy[0], input_of(g, op, 0)});
  return {};
}

status split_to_shapes_of_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  // Splitting undone is concatenating; a slice nothing flows into contributes zeros. The shape
  // inputs get no gradient.
  std::vector<output> slices;
  for (std::size_t i = 0; i + 1 < op.inputs.size(); ++i)
    slices.push_back(dy[i].valid() ? dy[i]
                                   : make(g, "ZerosLike", {output_of(g, op, static_cast<int>(i))}));
  dx[0] = ops::concat(slices, op.attr_or<std::int64_t>("axis", 0), "concat");
  return {};
}

status relu_grad_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  dx[0] = make(g, "ReluGrad", {dy[0], input_of(g, op, 1)});
  return {};
}

status sigmoid_grad_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  // f(y, d) = d y (1 - y): df/dy = d (1 - 2y), df/dd = y (1 - y).
  auto y = input_of(g, op, 0);
  auto d = input_of(g, op, 1);
  auto one_minus_2y = ops::sub(scalar(g, y, 1.0), ops::mul(y, scalar(g, y, 2.0), "mul"), "sub");
  dx[0] = ops::mul(ops::mul(dy[0], d, "mul_1"), one_minus_2y, "mul_2");
  dx[1] = make(g, "SigmoidGrad", {y, dy[0]});
  return {};
}

status tanh_grad_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  // f(y, d) = d (1 - y^2): df/dy = -2 d y, df/dd = 1 - y^2.
  auto y = input_of(g, op, 0);
  auto d = input_of(g, op, 1);
  dx[0] = ops::mul(ops::mul(dy[0], d, "mul"), ops::mul(y, scalar(g, y, -2.0), "mul_1"), "mul_2");
  dx[1] = make(g, "TanhGrad", {y, dy[0]});
  return {};
}

// --- control flow (graph/control_flow.hpp) ---------------------------------------------------
// A cond's gradient runs the same branch backwards: a Merge's gradient is switched into the
// branch each input came from, a Switch's gradients merge again. A while loop's gradient is a
// backward loop, built for the loop as a whole by the walk below (while_gradient).

status switch_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  if (!dy[0].valid() && !dy[1].valid())
    return {};
  // Zeros switched like the value are dead on the untaken side, so the Merge takes the live
  // branch's gradient, or zeros when that branch has none. (Made from the Switch's inputs,
  // which a backward loop pops in every iteration, not from the branch's output.)
  std::vector<output> branches(2);
  for (int k = 0; k < 2; ++k) {
    if (dy[static_cast<std::size_t>(k)].valid()) {
      branches[static_cast<std::size_t>(k)] = dy[static_cast<std::size_t>(k)];
      continue;
    }
    auto zeros = make(g, "ZerosLike", {input_of(g, op, 0)});
    auto switched = ops::switch_(zeros, input_of(g, op, 1), "zeros_switch");
    branches[static_cast<std::size_t>(k)] = k == 1 ? switched.second : switched.first;
  }
  dx[0] = ops::merge(branches, "cond_grad").first;
  return {};
}

status merge_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    auto* branch = dynamic_cast<cond_context*>(g.context_of(op.inputs[i].node_id));
    if (branch == nullptr)
      return make_error(errc::unimplemented, "Merge '" + op.name + "' is not a cond's: input " +
                                               std::to_string(i) + " comes from no cond branch");
    // Inside a backward loop the branch is its gradient copy there.
    auto* backward = enclosing_while(g.current_context());
    if (backward != nullptr && backward->forward() != nullptr && branch->is_within(backward->forward()))
      branch = branch->gradient_branch(*backward);
    // The gradient, switched into the branch: live only when the branch was taken.
    dx[i] = g.bring_into(branch, dy[0]);
  }
  return {};
}

void register_standard_gradients(gradient_registry& r) {
  r.add("Switch", switch_grad);
  r.add("Merge", merge_grad);
  r.add("Identity", identity_grad);
  r.add("Neg", neg_grad);
  r.add("Square", square_grad);
  r.add("Sqrt", sqrt_grad);
  r.add("Exp", exp_grad);
  r.add("Log", log_grad);
  r.add("Relu", relu_grad);
  r.add("Sigmoid", sigmoid_grad);
  r.add("Tanh", tanh_grad);
  r.add("Add", add_grad);
  r.add("Sub", sub_grad);
  r.add("Mul", mul_grad);
  r.add("Div", div_grad);
  r.add("MatMul", matmul_grad);
  r.add("Sum", sum_grad);
  r.add("Mean", mean_grad);
  r.add("Max", extremum_grad);
  r.add("Min", extremum_grad);
  r.add("Prod", prod_grad);
  r.add("Maximum", maximum_grad);
  r.add("Minimum", minimum_grad);
  r.add("Pow", pow_grad);
  r.add("FloorMod", floor_mod_grad);
  r.add("SquaredDifference", squared_difference_grad);
  r.add("Abs", abs_grad);
  r.add("Sign", sign_grad);
  r.add("Sin", sin_grad);
  r.add("Cos", cos_grad);
  r.add("Log1p", log1p_grad);
  r.add("Expm1", expm1_grad);
  r.add("Cumsum", cumsum_grad);
  r.add("SelectV2", select_grad);
  // Piecewise constant, bool-valued, or a stop by definition: TensorFlow gives their inputs no
  // gradient.
  for (auto op : {"FloorDiv", "Floor", "Ceil", "Round", "IsNan", "IsInf", "IsFinite", "StopGradient"})
    r.add_not_differentiable(op);
  r.add("Reshape", reshape_grad);
  r.add("ConcatV2", concat_grad);
  r.add("Softmax", softmax_grad);
  r.add("SoftmaxCrossEntropyWithLogits", xent_grad);
  r.add("Cast", cast_grad);
  r.add("Conv2D", conv2d_grad);
  r.add("MaxPool", max_pool_grad);
  r.add("AvgPool", avg_pool_grad);
  r.add("Fill", fill_grad);
  r.add("AddN", add_n_grad);
  r.add("SumToShapeOf", sum_to_shape_of_grad);
  r.add("BroadcastToShapeOf", broadcast_to_shape_of_grad);
  r.add("ReshapeLike", reshape_like_grad);
  r.add("SplitToShapesOf", split_to_shapes_of_grad);
  r.add("ReluGrad", relu_grad_grad);
  r.add("SigmoidGrad", sigmoid_grad_grad);
  r.add("TanhGrad", tanh_grad_grad);
  register_sparse_gradients(r);
  register_sampled_loss_gradients(r);
  register_shape_gradients(r);
  register_strided_slice_gradients(r);
  for (auto op : {"ArgMax", "ArgMin", "Where", "Equal", "RandomUniform", "RandomStandardNormal", "TruncatedNormal",
                  "Placeholder", "Const", "VariableV2", "NoOp", "Assign", "AssignAdd", "AssignSub",
                  "OnesLike", "ZerosLike", "_Send", "_Recv", "ApplyGradientDescent",
                  "ApplyMomentum", "ApplyAdam", "ApplyAdagrad", "ApplyFtrl", "ApplyFtrlV2", "Less", "LessEqual", "Greater",
                  "GreaterEqual", "NotEqual", "LogicalAnd", "LogicalOr", "LogicalNot", "LoopCond", "StackPush", "StackPop"})
    r.add_not_differentiable(op);
}

// --- the graph walk --------------------------------------------------------------------------

/// The device of `n`: its assigned device once placed, else what it requested.
const std::string& device_of(const node& n) {
  return n.assigned_device.empty() ? n.requested_device : n.assigned_device;
}

/// The device scope for the gradient nodes of `op` (TF1's _maybe_colocate_with): with
/// colocate_gradients_with_ops, `op`'s device; otherwise none, so the nodes take the device
/// scopes active where gradients() was called, like any node built there.
std::optional<scope_guard> gradient_device_scope(graph& g, const node& op,
                                                 const gradient_options& options) {
  std::optional<scope_guard> device;
  if (options.colocate_gradients_with_ops && !device_of(op).empty())
    device.emplace(g.device(device_of(op)));
  return device;
}

/// The gradient that seeds `y` when the caller gives none: ones of y's shape.
output ones_like(graph& g, const output& y) {
  auto& shape = y.shape();
  if (shape.fully_defined())
    return ops::ones(g, shape.dims(), y.type(), "ones");
  return make(g, "OnesLike", {y});
}

/// One reverse-mode pass over the nodes of one level: the top of the graph, or one while
/// loop's body (when a backward loop is built). Inside the level, each while loop nested in it
/// is one unit, represented by the Exit of its iteration counter, whose inputs are its Enters'
/// inputs and whose gradient is a backward loop (while_gradient); every other node is a unit
/// of its own.
class backprop {
public:
  backprop(graph& g, control_flow_context* level, const gradient_options& options)
    : g_(g), level_(level), options_(options) {
    // Which loop each Exit leaves: an Exit's outputs live outside its loop.
    for (std::size_t id = 0; id < g.size(); ++id)
      for (auto* c = g.context_of(static_cast<int>(id)); c != nullptr; c = c->outer())
        if (auto* w = dynamic_cast<while_context*>(c))
          for (auto& v : w->variables)
            if (v.exit >= 0)
              exit_loop_[v.exit] = w;
  }

  /// The gradients of xs for the seeded outputs ({y, dy}); invalid where none flows. False
  /// when an error was recorded in the graph.
  bool run(const std::vector<std::pair<output, output>>& seeds, const std::vector<output>& xs,
           std::vector<output>& result);

private:
  /// Where node `id` sits: its loop for an Exit, else the context its outputs live in.
  control_flow_context* structural(int id) const {
    auto i = exit_loop_.find(id);
    return i != exit_loop_.end() ? i->second : g_.context_of(id);
  }
  /// The unit node `id` belongs to at this level; -1 outside the level.
  int unit_of(int id) const {
    while_context* outermost = nullptr;
    for (auto* c = structural(id); c != level_; c = c->outer()) {
      if (c == nullptr)
        return -1;
      if (auto* w = dynamic_cast<while_context*>(c))
        outermost = w;
    }
    return outermost != nullptr ? outermost->variables[0].exit : id;
  }
  /// The loop unit `unit` stands for; null for a plain node.
  while_context* loop_of_unit(int unit) const {
    auto i = exit_loop_.find(unit);
    return i != exit_loop_.end() && i->second != level_ ? i->second : nullptr;
  }
  /// The data inputs of a unit: a loop's are those of its Enters (loop variables, invariants).
  std::vector<edge_source> inputs_of(int unit) const {
    auto* loop = loop_of_unit(unit);
    if (loop == nullptr)
      return g_.at(unit).inputs;
    std::vector<edge_source> inputs;
    for (auto& v : loop->variables)
      inputs.push_back(g_.at(v.enter).inputs[0]);
    for (auto& inv : loop->invariants())
      inputs.push_back(g_.at(inv.inside_value.node_id).inputs[0]);
    return inputs;
  }
  /// Where the gradient of something in `context` is built: in its cond branch (inside a
  /// loop's body, that branch's gradient copy in the backward loop), else where the walk is.
  std::optional<scope_guard> enter_branch_of(control_flow_context* context) {
    auto* branch = dynamic_cast<cond_context*>(context);
    if (branch == nullptr || context == level_)
      return std::nullopt;
    auto* backward = enclosing_while(g_.current_context());
    if (level_ != nullptr && backward != nullptr && backward->forward() == level_)
      return g_.enter_context(branch->gradient_branch(*backward));
    return g_.enter_context(context);
  }
  /// The sum of several gradients of one output, made in the cond branch they come from
  /// (the gradients of a Switch's output are inside the branch that output feeds).
  output sum_of(const std::vector<output>& grads) {
    if (grads.size() == 1)
      return grads[0];
    auto* context = g_.context_of(grads[0].node_id);
    std::optional<scope_guard> in_branch;
    auto shared = std::all_of(grads.begin(), grads.end(),
                              [&](const output& d) { return g_.context_of(d.node_id) == context; });
    if (shared && context != g_.current_context() && dynamic_cast<cond_context*>(context) != nullptr)
      in_branch.emplace(g_.enter_context(context));
    // Sparse gradients of one tensor (several lookups of a table) stay sparse: their rows
    // concatenated (TF's _AggregateIndexedSlicesGradients); mixed with dense ones, dense.
    std::vector<output> values, indices;
    std::optional<std::vector<std::int64_t>> dense_shape;
    for (auto& d : grads) {
      auto slices = as_indexed_slices(d);
      if (!slices || (dense_shape && *dense_shape != slices->dense_shape))
        return make(g_, "AddN", grads);
      dense_shape = slices->dense_shape;
      values.push_back(slices->values);
      indices.push_back(slices->indices.type() == dtype::int64
                          ? slices->indices
                          : ops::cast(slices->indices, dtype::int64, "Cast"));
    }
    return ops::indexed_slices(ops::concat(values, 0, "concat"), ops::concat(indices, 0, "concat_1"),
                               *dense_shape);
  }
  /// Whether unit `unit` lies between the xs and ys of run(). Nodes made during the run never
  /// do; a loop's gradient can give its forward loop new inputs (a value its stacks need,
  /// brought in through a new Switch), so a unit's inputs may name them.
  bool is_between(int unit) const {
    auto i = static_cast<std::size_t>(unit);
    return unit >= 0 && i < between_.size() && between_[i] != 0;
  }
  /// Builds the gradient of `loop` (a unit) from the gradients reaching its Exits.
  status while_gradient(while_context& loop);
  /// The gradient of one plain node.
  status node_gradient(const node& op, const std::vector<output>& out_grads,
                       std::vector<output>& in_grads);

  graph& g_;
  control_flow_context* level_;
  const gradient_options& options_;
  std::map<int, while_context*> exit_loop_;
  /// Per unit (node id): between the xs and ys of run().
  std::vector<char> between_;
  /// Gradients reaching each output, summed when the unit is processed.
  std::map<std::pair<int, int>, std::vector<output>> incoming_;
  std::map<std::pair<int, int>, output> summed_;
};

bool backprop::run(const std::vector<std::pair<output, output>>& seeds,
                   const std::vector<output>& xs, std::vector<output>& result) {
  auto count = g_.size();
  result.assign(xs.size(), output{});
  // Units between xs and ys: reachable backwards from a y and forwards from an x over data
  // edges only (a control edge carries no value to differentiate).
  std::vector<char> reaches_y(count, 0);
  std::vector<int> stack;
  auto unit_or_fail = [&](const output& o, const char* what) {
    // A plain node of this level, or a result (Exit) of a loop directly inside it.
    auto unit = unit_of(o.node_id);
    auto leaves = exit_loop_.find(o.node_id);
    auto usable = unit == o.node_id ? loop_of_unit(unit) == nullptr || leaves != exit_loop_.end()
                                    : unit >= 0 && leaves != exit_loop_.end() &&
                                        unit == leaves->second->variables[0].exit;
    if (!usable) {
      g_.record_error(make_error(errc::unimplemented,
                                 std::string{"gradients: "} + what + " '" + o.tensor_name() +
                                   "' is inside a while loop; differentiate the loop's results"));
      return -1;
    }
    return unit;
  };
  for (auto& [y, dy] : seeds) {
    auto unit = unit_or_fail(y, "y");
    if (unit < 0)
      return false;
    stack.push_back(unit);
  }
  // In a loop's body the walk stops at the xs (the body's inputs): behind them is the loop's
  // own Switch, Merge and NextIteration, a cycle.
  std::set<int> stops;
  if (level_ != nullptr) {
    for (auto& x : xs)
      stops.insert(x.node_id);
    // Every variable's, the counter and integers included: the condition may read them.
    if (auto* loop = dynamic_cast<while_context*>(level_))
      for (auto& v : loop->variables)
        stops.insert(v.body_input.node_id);
  }
  while (!stack.empty()) {
    auto id = stack.back();
    stack.pop_back();
    if (reaches_y[static_cast<std::size_t>(id)])
      continue;
    reaches_y[static_cast<std::size_t>(id)] = 1;
    if (stops.count(id) > 0)
      continue;
    for (auto& in : inputs_of(id))
      if (auto unit = unit_of(in.node_id); unit >= 0)
        stack.push_back(unit);
  }
  std::vector<std::vector<int>> consumers(count);
  for (std::size_t id = 0; id < count; ++id)
    if (reaches_y[id])
      for (auto& in : inputs_of(static_cast<int>(id)))
        if (auto unit = unit_of(in.node_id); unit >= 0)
          consumers[static_cast<std::size_t>(unit)].push_back(static_cast<int>(id));
  auto& between = between_;
  between.assign(count, 0);
  for (auto& x : xs) {
    auto unit = unit_or_fail(x, "x");
    if (unit < 0)
      return false;
    stack.push_back(unit);
  }
  while (!stack.empty()) {
    auto id = stack.back();
    stack.pop_back();
    auto i = static_cast<std::size_t>(id);
    if (between[i] || !reaches_y[i])
      continue;
    between[i] = 1;
    for (auto c : consumers[i])
      stack.push_back(c);
  }
  // A unit is ready once every consumer edge inside the subgraph has delivered its gradient.
  std::vector<int> pending(count, 0);
  for (std::size_t id = 0; id < count; ++id)
    if (between[id])
      for (auto& in : inputs_of(static_cast<int>(id)))
        if (auto unit = unit_of(in.node_id); is_between(unit))
          ++pending[static_cast<std::size_t>(unit)];

  for (auto& [y, seed] : seeds)
    if (is_between(unit_of(y.node_id)))
      incoming_[{y.node_id, y.index}].push_back(seed);

  // Reverse topological order; of the ready units the newest goes first, which keeps the
  // numbering of gradient nodes deterministic.
  std::priority_queue<int> ready;
  for (std::size_t id = 0; id < count; ++id)
    if (between[id] && pending[id] == 0)
      ready.push(static_cast<int>(id));

  bool failed = false;
  while (!ready.empty()) {
    auto id = ready.top();
    ready.pop();
    // Taken before the unit is processed: a loop's gradient may give its forward loop new
    // invariants, whose inputs counted for nothing in `pending`.
    auto unit_inputs = inputs_of(id);
    if (auto* loop = loop_of_unit(id)) {
      // A loop inside a cond branch: its backward loop is built in that branch's gradient.
      auto in_branch = enter_branch_of(loop->outer());
      if (auto s = while_gradient(*loop); !s.ok()) {
        g_.record_error(s);
        failed = true;
      }
    } else {
      const node& op = g_.at(id);
      auto outputs = op.output_types.size();
      bool has_gradient = false;
      bool needs_sum = false;
      for (std::size_t k = 0; k < outputs; ++k) {
        auto it = incoming_.find({id, static_cast<int>(k)});
        if (it == incoming_.end() || it->second.empty())
          continue;
        has_gradient = true;
        needs_sum = needs_sum || it->second.size() > 1;
      }
      bool differentiate = false;
      for (auto& in : op.inputs)
        differentiate = differentiate || is_between(unit_of(in.node_id));
      differentiate = differentiate && has_gradient;

      if (has_gradient && (needs_sum || differentiate)) {
        // The sums of several incoming gradients (AddN) and the op's gradient follow one rule:
        // built where the op runs (a cond branch's gradient inside that branch).
        auto in_branch = enter_branch_of(g_.context_of(id));
        auto device = gradient_device_scope(g_, op, options_);
        auto op_scope = g_.name_scope(op.name + "_grad");

        std::vector<output> out_grads(outputs);
        for (std::size_t k = 0; k < outputs; ++k) {
          auto it = incoming_.find({id, static_cast<int>(k)});
          if (it == incoming_.end() || it->second.empty())
            continue;
          out_grads[k] = sum_of(it->second);
          summed_[{id, static_cast<int>(k)}] = out_grads[k];
        }

        if (differentiate && !gradient_registry::global().is_not_differentiable(op.op)) {
          std::vector<output> in_grads(op.inputs.size());
          if (auto s = node_gradient(op, out_grads, in_grads); !s.ok()) {
            g_.record_error(s);
            failed = true;
          } else {
            for (std::size_t j = 0; j < op.inputs.size(); ++j) {
              auto& in = op.inputs[j];
              if (!in_grads[j].valid() || !is_between(unit_of(in.node_id)))
                continue;
              incoming_[{in.node_id, in.index}].push_back(in_grads[j]);
            }
          }
        }
      } else {
        for (std::size_t k = 0; k < outputs; ++k) {
          auto it = incoming_.find({id, static_cast<int>(k)});
          if (it != incoming_.end() && it->second.size() == 1)
            summed_[{id, static_cast<int>(k)}] = it->second[0];
        }
      }
    }
    for (auto& in : unit_inputs)
      if (auto unit = unit_of(in.node_id);
          is_between(unit) && --pending[static_cast<std::size_t>(unit)] == 0)
        ready.push(unit);
  }
  if (failed)
    return false;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    auto key = std::make_pair(xs[i].node_id, xs[i].index);
    if (auto it = summed_.find(key); it != summed_.end())
      result[i] = it->second;
    else if (auto in = incoming_.find(key); in != incoming_.end() && !in->second.empty())
      result[i] = sum_of(in->second);
  }
  return true;
}

status backprop::node_gradient(const node& op, const std::vector<output>& out_grads,
                               std::vector<output>& in_grads) {
  auto* fn = gradient_registry::global().find(op.op);
  if (fn == nullptr)
    return make_error(errc::unimplemented,
                      "no gradient registered for op '" + op.op + "' (node '" + op.name + "')");
  if (auto s = (*fn)(g_, op, out_grads, in_grads); !s.ok())
    return s.with_context("gradient of node '" + op.name + "' (" + op.op + ")");
  for (std::size_t j = 0; j < op.inputs.size(); ++j) {
    auto& in = op.inputs[j];
    if (!in_grads[j].valid())
      continue;
    auto expected = g_.output_of(in.node_id, in.index).type();
    if (in_grads[j].type() != expected)
      return make_error(errc::internal, "gradient of node '" + op.name + "' (" + op.op +
                                          ") for input " + std::to_string(j) + " has dtype " +
                                          to_string(in_grads[j].type()) + ", expected " +
                                          to_string(expected));
  }
  return {};
}

status backprop::while_gradient(while_context& loop) {
  auto& vars = loop.variables;
  // Loop variables that carry gradients (floating point), and the invariants that need one.
  std::vector<std::size_t> carried;
  for (std::size_t i = 1; i < vars.size(); ++i)
    if (is_floating(g_.at(vars[i].exit).output_types[0]))
      carried.push_back(i);
  std::vector<std::size_t> needed;
  for (std::size_t c = 0; c < loop.invariants().size(); ++c) {
    auto& outer = loop.invariants()[c].outer_value;
    if (is_floating(outer.type()) && is_between(unit_of(outer.node_id)))
      needed.push_back(c);
  }
  auto scope = g_.name_scope(g_.at(vars[0].exit).name + "_grad");
  auto iterations = g_.bring_into(g_.current_context(), g_.output_of(vars[0].exit));
  std::vector<output> initial{iterations};
  for (auto i : carried) {
    auto exit = g_.output_of(vars[i].exit);
    std::vector<output> arriving;
    if (auto it = incoming_.find({vars[i].exit, 0}); it != incoming_.end())
      arriving = it->second;
    initial.push_back(arriving.empty() ? make(g_, "ZerosLike", {exit}) : sum_of(arriving));
  }
  for (auto c : needed)
    initial.push_back(make(g_, "ZerosLike", {loop.invariants()[c].outer_value}));

  auto* backward = g_.add_context(std::make_unique<while_context>(
    g_, g_.current_context(), g_.current_scope() + "/while", loop.parallel_iterations()));
  backward->set_forward(&loop);
  status failed;
  auto condition = [](const std::vector<output>& v) { return ops::greater(v[0], 0.0); };
  auto body = [&](const std::vector<output>& v) {
    // Backward iteration j mirrors forward iteration n - 1 - j: the counter counts down.
    auto forward_iteration = ops::sub(v[0], ops::constant(g_, std::int32_t{1}, "one"), "forward_iteration");
    backward->forward_iteration = forward_iteration;
    std::vector<std::pair<output, output>> seeds;
    std::vector<output> xs;
    for (std::size_t k = 0; k < carried.size(); ++k) {
      seeds.emplace_back(vars[carried[k]].body_output, v[k + 1]);
      xs.push_back(vars[carried[k]].body_input);
    }
    for (auto c : needed)
      xs.push_back(loop.invariants()[c].inside_value);
    std::vector<output> grads;
    backprop body_pass{g_, &loop, options_};
    if (!body_pass.run(seeds, xs, grads))
      failed = make_error(errc::invalid_argument, "gradients: the backward loop of '" +
                                                    loop.frame_name() + "' failed");
    // (run() gives one gradient per x, invalid where none flows.)
    std::vector<output> next{forward_iteration};
    for (std::size_t k = 0; k < carried.size(); ++k)
      next.push_back(grads[k].valid() ? grads[k] : make(g_, "ZerosLike", {v[k + 1]}));
    for (std::size_t c = 0; c < needed.size(); ++c) {
      auto& acc = v[1 + carried.size() + c];
      auto& grad = grads[carried.size() + c];
      next.push_back(grad.valid() ? ops::add(acc, grad, "accumulate") : acc);
    }
    return next;
  };
  ops::while_options options;
  options.parallel_iterations = loop.parallel_iterations();
  auto results = build_while_loop(*backward, condition, body, initial, options);
  if (!failed.ok())
    return g_.status().ok() ? failed : g_.status();
  if (results.size() != initial.size())
    return g_.status().ok() ? make_error(errc::internal, "gradients: building the backward loop of '" +
                                                           loop.frame_name() + "' failed")
                            : g_.status();
  for (std::size_t k = 0; k < carried.size(); ++k) {
    auto& in = g_.at(vars[carried[k]].enter).inputs[0];
    if (is_between(unit_of(in.node_id)))
      incoming_[{in.node_id, in.index}].push_back(results[k + 1]);
  }
  for (std::size_t c = 0; c < needed.size(); ++c) {
    auto& outer = loop.invariants()[needed[c]].outer_value;
    incoming_[{outer.node_id, outer.index}].push_back(results[1 + carried.size() + c]);
  }
  return {};
}

} // namespace

gradient_registry& gradient_registry::global() {
  static gradient_registry* instance = [] {
    auto* r = new gradient_registry;
    register_standard_gradients(*r);
    return r;
  }();
  return *instance;
}

void gradient_registry::add(const std::string& op, gradient_function fn) {
  functions_[op] = std::move(fn);
}

void gradient_registry::add_not_differentiable(const std::string& op) { stops_.insert(op); }

const gradient_function* gradient_registry::find(const std::string& op) const {
  auto i = functions_.find(op);
  return i == functions_.end() ? nullptr : &i->second;
}

bool gradient_registry::is_not_differentiable(const std::string& op) const {
  return stops_.count(op) > 0;
}

std::vector<output> gradients(const std::vector<output>& ys, const std::vector<output>& xs,
                              const std::vector<output>& grad_ys,
                              const gradient_options& options) {
  std::vector<output> result(xs.size());
  graph* owner = nullptr;
  for (auto& y : ys)
    if (y.valid()) {
      owner = y.owner;
      break;
    }
  if (owner == nullptr)
    return result;
  graph& g = *owner;
  for (auto* list : {&ys, &xs})
    for (auto& o : *list)
      if (!o.valid() || o.owner != owner) {
        g.record_error(make_error(errc::invalid_argument,
                                  "gradients: every y and x must be a valid output of one graph"));
        return result;
      }
  auto scope = g.name_scope("gradients");
  std::vector<std::pair<output, output>> seeds;
  for (std::size_t i = 0; i < ys.size(); ++i) {
    auto& y = ys[i];
    output seed = i < grad_ys.size() && grad_ys[i].valid() ? grad_ys[i] : output{};
    if (seed.valid() && (seed.owner != owner || seed.type() != y.type())) {
      g.record_error(make_error(errc::invalid_argument,
                                "gradients: grad_ys[" + std::to_string(i) + "] ('" +
                                  seed.tensor_name() + "', " + to_string(seed.type()) +
                                  ") does not match y '" + y.tensor_name() + "' (" +
                                  to_string(y.type()) + ")"));
      return result;
    }
    if (!seed.valid()) {
      auto device = gradient_device_scope(g, g.at(y.node_id), options);
      seed = ones_like(g, y);
    }
    seeds.emplace_back(y, seed);
  }
  backprop pass{g, g.current_context(), options};
  if (!pass.run(seeds, xs, result))
    result.assign(xs.size(), output{});
  return result;
}

} // namespace actorflow

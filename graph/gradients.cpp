// Symbolic reverse-mode differentiation: the graph walk (gradients()) and the gradient function
// of every differentiable standard op (gradient_registry). Helper ops the gradient functions
// build (SumToShapeOf, BroadcastToShapeOf, ReluGrad, ...) are defined in graph/gradient_ops.cpp.
#include "graph/gradients.hpp"

#include "graph/op_registry.hpp"
#include "graph/ops.hpp"

#include <optional>
#include <queue>
#include <utility>

namespace actorflow {

namespace {

// --- building blocks for gradient functions --------------------------------------------------

/// Input `i` of the forward node as an output.
output input_of(graph& g, const node& op, int i) {
  auto& e = op.inputs[static_cast<std::size_t>(i)];
  return g.output_of(e.node_id, e.index);
}

/// Output `i` of the forward node.
output output_of(graph& g, const node& op, int i = 0) { return g.output_of(op.id, i); }

output make(graph& g, const std::string& op, std::vector<output> inputs,
            std::map<std::string, attr_value> attrs = {}, const std::string& name = "") {
  node_spec spec;
  spec.op = op;
  spec.name = name.empty() ? op : name;
  spec.inputs = std::move(inputs);
  spec.attrs = std::move(attrs);
  return g.output_of(g.add_node(std::move(spec)));
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

status max_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  // The gradient goes to the positions equal to the maximum, split evenly between ties.
  auto x = input_of(g, op, 0);
  auto y = output_of(g, op);
  auto y_spread = broadcast_to_shape_of(g, op, y, x);
  auto mask = ops::cast(ops::equal(x, y_spread, "Equal"), x.type(), "Cast");
  auto ties = ops::reduce_sum(mask, axes_of(op), keep_dims_of(op), "Sum");
  dx[0] = ops::mul(broadcast_to_shape_of(g, op, ops::div(dy[0], ties, "RealDiv"), x), mask, "Mul");
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

void register_standard_gradients(gradient_registry& r) {
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
  r.add("Max", max_grad);
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
  for (auto op : {"ArgMax", "Equal", "RandomUniform", "RandomStandardNormal", "TruncatedNormal",
                  "Placeholder", "Const", "VariableV2", "NoOp", "Assign", "AssignAdd", "AssignSub",
                  "OnesLike", "ZerosLike", "_Send", "_Recv", "ApplyGradientDescent",
                  "ApplyMomentum", "ApplyAdam"})
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

/// The nodes between xs and ys: reachable backwards from a y and forwards from an x, over data
/// edges only (a control edge carries no value to differentiate). One flag per node id.
std::vector<char> nodes_between(const graph& g, const std::vector<output>& ys,
                                const std::vector<output>& xs) {
  auto count = g.size();
  std::vector<char> reaches_y(count, 0);
  std::vector<int> stack;
  for (auto& y : ys)
    stack.push_back(y.node_id);
  while (!stack.empty()) {
    auto id = stack.back();
    stack.pop_back();
    if (reaches_y[static_cast<std::size_t>(id)])
      continue;
    reaches_y[static_cast<std::size_t>(id)] = 1;
    for (auto& in : g.at(id).inputs)
      stack.push_back(in.node_id);
  }
  std::vector<std::vector<int>> data_consumers(count);
  for (std::size_t id = 0; id < count; ++id)
    for (auto& in : g.at(static_cast<int>(id)).inputs)
      data_consumers[static_cast<std::size_t>(in.node_id)].push_back(static_cast<int>(id));
  std::vector<char> between(count, 0);
  for (auto& x : xs)
    stack.push_back(x.node_id);
  while (!stack.empty()) {
    auto id = stack.back();
    stack.pop_back();
    auto i = static_cast<std::size_t>(id);
    if (between[i] || !reaches_y[i])
      continue;
    between[i] = 1;
    for (auto c : data_consumers[i])
      stack.push_back(c);
  }
  return between;
}

/// The gradient that seeds `y` when the caller gives none: ones of y's shape.
output ones_like(graph& g, const output& y) {
  auto& shape = y.shape();
  if (shape.fully_defined())
    return ops::ones(g, shape.dims(), y.type(), "ones");
  return make(g, "OnesLike", {y});
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

  auto count = g.size();
  auto between = nodes_between(g, ys, xs);
  auto is_between = [&](int id) { return between[static_cast<std::size_t>(id)] != 0; };

  // A node is ready once every consumer edge inside the subgraph has delivered its gradient.
  std::vector<int> pending(count, 0);
  for (std::size_t id = 0; id < count; ++id)
    if (between[id])
      for (auto& in : g.at(static_cast<int>(id)).inputs)
        if (is_between(in.node_id))
          ++pending[static_cast<std::size_t>(in.node_id)];

  auto& registry = gradient_registry::global();
  auto scope = g.name_scope("gradients");
  // Gradients reaching each output, summed when the node is processed.
  std::map<std::pair<int, int>, std::vector<output>> incoming;
  std::map<std::pair<int, int>, output> summed;

  for (std::size_t i = 0; i < ys.size(); ++i) {
    auto& y = ys[i];
    if (!is_between(y.node_id))
      continue;
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
    incoming[{y.node_id, y.index}].push_back(seed);
  }

  // Reverse topological order; of the ready nodes the newest goes first, which keeps the
  // numbering of gradient nodes deterministic.
  std::priority_queue<int> ready;
  for (std::size_t id = 0; id < count; ++id)
    if (between[id] && pending[id] == 0)
      ready.push(static_cast<int>(id));

  bool failed = false;
  while (!ready.empty()) {
    auto id = ready.top();
    ready.pop();
    const node& op = g.at(id);
    auto outputs = op.output_types.size();

    bool has_gradient = false;
    bool needs_sum = false;
    for (std::size_t k = 0; k < outputs; ++k) {
      auto it = incoming.find({id, static_cast<int>(k)});
      if (it == incoming.end() || it->second.empty())
        continue;
      has_gradient = true;
      needs_sum = needs_sum || it->second.size() > 1;
    }
    bool differentiate = false;
    for (auto& in : op.inputs)
      differentiate = differentiate || is_between(in.node_id);
    differentiate = differentiate && has_gradient;

    if (has_gradient && (needs_sum || differentiate)) {
      // The sums of several incoming gradients (AddN) and the op's gradient follow one rule.
      auto device = gradient_device_scope(g, op, options);
      auto op_scope = g.name_scope(op.name + "_grad");

      std::vector<output> out_grads(outputs);
      for (std::size_t k = 0; k < outputs; ++k) {
        auto it = incoming.find({id, static_cast<int>(k)});
        if (it == incoming.end() || it->second.empty())
          continue;
        out_grads[k] = it->second.size() == 1 ? it->second[0] : make(g, "AddN", it->second);
        summed[{id, static_cast<int>(k)}] = out_grads[k];
      }

      if (differentiate && !registry.is_not_differentiable(op.op)) {
        std::vector<output> in_grads(op.inputs.size());
        auto* fn = registry.find(op.op);
        if (fn == nullptr) {
          g.record_error(make_error(errc::unimplemented, "no gradient registered for op '" +
                                                           op.op + "' (node '" + op.name + "')"));
          failed = true;
        } else if (auto s = (*fn)(g, op, out_grads, in_grads); !s.ok()) {
          g.record_error(s.with_context("gradient of node '" + op.name + "' (" + op.op + ")"));
          failed = true;
        } else {
          for (std::size_t j = 0; j < op.inputs.size(); ++j) {
            auto& in = op.inputs[j];
            if (!in_grads[j].valid() || !is_between(in.node_id))
              continue;
            auto expected = g.output_of(in.node_id, in.index).type();
            if (in_grads[j].type() != expected) {
              g.record_error(make_error(
                errc::internal, "gradient of node '" + op.name + "' (" + op.op + ") for input " +
                                  std::to_string(j) + " has dtype " + to_string(in_grads[j].type()) +
                                  ", expected " + to_string(expected)));
              failed = true;
              continue;
            }
            incoming[{in.node_id, in.index}].push_back(in_grads[j]);
          }
        }
      }
    } else {
      for (std::size_t k = 0; k < outputs; ++k) {
        auto it = incoming.find({id, static_cast<int>(k)});
        if (it != incoming.end() && it->second.size() == 1)
          summed[{id, static_cast<int>(k)}] = it->second[0];
      }
    }

    for (auto& in : op.inputs)
      if (is_between(in.node_id) && --pending[static_cast<std::size_t>(in.node_id)] == 0)
        ready.push(in.node_id);
  }

  if (failed)
    return result;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    auto it = summed.find({xs[i].node_id, xs[i].index});
    if (it != summed.end())
      result[i] = it->second;
  }
  return result;
}

} // namespace actorflow

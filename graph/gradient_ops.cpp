// Ops that only gradients build (graph/gradients.cpp): their definitions and shape inference.
// Names follow TensorFlow where TensorFlow has the op (AddN, ReluGrad, SigmoidGrad, TanhGrad,
// OnesLike, ZerosLike); the shape-of ops replace TensorFlow's Shape + BroadcastGradientArgs +
// Reshape chains with one op each, so that gradients work when shapes are known only at run time.
//   AddN(x0, x1, ...)                 sum of same-shaped tensors
//   ReluGrad(dy, y)                   dy where y > 0, else 0
//   SigmoidGrad(y, dy)                dy * y * (1 - y)
//   TanhGrad(y, dy)                   dy * (1 - y * y)
//   SumToShapeOf(grad, x)             grad summed down to x's run-time shape (broadcast undone)
//   BroadcastToShapeOf(dy, x)         dy (the result of reducing x over attr axes, keep_dims)
//                                     repeated back to x's run-time shape; with attr
//                                     divide_by_count, divided by the number of reduced elements
//   ReshapeLike(dy, x)                dy with x's run-time shape
//   SplitToShapesOf(dy, x0, ..., xn-1) the gradient of ConcatV2 (same attr axis): output i is
//                                     the slice of dy along axis that xi's run-time shape covers,
//                                     starting where x0 .. x(i-1) end (TensorFlow's ConcatOffset +
//                                     Slice, in one op)
//   OnesLike(x), ZerosLike(x)         x's shape and dtype, filled
//   ProdGrad(x, dy)                   the gradient of Prod (same attrs axes, keep_dims): each
//                                     element gets dy times the product of the others in its
//                                     group, exact where the group holds zeros (TensorFlow
//                                     builds it from cumprods; one pass here)
#include "graph/op_registry.hpp"

namespace actorflow {

namespace {

status error(const std::string& message) { return make_error(errc::invalid_argument, message); }

status same_types(const shape_context& c) {
  for (std::size_t i = 1; i < c.input_types.size(); ++i)
    if (c.input_types[i] != c.input_types[0])
      return error(std::string{"inputs have different dtypes: "} + to_string(c.input_types[0]) +
                   " and " + to_string(c.input_types[i]));
  return {};
}

/// The more specific of two compatible partial shapes; an error naming both otherwise.
result<tensor_shape> merge_shapes(const tensor_shape& a, const tensor_shape& b) {
  if (!a.rank_known())
    return b;
  if (!b.rank_known())
    return a;
  if (a.rank() != b.rank())
    return error("shapes " + a.to_string() + " and " + b.to_string() + " differ in rank");
  auto merged = a;
  for (int i = 0; i < a.rank(); ++i) {
    if (a.dim(i) < 0)
      merged.set_dim(i, b.dim(i));
    else if (b.dim(i) >= 0 && a.dim(i) != b.dim(i))
      return error("shapes " + a.to_string() + " and " + b.to_string() + " differ");
  }
  return merged;
}

/// Output 0: input `type_from`'s dtype with input `shape_from`'s shape.
status like_input(shape_context& c, int type_from, int shape_from) {
  c.set_output(0, c.input_types[static_cast<std::size_t>(type_from)],
               c.input_shapes[static_cast<std::size_t>(shape_from)]);
  return {};
}

/// Two inputs of one float dtype and compatible shapes; the output is their merged shape.
status elementwise_pair(shape_context& c) {
  AF_RETURN_IF_ERROR(same_types(c));
  if (!is_floating(c.input_types[0]))
    return error(std::string{"expects float32 or float64 inputs, got "} + to_string(c.input_types[0]));
  auto shape = merge_shapes(c.input_shapes[0], c.input_shapes[1]);
  if (!shape)
    return shape.error();
  c.set_output(0, c.input_types[0], *shape);
  return {};
}

/// SplitToShapesOf: output i has dy's dtype and xi's shape, with the dimensions other than axis
/// that xi leaves unknown taken from dy.
status split_to_shapes_of(shape_context& c) {
  if (c.input_types.size() < 2)
    return error("SplitToShapesOf needs the gradient and at least one shape input");
  auto* axis_value = c.n.attr<std::int64_t>("axis");
  if (axis_value == nullptr)
    return error("missing attribute 'axis'");
  auto axis_attr = *axis_value;
  auto& dy = c.input_shapes[0];
  for (std::size_t i = 1; i < c.input_shapes.size(); ++i) {
    auto shape = c.input_shapes[i];
    if (shape.rank_known() && dy.rank_known()) {
      auto rank = shape.rank();
      if (dy.rank() != rank)
        return error("SplitToShapesOf: a gradient of shape " + dy.to_string() +
                     " cannot be split into shape " + shape.to_string());
      if (axis_attr < -rank || axis_attr >= rank)
        return error("SplitToShapesOf axis " + std::to_string(axis_attr) +
                     " is out of range for shape " + shape.to_string());
      auto axis = axis_attr < 0 ? axis_attr + rank : axis_attr;
      for (int d = 0; d < rank; ++d) {
        if (d == axis || dy.dim(d) < 0)
          continue;
        if (shape.dim(d) < 0)
          shape.set_dim(d, dy.dim(d));
        else if (shape.dim(d) != dy.dim(d))
          return error("SplitToShapesOf: a gradient of shape " + dy.to_string() +
                       " cannot be split into shape " + c.input_shapes[i].to_string());
      }
    }
    c.set_output(static_cast<int>(i - 1), c.input_types[0], shape);
  }
  return {};
}

} // namespace

void register_gradient_ops(op_registry& r) {
  auto add = [&r](std::string name, int inputs, std::function<status(shape_context&)> infer,
                  std::vector<int> shape_only = {}) {
    op_def def{std::move(name), inputs, false, false, std::move(infer)};
    def.shape_only_inputs = std::move(shape_only);
    r.add(std::move(def));
  };
  add("AddN", -1, [](shape_context& c) {
    if (c.input_types.empty())
      return error("AddN needs at least one input");
    AF_RETURN_IF_ERROR(same_types(c));
    auto shape = c.input_shapes[0];
    for (std::size_t i = 1; i < c.input_shapes.size(); ++i) {
      auto merged = merge_shapes(shape, c.input_shapes[i]);
      if (!merged)
        return merged.error();
      shape = *merged;
    }
    c.set_output(0, c.input_types[0], shape);
    return status{};
  });
  add("ReluGrad", 2, elementwise_pair);
  add("SigmoidGrad", 2, elementwise_pair);
  add("TanhGrad", 2, elementwise_pair);
  add("SumToShapeOf", 2, [](shape_context& c) {
    // x may have another dtype (only its shape matters); the result has grad's dtype.
    return like_input(c, 0, 1);
  }, {1});
  add("BroadcastToShapeOf", 2, [](shape_context& c) { return like_input(c, 0, 1); }, {1});
  add("ReshapeLike", 2, [](shape_context& c) {
    auto& dy = c.input_shapes[0];
    auto& x = c.input_shapes[1];
    if (dy.fully_defined() && x.fully_defined() && dy.num_elements() != x.num_elements())
      return error("ReshapeLike: " + dy.to_string() + " and " + x.to_string() +
                   " have different element counts");
    return like_input(c, 0, 1);
  }, {1});
  add("SplitToShapesOf", -1, split_to_shapes_of);
  add("ProdGrad", 2, [](shape_context& c) { return like_input(c, 0, 0); });
  add("OnesLike", 1, [](shape_context& c) { return like_input(c, 0, 0); }, {0});
  add("ZerosLike", 1, [](shape_context& c) { return like_input(c, 0, 0); }, {0});
}

} // namespace actorflow

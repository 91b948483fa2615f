// Definitions and shape inference of the control-flow primitives (TensorFlow's Switch, Merge,
// Enter, Exit, NextIteration, LoopCond) and of the indexed stacks that keep a loop's forward
// values for its gradient. graph/control_flow.hpp builds cond and while_loop from them;
// devices/executor.cpp runs the primitives itself. The comparisons, LogicalAnd/Not and Gather
// a loop uses are standard ops (standard_ops.cpp).
#include "graph/op_registry.hpp"

namespace actorflow {

namespace {

status error(const std::string& message) { return make_error(errc::invalid_argument, message); }

status scalar_bool(const shape_context& c, int i, const char* what) {
  if (c.input_types[static_cast<std::size_t>(i)] != dtype::boolean)
    return error(std::string{what} + " must be bool, got " +
                 to_string(c.input_types[static_cast<std::size_t>(i)]));
  auto& s = c.input_shapes[static_cast<std::size_t>(i)];
  if (s.rank_known() && s.rank() != 0)
    return error(std::string{what} + " must be a scalar, got " + s.to_string());
  return {};
}

/// The most specific shape compatible with both (a dimension that differs becomes unknown).
tensor_shape most_specific_common(const tensor_shape& a, const tensor_shape& b) {
  if (!a.rank_known() || !b.rank_known() || a.rank() != b.rank())
    return tensor_shape::unknown();
  std::vector<std::int64_t> dims;
  for (int i = 0; i < a.rank(); ++i)
    dims.push_back(a.dim(i) == b.dim(i) ? a.dim(i) : -1);
  return tensor_shape{dims};
}

status forward_input(shape_context& c) {
  c.set_output(0, c.input_types[0], c.input_shapes[0]);
  return {};
}

status indices_are_integers(const shape_context& c, std::size_t first) {
  for (auto i = first; i < c.input_types.size(); ++i) {
    if (c.input_types[i] != dtype::int32 && c.input_types[i] != dtype::int64)
      return error("stack index " + std::to_string(i - first) + " must be int32 or int64, got " +
                   to_string(c.input_types[i]));
    if (c.input_shapes[i].rank_known() && c.input_shapes[i].rank() != 0)
      return error("stack index " + std::to_string(i - first) + " must be a scalar");
  }
  return {};
}


} // namespace

void register_control_flow_ops(op_registry& r) {
  auto add = [&r](std::string name, int inputs, std::function<status(shape_context&)> infer,
                  bool stateful = false) {
    r.add(op_def{std::move(name), inputs, stateful, false, std::move(infer)});
  };
  // Switch(data, pred): output 0 carries data when pred is false, output 1 when it is true; the
  // other output is dead.
  add("Switch", 2, [](shape_context& c) {
    AF_RETURN_IF_ERROR(scalar_bool(c, 1, "Switch's predicate"));
    c.set_output(0, c.input_types[0], c.input_shapes[0]);
    c.set_output(1, c.input_types[0], c.input_shapes[0]);
    return status{};
  });
  // Merge(inputs...): output 0 is the first live input, output 1 its index (int32). Dead only
  // when every input is.
  add("Merge", -1, [](shape_context& c) {
    if (c.input_types.empty())
      return error("Merge needs at least one input");
    for (std::size_t i = 1; i < c.input_types.size(); ++i)
      if (c.input_types[i] != c.input_types[0])
        return error(std::string{"Merge inputs have different dtypes: "} +
                     to_string(c.input_types[0]) + " and " + to_string(c.input_types[i]));
    auto shape = c.input_shapes[0];
    for (std::size_t i = 1; i < c.input_shapes.size(); ++i)
      shape = most_specific_common(shape, c.input_shapes[i]);
    c.set_output(0, c.input_types[0], shape);
    c.set_output(1, dtype::int32, tensor_shape{});
    return status{};
  });
  // Enter(data): attrs frame_name, is_constant, parallel_iterations. Makes data available in
  // the child frame: to its first iteration, or to every iteration when is_constant.
  add("Enter", 1, [](shape_context& c) {
    auto* frame = c.n.attr<std::string>("frame_name");
    if (frame == nullptr || frame->empty())
      return error("Enter needs a 'frame_name'");
    return forward_input(c);
  });
  // Exit(data): makes data available to the parent frame.
  add("Exit", 1, forward_input);
  // NextIteration(data): makes data available to the next iteration of the same frame.
  add("NextIteration", 1, forward_input);
  // LoopCond(pred): the loop's condition; its output feeds the loop's Switches.
  add("LoopCond", 1, [](shape_context& c) {
    AF_RETURN_IF_ERROR(scalar_bool(c, 0, "LoopCond's input"));
    return forward_input(c);
  });
  // StackPush(value, index...): attr stack_name; keeps value in the step's stack under the
  // indices (the iteration numbers of the enclosing loops, outermost first). No outputs.
  add("StackPush", -1, [](shape_context& c) {
    if (c.input_types.size() < 2)
      return error("StackPush needs a value and at least one index");
    if (c.n.attr<std::string>("stack_name") == nullptr)
      return error("StackPush needs a 'stack_name'");
    return indices_are_integers(c, 1);
  }, true);
  // StackPop(index...): attrs stack_name, dtype, shape; removes and outputs the value pushed
  // under the indices, waiting for it when the push has not run yet.
  add("StackPop", -1, [](shape_context& c) {
    if (c.input_types.empty())
      return error("StackPop needs at least one index");
    if (c.n.attr<std::string>("stack_name") == nullptr || c.n.attr<dtype>("dtype") == nullptr)
      return error("StackPop needs a 'stack_name' and a 'dtype'");
    AF_RETURN_IF_ERROR(indices_are_integers(c, 0));
    auto* shape = c.n.attr<tensor_shape>("shape");
    c.set_output(0, *c.n.attr<dtype>("dtype"), shape ? *shape : tensor_shape::unknown());
    return status{};
  }, true);
}

} // namespace actorflow

// Definitions and shape inference of the optimizer update ops (TensorFlow's training_ops):
//   ApplyGradientDescent(var, alpha, delta)
//   ApplyMomentum(var, accum, lr, grad, momentum)                       attr use_nesterov
//   ApplyAdam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad)
//   ApplyAdagrad(var, accum, lr, grad)
//   ApplyFtrl(var, accum, linear, grad, lr, l1, l2, lr_power)
//   ApplyFtrlV2(var, accum, linear, grad, lr, l1, l2, l2_shrinkage, lr_power)   TF's orders
// Input 0 and the slot inputs (accum; m, v) are variable refs, as for Assign: the kernel finds
// the variables through attr "variable" (input 0) and attr "slots" (the slot variables' node
// names, comma-separated, in input order). The output is the variable's updated value.
#include "graph/op_registry.hpp"

namespace actorflow {

namespace {

status error(const std::string& message) { return make_error(errc::invalid_argument, message); }

/// Whether two (possibly partial) shapes can describe the same tensor.
bool shapes_compatible(const tensor_shape& a, const tensor_shape& b) {
  if (!a.rank_known() || !b.rank_known())
    return true;
  if (a.rank() != b.rank())
    return false;
  for (int i = 0; i < a.rank(); ++i)
    if (a.dim(i) >= 0 && b.dim(i) >= 0 && a.dim(i) != b.dim(i))
      return false;
  return true;
}

/// Checks an update op's inputs: every input has the variable's float dtype, the inputs at
/// `like_variable` have its shape and those at `scalars` are scalars. `names` names each input
/// for messages.
status check_update(shape_context& c, const std::vector<const char*>& names,
                    const std::vector<int>& like_variable, const std::vector<int>& scalars) {
  auto var_type = c.input_types[0];
  if (!is_floating(var_type))
    return error(c.n.op + " updates float32 or float64 variables, got a " + to_string(var_type) +
                 " variable");
  for (std::size_t i = 1; i < c.input_types.size(); ++i)
    if (c.input_types[i] != var_type)
      return error(c.n.op + ": " + names[i] + " is " + to_string(c.input_types[i]) +
                   " but the variable is " + to_string(var_type));
  auto& var_shape = c.input_shapes[0];
  for (auto i : like_variable) {
    auto& s = c.input_shapes[static_cast<std::size_t>(i)];
    if (!shapes_compatible(var_shape, s))
      return error(c.n.op + ": " + names[static_cast<std::size_t>(i)] + " shape " + s.to_string() +
                   " differs from variable shape " + var_shape.to_string());
  }
  for (auto i : scalars) {
    auto& s = c.input_shapes[static_cast<std::size_t>(i)];
    if (s.rank_known() && s.rank() != 0)
      return error(c.n.op + ": " + names[static_cast<std::size_t>(i)] + " must be a scalar, got " +
                   s.to_string());
  }
  c.set_output(0, var_type, var_shape);
  return {};
}

} // namespace

void register_training_ops(op_registry& r) {
  auto add = [&r](std::string name, int inputs, std::function<status(shape_context&)> infer,
                  std::vector<int> slot_inputs) {
    op_def def{std::move(name), inputs, /*stateful=*/true, /*takes_variable_ref=*/true,
               std::move(infer)};
    def.variable_ref_inputs = std::move(slot_inputs);
    r.add(std::move(def));
  };
  add("ApplyGradientDescent", 3, [](shape_context& c) {
    return check_update(c, {"var", "alpha", "delta"}, {2}, {1});
  }, {});
  add("ApplyMomentum", 5, [](shape_context& c) {
    return check_update(c, {"var", "accum", "lr", "grad", "momentum"}, {1, 3}, {2, 4});
  }, {1});
  add("ApplyAdagrad", 4, [](shape_context& c) {
    return check_update(c, {"var", "accum", "lr", "grad"}, {1, 3}, {2});
  }, {1});
  add("ApplyAdam", 10, [](shape_context& c) {
    return check_update(c,
                        {"var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2",
                         "epsilon", "grad"},
                        {1, 2, 9}, {3, 4, 5, 6, 7, 8});
  }, {1, 2});
  add("ApplyFtrl", 8, [](shape_context& c) {
    return check_update(c, {"var", "accum", "linear", "grad", "lr", "l1", "l2", "lr_power"},
                        {1, 2, 3}, {4, 5, 6, 7});
  }, {1, 2});
  add("ApplyFtrlV2", 9, [](shape_context& c) {
    return check_update(c,
                        {"var", "accum", "linear", "grad", "lr", "l1", "l2", "l2_shrinkage",
                         "lr_power"},
                        {1, 2, 3}, {4, 5, 6, 7, 8});
  }, {1, 2});
}

} // namespace actorflow

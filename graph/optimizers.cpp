// Optimizers as graph ops, laid out like TensorFlow 1.x's: slots "w/Momentum" (Adam: "w/Adam",
// "w/Adam_1") and Adam's "beta1_power" / "beta2_power" are created before the optimizer's name
// scope; inside it each variable gets "<scope>/update_<var>/Apply...", and a NoOp named after
// the scope groups every update. Everything a variable's update creates (its constants, its
// Apply op, its slots and their initialisers) is made inside graph::colocate_with(variable),
// so it requests the variable's device and placement keeps the update next to the variable.
#include "graph/optimizers.hpp"

#include "graph/gradients.hpp"
#include "graph/hash_embedding.hpp"
#include "graph/ops.hpp"
#include "graph/sparse_ops.hpp"

#include <algorithm>
#include <optional>

namespace actorflow {

namespace {

/// The node for an update op on `var`: input 0 is the variable ref, `slots` the slot variables
/// (refs as well) that follow it, then `inputs`.
output apply_op(graph& g, const std::string& op, const variable& var,
                const std::vector<variable>& slots, const std::vector<output>& inputs,
                std::map<std::string, attr_value> attrs = {}) {
  node_spec spec;
  spec.op = op;
  spec.name = op;
  spec.inputs.push_back(var.ref);
  std::string slot_names;
  for (auto& s : slots) {
    spec.inputs.push_back(s.ref);
    slot_names += (slot_names.empty() ? "" : ",") + s.name();
  }
  spec.inputs.insert(spec.inputs.end(), inputs.begin(), inputs.end());
  attrs["variable"] = var.name();
  if (!slots.empty())
    attrs["slots"] = slot_names;
  attrs["colocate_with"] = var.name();
  spec.attrs = std::move(attrs);
  return g.output_of(g.add_node(std::move(spec)));
}

/// For a sparse gradient (an IndexedSlices): its distinct row indices and their summed rows,
/// made where the rows are (the worker), so that each touched row crosses to the variable once.
std::optional<std::pair<output, output>> unique_rows(const output& grad) {
  auto slices = as_indexed_slices(grad);
  if (!slices)
    return std::nullopt;
  auto& g = *grad.owner;
  auto beside_rows = g.colocate_with(slices->values);
  return ops::deduplicate_slices(slices->values, slices->indices, "DeduplicateSlices");
}

/// For an update with no sparse kernel (Adam: TF1 decays every row's moments): a sparse gradient
/// made dense where it is applied, from its deduplicated rows, so that only those cross; a dense
/// gradient as it is. Call it inside colocate_with(var).
output dense_where_applied(const output& grad) {
  auto slices = as_indexed_slices(grad);
  if (!slices)
    return grad;
  auto rows = unique_rows(grad);
  return ops::indexed_slices(rows->second, rows->first, slices->dense_shape, "densified");
}

/// The update of a hash table shard (graph/hash_embedding.hpp) by `op` from a sparse gradient's
/// deduplicated rows: inputs table, `before`, rows, ids, `after`. The table's node lists the
/// `slots` it keeps beside each row (name, initial value), so that a table restored before its
/// first update lays out their columns. A dense gradient is an error: a table has no dense form.
output hash_table_update(graph& g, const std::string& op, const variable& table, const output& grad,
                         const std::vector<output>& before, const std::vector<output>& after,
                         const std::vector<std::pair<std::string, double>>& slots,
                         std::map<std::string, attr_value> attrs = {}) {
  auto rows = unique_rows(grad);
  if (!rows) {
    g.record_error(make_error(errc::invalid_argument, op + ": the gradient of hash table '" +
                                                        table.name() + "' is dense ('" +
                                                        grad.tensor_name() + "'); it must be sparse"));
    return {};
  }
  auto& table_node = g.at(table.ref.node_id);
  auto listed = table_node.attr_or<std::string>("slots", "");
  for (auto& [name, initial] : slots)
    if (("," + listed).find("," + name + "=") == std::string::npos)
      listed += (listed.empty() ? "" : ",") + name + "=" + std::to_string(initial);
  table_node.attrs["slots"] = listed;
  std::vector<output> inputs{table.ref};
  inputs.insert(inputs.end(), before.begin(), before.end());
  inputs.push_back(rows->second);
  inputs.push_back(rows->first);
  inputs.insert(inputs.end(), after.begin(), after.end());
  attrs["variable"] = table.name();
  attrs["colocate_with"] = table.name();
  if (auto* dim = table_node.attr<std::int64_t>("dim"))
    attrs["dim"] = *dim;
  return ops::make(g, op, op, std::move(inputs), std::move(attrs));
}

/// The error for an optimizer with no hash table update; an invalid output.
output no_hash_table_update(graph& g, const char* optimizer, const variable& table) {
  g.record_error(make_error(errc::unimplemented, std::string{optimizer} + " cannot update hash table '" +
                                                   table.name() + "' (gradient descent, Adagrad "
                                                   "and FTRL can)"));
  return {};
}

/// A NoOp named exactly as the current name scope (TF names the train op after its scope),
/// depending on `deps`.
output group_named_after_scope(graph& g, const std::vector<output>& deps) {
  node_spec spec;
  spec.op = "NoOp";
  spec.name = g.current_scope();
  spec.exact_name = true;
  for (auto& d : deps)
    if (d.valid())
      spec.control_inputs.push_back(d.node_id);
  return g.output_of(g.add_node(std::move(spec)));
}

/// The pairs that have a gradient (TF skips variables whose gradient is None), and their graph
/// (null when none is left: there is nothing to apply).
std::pair<graph*, std::vector<gradient_and_variable>>
usable_pairs(const std::vector<gradient_and_variable>& pairs) {
  std::vector<gradient_and_variable> usable;
  for (auto& pair : pairs)
    if (pair.first.valid() && pair.second.ref.valid())
      usable.push_back(pair);
  return {usable.empty() ? nullptr : usable.front().second.ref.owner, std::move(usable)};
}

/// A non-trainable scalar variable `name` of `type` starting at `value`, colocated with `with`.
variable colocated_scalar_variable(graph& g, const std::string& name, dtype type, double value,
                                   const variable& with) {
  auto colocation = g.colocate_with(with.ref);
  auto initial = ops::scalar_like(g, type, value, name + "/initial_value");
  auto v = ops::variable(g, initial, name, /*trainable=*/false);
  return v;
}

} // namespace

std::vector<gradient_and_variable> optimizer::compute_gradients(output loss,
                                                                std::vector<variable> vars,
                                                                const gradient_options& options) {
  std::vector<gradient_and_variable> pairs;
  if (!loss.valid())
    return pairs;
  auto& g = *loss.owner;
  if (vars.empty())
    vars = g.trainable_variables();
  if (vars.empty()) {
    g.record_error(make_error(errc::invalid_argument,
                              "compute_gradients: no variables to optimize for loss '" +
                                loss.tensor_name() + "'"));
    return pairs;
  }
  std::vector<output> xs;
  for (auto& v : vars)
    xs.push_back(v.ref);
  auto grads = gradients(loss, xs, options);
  for (std::size_t i = 0; i < vars.size() && i < grads.size(); ++i)
    if (grads[i].valid())
      pairs.emplace_back(grads[i], vars[i]);
  return pairs;
}

output optimizer::minimize(output loss, std::vector<variable> vars,
                           const gradient_options& options) {
  auto pairs = compute_gradients(loss, std::move(vars), options);
  if (pairs.empty()) {
    if (loss.valid() && loss.owner->status().ok())
      loss.owner->record_error(make_error(errc::invalid_argument,
                                          "minimize: no gradients provided for any variable "
                                          "(loss '" + loss.tensor_name() + "' depends on none)"));
    return output{};
  }
  return apply_gradients(pairs);
}

output optimizer::learning_rate_for(graph& g, dtype type, double value) const {
  if (!learning_rate_tensor_.valid())
    return ops::scalar_like(g, type, value, "learning_rate");
  if (learning_rate_tensor_.owner != &g) {
    g.record_error(make_error(errc::invalid_argument,
                              "the optimizer's learning rate tensor '" +
                                learning_rate_tensor_.tensor_name() + "' is from another graph"));
    return ops::scalar_like(g, type, value, "learning_rate");
  }
  if (learning_rate_tensor_.shape().rank_known() && learning_rate_tensor_.shape().rank() != 0)
    g.record_error(make_error(errc::invalid_argument,
                              "the optimizer's learning rate '" + learning_rate_tensor_.tensor_name() +
                                "' must be a scalar, got shape " +
                                learning_rate_tensor_.shape().to_string()));
  return learning_rate_tensor_.type() == type ? learning_rate_tensor_
                                              : ops::cast(learning_rate_tensor_, type, "learning_rate");
}

variable optimizer::make_slot(const variable& var, const std::string& slot, double initial) {
  auto& g = *var.ref.owner;
  auto& var_node = var.ref.producer();
  auto colocation = g.colocate_with(var.ref);
  // Variables have fully defined shapes (VariableV2's attr), so the zeros need no shape op.
  auto& shape = var.ref.shape();
  if (!shape.fully_defined())
    g.record_error(make_error(errc::invalid_argument,
                              "slot '" + slot + "' of variable '" + var_node.name +
                                "': the variable's shape " + shape.to_string() +
                                " is not fully defined"));
  auto slot_name = var_node.name + "/" + slot;
  output start;
  if (initial == 0)
    start = ops::zeros(g, shape.dims(), var.ref.type(), slot_name + "/Initializer/zeros");
  else
    start = ops::fill(g, shape.dims(), ops::scalar_like(g, var.ref.type(), initial, slot_name + "/Initializer/value"),
                      slot_name + "/Initializer/Fill");
  return ops::variable(g, start, slot_name, /*trainable=*/false);
}

output gradient_descent_optimizer::apply_gradients(
  const std::vector<gradient_and_variable>& all_pairs, const std::string& name) {
  auto [gp, pairs] = usable_pairs(all_pairs);
  if (gp == nullptr)
    return output{};
  auto& g = *gp;
  auto scope = g.name_scope(name.empty() ? "GradientDescent" : name);
  std::vector<output> updates;
  for (auto& [grad, var] : pairs) {
    auto update_scope = g.name_scope("update_" + var.name());
    auto colocation = g.colocate_with(var.ref);
    if (is_hash_table(var)) {
      auto lr = learning_rate_for(g, dtype::float32, learning_rate_);
      updates.push_back(hash_table_update(g, "HashEmbeddingApplyGradientDescent", var, grad, {lr}, {}, {}));
      continue;
    }
    auto type = var.ref.type();
    auto alpha = learning_rate_for(g, type, learning_rate_);
    if (auto rows = unique_rows(grad)) {
      updates.push_back(apply_op(g, "SparseApplyGradientDescent", var, {},
                                 {alpha, rows->second, rows->first}));
      continue;
    }
    updates.push_back(apply_op(g, "ApplyGradientDescent", var, {}, {alpha, grad}));
  }
  return group_named_after_scope(g, updates);
}

output momentum_optimizer::apply_gradients(
  const std::vector<gradient_and_variable>& all_pairs, const std::string& name) {
  auto [gp, pairs] = usable_pairs(all_pairs);
  if (gp == nullptr)
    return output{};
  auto& g = *gp;
  std::vector<variable> accumulators;
  for (auto& pair : pairs) {
    if (is_hash_table(pair.second))
      return no_hash_table_update(g, "MomentumOptimizer", pair.second);
    accumulators.push_back(make_slot(pair.second, "Momentum"));
  }
  auto scope = g.name_scope(name.empty() ? "Momentum" : name);
  std::vector<output> updates;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    auto& [grad, var] = pairs[i];
    auto update_scope = g.name_scope("update_" + var.name());
    auto colocation = g.colocate_with(var.ref);
    auto type = var.ref.type();
    auto lr = learning_rate_for(g, type, learning_rate_);
    auto momentum = ops::scalar_like(g, type, momentum_, "momentum");
    if (auto rows = unique_rows(grad)) {
      updates.push_back(apply_op(g, "SparseApplyMomentum", var, {accumulators[i]},
                                 {lr, rows->second, rows->first, momentum},
                                 {{"use_nesterov", use_nesterov_}}));
      continue;
    }
    updates.push_back(apply_op(g, "ApplyMomentum", var, {accumulators[i]}, {lr, grad, momentum},
                               {{"use_nesterov", use_nesterov_}}));
  }
  return group_named_after_scope(g, updates);
}

output adagrad_optimizer::apply_gradients(
  const std::vector<gradient_and_variable>& all_pairs, const std::string& name) {
  auto [gp, pairs] = usable_pairs(all_pairs);
  if (gp == nullptr)
    return output{};
  auto& g = *gp;
  std::vector<variable> accumulators;
  for (auto& pair : pairs)
    accumulators.push_back(is_hash_table(pair.second)
                             ? variable{}
                             : make_slot(pair.second, "Adagrad", initial_accumulator_value_));
  auto scope = g.name_scope(name.empty() ? "Adagrad" : name);
  std::vector<output> updates;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    auto& [grad, var] = pairs[i];
    auto update_scope = g.name_scope("update_" + var.name());
    auto colocation = g.colocate_with(var.ref);
    if (is_hash_table(var)) {
      auto lr = learning_rate_for(g, dtype::float32, learning_rate_);
      updates.push_back(hash_table_update(g, "HashEmbeddingApplyAdagrad", var, grad, {lr}, {},
                                          {{"Adagrad", initial_accumulator_value_}},
                                          {{"initial_accumulator_value", initial_accumulator_value_}}));
      continue;
    }
    auto lr = learning_rate_for(g, var.ref.type(), learning_rate_);
    if (auto rows = unique_rows(grad)) {
      updates.push_back(apply_op(g, "SparseApplyAdagrad", var, {accumulators[i]},
                                 {lr, rows->second, rows->first}));
      continue;
    }
    updates.push_back(apply_op(g, "ApplyAdagrad", var, {accumulators[i]}, {lr, grad}));
  }
  return group_named_after_scope(g, updates);
}

output adam_optimizer::apply_gradients(
  const std::vector<gradient_and_variable>& all_pairs, const std::string& name) {
  auto [gp, pairs] = usable_pairs(all_pairs);
  if (gp == nullptr)
    return output{};
  auto& g = *gp;
  std::vector<std::pair<variable, variable>> moments;
  for (auto& pair : pairs) {
    if (is_hash_table(pair.second))
      return no_hash_table_update(g, "AdamOptimizer", pair.second);
    auto m = make_slot(pair.second, "Adam");
    auto v = make_slot(pair.second, "Adam");
    moments.emplace_back(m, v);
  }
  // TF1 keeps the step's powers of beta next to the variable that sorts first by name.
  auto first_var = std::min_element(pairs.begin(), pairs.end(), [](auto& a, auto& b) {
                     return a.second.name() < b.second.name();
                   })->second;
  auto type = first_var.ref.type();
  auto beta1_power = colocated_scalar_variable(g, "beta1_power", type, beta1_, first_var);
  auto beta2_power = colocated_scalar_variable(g, "beta2_power", type, beta2_, first_var);

  auto scope = g.name_scope(name.empty() ? "Adam" : name);
  std::vector<output> updates;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    auto& [grad, var] = pairs[i];
    auto update_scope = g.name_scope("update_" + var.name());
    auto colocation = g.colocate_with(var.ref);
    auto var_type = var.ref.type();
    // The powers are read through their snapshots; the assigns below wait for every update.
    output b1p = beta1_power.read, b2p = beta2_power.read;
    if (var_type != type) {
      b1p = ops::cast(b1p, var_type, "Cast");
      b2p = ops::cast(b2p, var_type, "Cast_1");
    }
    auto lr = learning_rate_for(g, var_type, learning_rate_);
    auto beta1 = ops::scalar_like(g, var_type, beta1_, "beta1");
    auto beta2 = ops::scalar_like(g, var_type, beta2_, "beta2");
    auto epsilon = ops::scalar_like(g, var_type, epsilon_, "epsilon");
    if (auto rows = lazy_ ? unique_rows(grad) : std::nullopt) {
      updates.push_back(apply_op(g, "SparseApplyAdam", var, {moments[i].first, moments[i].second},
                                 {b1p, b2p, lr, beta1, beta2, epsilon, rows->second, rows->first}));
      continue;
    }
    updates.push_back(apply_op(g, "ApplyAdam", var, {moments[i].first, moments[i].second},
                               {b1p, b2p, lr, beta1, beta2, epsilon, dense_where_applied(grad)}));
  }
  // TF1's _finish: advance the powers once every update has read them. Inside the control
  // dependencies a consumer of the variable ref reads the value when it runs.
  std::vector<output> finish = updates;
  {
    auto after_updates = g.control_dependencies(updates);
    auto colocation = g.colocate_with(beta1_power.ref);
    auto beta1 = ops::scalar_like(g, type, beta1_, "beta1");
    auto next_beta1 = ops::mul(beta1_power.ref, beta1, "mul");
    finish.push_back(ops::assign(beta1_power, next_beta1, "Assign"));
    auto beta2 = ops::scalar_like(g, type, beta2_, "beta2");
    auto next_beta2 = ops::mul(beta2_power.ref, beta2, "mul_1");
    finish.push_back(ops::assign(beta2_power, next_beta2, "Assign_1"));
  }
  return group_named_after_scope(g, finish);
}

output ftrl_optimizer::apply_gradients(const std::vector<gradient_and_variable>& all_pairs,
                                       const std::string& name) {
  auto [gp, pairs] = usable_pairs(all_pairs);
  if (gp == nullptr)
    return output{};
  auto& g = *gp;
  // TF1's FtrlOptimizer refuses these when it is made; here, when its update is built.
  auto refuse = [&](const std::string& what, double value) {
    g.record_error(make_error(errc::invalid_argument, "FtrlOptimizer: " + what + ", got " +
                                                        std::to_string(value)));
    return output{};
  };
  if (!has_learning_rate_tensor() && !(learning_rate_ > 0))
    return refuse("learning_rate must be positive", learning_rate_);
  if (!(learning_rate_power_ <= 0))
    return refuse("learning_rate_power must be zero or negative", learning_rate_power_);
  if (!(initial_accumulator_value_ >= 0))
    return refuse("initial_accumulator_value must be zero or positive", initial_accumulator_value_);
  if (!(l1_ >= 0) || !(l2_ >= 0) || !(l2_shrinkage_ >= 0))
    return refuse("l1, l2 and l2_shrinkage must be zero or positive", std::min({l1_, l2_, l2_shrinkage_}));
  std::vector<std::pair<variable, variable>> slots;
  for (auto& pair : pairs) {
    if (is_hash_table(pair.second)) {
      slots.emplace_back();
      continue;
    }
    auto accum = make_slot(pair.second, "Ftrl", initial_accumulator_value_);
    auto linear = make_slot(pair.second, "Ftrl");
    slots.emplace_back(accum, linear);
  }
  auto scope = g.name_scope(name.empty() ? "Ftrl" : name);
  const bool v2 = l2_shrinkage_ != 0;
  std::vector<output> updates;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    auto& [grad, var] = pairs[i];
    auto update_scope = g.name_scope("update_" + var.name());
    auto colocation = g.colocate_with(var.ref);
    auto type = is_hash_table(var) ? dtype::float32 : var.ref.type();
    std::vector<output> hyper{learning_rate_for(g, type, learning_rate_),
                              ops::scalar_like(g, type, l1_, "l1_regularization_strength"),
                              ops::scalar_like(g, type, l2_, "l2_regularization_strength")};
    if (v2)
      hyper.push_back(ops::scalar_like(g, type, l2_shrinkage_, "l2_shrinkage_regularization_strength"));
    hyper.push_back(ops::scalar_like(g, type, learning_rate_power_, "learning_rate_power"));
    if (is_hash_table(var)) {
      // Its update takes l2_shrinkage always (0: V1's arithmetic).
      if (!v2)
        hyper.insert(hyper.end() - 1, ops::scalar_like(g, type, 0.0, "l2_shrinkage_regularization_strength"));
      updates.push_back(hash_table_update(g, "HashEmbeddingApplyFtrl", var, grad, {}, hyper,
                                          {{"Ftrl", initial_accumulator_value_}, {"Ftrl_1", 0.0}},
                                          {{"initial_accumulator_value", initial_accumulator_value_}}));
      continue;
    }
    std::vector<output> inputs;
    std::string op;
    if (auto rows = unique_rows(grad)) {
      inputs = {rows->second, rows->first};
      op = v2 ? "SparseApplyFtrlV2" : "SparseApplyFtrl";
    } else {
      inputs = {grad};
      op = v2 ? "ApplyFtrlV2" : "ApplyFtrl";
    }
    inputs.insert(inputs.end(), hyper.begin(), hyper.end());
    updates.push_back(apply_op(g, op, var, {slots[i].first, slots[i].second}, inputs));
  }
  return group_named_after_scope(g, updates);
}

} // namespace actorflow

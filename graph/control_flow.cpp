#include "graph/control_flow.hpp"

#include "graph/ops.hpp"

namespace actorflow {

using ops::make;

namespace {

std::pair<int, int> key_of(const output& x) { return {x.node_id, x.index}; }

} // namespace

output while_context::forward_value(const output& x, control_flow_context* where) {
  if (auto* inv = forward_->find_invariant(x))
    return g_.bring_into(where, inv->outer_value);
  std::vector<output> push_indices;
  for (auto* c = static_cast<control_flow_context*>(forward_); c != nullptr; c = c->outer())
    if (auto* w = dynamic_cast<while_context*>(c))
      push_indices.insert(push_indices.begin(), w->variables[0].body_input);
  std::vector<output> pop_indices;
  for (auto* c = static_cast<control_flow_context*>(this); c != nullptr; c = c->outer())
    if (auto* w = dynamic_cast<while_context*>(c); w != nullptr && w->forward() != nullptr)
      pop_indices.insert(pop_indices.begin(), w->forward_iteration);
  if (push_indices.size() != pop_indices.size()) {
    g_.record_error(make_error(errc::internal, "gradients: '" + x.tensor_name() + "' is inside " +
                                                std::to_string(push_indices.size()) +
                                                " loops but its gradient inside " +
                                                std::to_string(pop_indices.size())));
    return x;
  }
  // The push's own (unique) name names the stack.
  auto stack_name = g_.unique_name(x.name() + "_push");
  {
    // Pushed where x lives (a branch pushes only in iterations that take it).
    auto in_forward = g_.enter_context(g_.context_of(x.node_id));
    node_spec spec;
    spec.op = "StackPush";
    spec.name = stack_name;
    spec.exact_name = true;
    spec.inputs = {x};
    spec.inputs.insert(spec.inputs.end(), push_indices.begin(), push_indices.end());
    spec.attrs = {{"stack_name", stack_name}, {"colocate_with", x.name()}};
    g_.add_node(std::move(spec));
  }
  // Popped where it is used: in a gradient branch, only iterations that took the branch pop.
  auto in_backward = g_.enter_context(where);
  node_spec spec;
  spec.op = "StackPop";
  spec.name = x.name() + "_pop";
  spec.inputs = pop_indices;
  spec.attrs = {{"stack_name", stack_name},
                {"dtype", x.type()},
                {"shape", x.shape()},
                {"colocate_with", stack_name},
                {"kernel_dtype", x.type()}};
  return g_.output_of(g_.add_node(std::move(spec)));
}

while_context* enclosing_while(control_flow_context* context) {
  for (auto* c = context; c != nullptr; c = c->outer())
    if (auto* w = dynamic_cast<while_context*>(c))
      return w;
  return nullptr;
}

// --- capturing_context -----------------------------------------------------------------------

output capturing_context::capture(const output& x) {
  if (inside_.count(key_of(x)) > 0)
    return x;
  if (auto i = captured_.find(key_of(x)); i != captured_.end())
    return i->second;
  // A forward loop's value in its backward loop (or in a gradient branch there): popped here,
  // so a branch pops only in iterations that took it (whose forward pass pushed it).
  auto* made_in = g_.context_of(x.node_id);
  auto* backward = enclosing_while(this);
  output value;
  if (backward != nullptr && backward->forward() != nullptr && made_in != nullptr &&
      made_in->is_within(backward->forward()))
    value = backward->forward_value(x, this);
  else
    value = bring_in(g_.bring_into(outer(), x));
  captured_[key_of(x)] = value;
  inside_.insert(key_of(value));
  return value;
}

// --- cond_context ----------------------------------------------------------------------------

cond_context::cond_context(graph& g, control_flow_context* outer, output pred, int branch,
                           std::string name)
  : capturing_context(g, outer), pred_(pred), branch_(branch), name_(std::move(name)) {}

output cond_context::bring_in(const output& outer_value) {
  // The Switch runs where the cond was called, beside its value (TensorFlow's): a branch on
  // another device receives the switched value, dead (a few bytes) when not taken, instead of
  // the value itself. Only its selected output is inside.
  auto in_outer = g_.enter_context(outer());
  auto beside = g_.colocate_with(outer_value);
  auto taken = ops::switch_(outer_value, pred_).first;
  taken.index = branch_;
  return taken;
}

cond_context* make_cond_branch(graph& g, control_flow_context* outer, output pred,
                               output pivot_source, int branch, const std::string& name) {
  auto* context = g.add_context(std::make_unique<cond_context>(g, outer, pred, branch, name));
  auto pivot = ops::identity(pivot_source, branch == 1 ? "switch_t" : "switch_f");
  g.set_context_of(pivot.node_id, context);
  context->set_pivot(pivot.node_id);
  context->add_inside(pivot);
  return context;
}

cond_context* cond_context::gradient_branch(while_context& backward) {
  if (auto i = gradient_branches_.find(&backward); i != gradient_branches_.end())
    return i->second;
  control_flow_context* outer_gradient = &backward;
  if (auto* enclosing = dynamic_cast<cond_context*>(outer()))
    outer_gradient = enclosing->gradient_branch(backward);
  cond_context* made = nullptr;
  {
    auto in_outer = g_.enter_context(outer_gradient);
    auto scope = g_.name_scope("cond_grad");
    auto pred = g_.bring_into(outer_gradient, pred_);
    auto switched = ops::switch_(pred, pred, "switch_pred");
    made = make_cond_branch(g_, outer_gradient, pred, branch_ == 1 ? switched.second : switched.first,
                            branch_, name_ + "_grad");
  }
  gradient_branches_[&backward] = made;
  return made;
}

// --- while_context ---------------------------------------------------------------------------

while_context::while_context(graph& g, control_flow_context* outer, std::string frame_name,
                             std::int64_t parallel_iterations)
  : capturing_context(g, outer), frame_name_(std::move(frame_name)),
    parallel_iterations_(parallel_iterations) {}

const while_context::invariant* while_context::find_invariant(const output& inside_value) const {
  for (auto& inv : invariants_)
    if (key_of(inv.inside_value) == key_of(inside_value))
      return &inv;
  return nullptr;
}

output while_context::bring_in(const output& outer_value) {
  output entered;
  {
    // The Enter runs in the outer frame; its output is in this one, for every iteration.
    auto in_outer = g_.enter_context(outer());
    entered = make(g_, "Enter", "Enter", {outer_value},
                   {{"frame_name", frame_name_},
                    {"is_constant", true},
                    {"parallel_iterations", parallel_iterations_}});
  }
  g_.set_context_of(entered.node_id, this);
  invariants_.push_back({outer_value, entered});
  return entered;
}

namespace ops {

// --- primitives ------------------------------------------------------------------------------

std::pair<output, output> switch_(output data, output pred, const std::string& name) {
  auto out = make(*data.owner, "Switch", name, {data, pred});
  return {out, output{out.owner, out.node_id, 1}};
}

std::pair<output, output> merge(const std::vector<output>& inputs, const std::string& name) {
  // A Merge joins branches (or a loop's entry and back edge): its inputs are used as they come,
  // not brought into the current context.
  node_spec spec;
  spec.op = "Merge";
  spec.name = name;
  spec.inputs = inputs;
  spec.inputs_from_other_contexts = true;
  auto& g = *inputs.at(0).owner;
  auto out = g.output_of(g.add_node(std::move(spec)));
  return {out, output{out.owner, out.node_id, 1}};
}

// --- cond ------------------------------------------------------------------------------------

std::vector<output> cond(output pred, const std::function<std::vector<output>()>& true_fn,
                         const std::function<std::vector<output>()>& false_fn,
                         const std::string& name) {
  if (!pred.valid())
    return {};
  auto& g = *pred.owner;
  auto scope = g.name_scope(name);
  auto* outer = g.current_context();
  pred = g.bring_into(outer, pred);
  if (pred.type() != dtype::boolean || (pred.shape().rank_known() && pred.shape().rank() != 0)) {
    g.record_error(make_error(errc::invalid_argument,
                              "cond '" + g.current_scope() + "': the predicate '" +
                                pred.tensor_name() + "' must be a bool scalar, got " +
                                to_string(pred.type()) + " " + pred.shape().to_string()));
    return {};
  }
  // Each branch's pivot is the predicate switched into it: live only in the taken branch.
  auto [pred_false, pred_true] = switch_(pred, pred, "switch_pred");
  std::vector<output> results[2];
  const std::function<std::vector<output>()>* fns[2] = {&false_fn, &true_fn};
  output pivots[2] = {pred_false, pred_true};
  for (int branch : {1, 0}) {
    auto* context = make_cond_branch(g, outer, pred, pivots[branch], branch,
                                     g.current_scope() + (branch == 1 ? "/true" : "/false"));
    auto inside = g.enter_context(context);
    results[branch] = (*fns[branch])();
    // Each result is the branch's own node (an outside value comes in switched), dead when
    // the branch is not taken; a Merge's gradient finds the branch from it.
    for (auto& r : results[branch])
      r = ops::identity(r, "output");
  }
  if (results[0].size() != results[1].size()) {
    g.record_error(make_error(errc::invalid_argument,
                              "cond '" + g.current_scope() + "': the true branch returns " +
                                std::to_string(results[1].size()) + " values, the false branch " +
                                std::to_string(results[0].size())));
    return {};
  }
  std::vector<output> merged;
  for (std::size_t i = 0; i < results[0].size(); ++i) {
    if (results[0][i].type() != results[1][i].type()) {
      g.record_error(make_error(errc::invalid_argument,
                                "cond '" + g.current_scope() + "': output " + std::to_string(i) +
                                  " is " + to_string(results[1][i].type()) +
                                  " in the true branch and " + to_string(results[0][i].type()) +
                                  " in the false one"));
      return {};
    }
    merged.push_back(ops::merge({results[0][i], results[1][i]}, "Merge").first);
  }
  return merged;
}

output cond(output pred, const std::function<output()>& true_fn,
            const std::function<output()>& false_fn, const std::string& name) {
  auto results = cond(
    pred, [&] { return std::vector<output>{true_fn()}; },
    [&] { return std::vector<output>{false_fn()}; }, name);
  return results.empty() ? output{} : results[0];
}

// --- while_loop ------------------------------------------------------------------------------

std::vector<output> while_loop(const loop_condition& cond, const loop_body& body,
                               const std::vector<output>& loop_vars, const while_options& options) {
  if (loop_vars.empty() || !loop_vars[0].valid())
    return {};
  auto& g = *loop_vars[0].owner;
  auto scope = g.name_scope(options.name);
  if (options.parallel_iterations < 1) {
    g.record_error(make_error(errc::invalid_argument, "while loop '" + g.current_scope() +
                                                        "': parallel_iterations must be at least 1"));
    return {};
  }
  auto* context = g.add_context(std::make_unique<while_context>(
    g, g.current_context(), g.current_scope(), options.parallel_iterations));
  return build_while_loop(*context, cond, body, loop_vars, options);
}

} // namespace ops

std::vector<output> build_while_loop(while_context& context_ref, const ops::loop_condition& cond,
                                     const ops::loop_body& body, const std::vector<output>& loop_vars,
                                     const ops::while_options& options) {
  using namespace ops;
  auto& g = *loop_vars.at(0).owner;
  auto frame = context_ref.frame_name();
  auto fail = [&](const std::string& message) {
    g.record_error(make_error(errc::invalid_argument, "while loop '" + frame + "': " + message));
    return std::vector<output>{};
  };
  if (!options.shape_invariants.empty() && options.shape_invariants.size() != loop_vars.size())
    return fail("has " + std::to_string(loop_vars.size()) + " loop variables but " +
                std::to_string(options.shape_invariants.size()) + " shape invariants");
  auto* outer = g.current_context();
  std::vector<output> initial{ops::constant(g, std::int32_t{0}, "iteration_counter")};
  for (auto& v : loop_vars) {
    if (!v.valid() || v.owner != &g)
      return fail("a loop variable is missing or from another graph");
    initial.push_back(g.bring_into(outer, v));
  }
  auto* context = &context_ref;
  auto& vars = context->variables;
  vars.resize(initial.size());
  for (std::size_t i = 0; i < initial.size(); ++i) {
    auto entered = make(g, "Enter", "Enter", {initial[i]},
                        {{"frame_name", frame},
                         {"is_constant", false},
                         {"parallel_iterations", options.parallel_iterations}});
    g.set_context_of(entered.node_id, context);
    context->add_inside(entered);
    vars[i].enter = entered.node_id;
  }
  auto inside = g.enter_context(context);
  std::vector<output> merged;
  for (std::size_t i = 0; i < vars.size(); ++i) {
    auto entered = g.output_of(vars[i].enter);
    // The second input becomes the NextIteration once the body exists.
    auto m = merge({entered, entered}).first;
    vars[i].merge = m.node_id;
    if (i > 0 && !options.shape_invariants.empty()) {
      auto& invariant = options.shape_invariants[i - 1];
      if (!invariant.is_compatible_with(entered.shape()))
        return fail("loop variable " + std::to_string(i - 1) + " has shape " +
                    entered.shape().to_string() + ", not compatible with its shape invariant " +
                    invariant.to_string());
      g.at(m.node_id).output_shapes[0] = invariant;
    }
    merged.push_back(m);
  }
  // Nodes without inputs in the condition run once per iteration, after the counter's Merge.
  context->set_pivot(vars[0].merge);
  auto pred = cond(std::vector<output>(merged.begin() + 1, merged.end()));
  if (!pred.valid())
    return fail("the condition returned no value");
  pred = g.bring_into(context, pred);
  if (pred.type() != dtype::boolean || (pred.shape().rank_known() && pred.shape().rank() != 0))
    return fail(std::string{"the condition must return a bool scalar, got "} + to_string(pred.type()) + " " +
                pred.shape().to_string());
  if (options.maximum_iterations) {
    auto limit = ops::constant(g, static_cast<std::int32_t>(*options.maximum_iterations),
                               "maximum_iterations");
    pred = logical_and(less(merged[0], limit), pred);
  }
  auto loop_cond = make(g, "LoopCond", "LoopCond", {pred});
  context->loop_cond = loop_cond.node_id;
  std::vector<output> body_inputs;
  for (std::size_t i = 0; i < vars.size(); ++i) {
    auto [to_exit, to_body] = switch_(merged[i], loop_cond);
    vars[i].switch_node = to_exit.node_id;
    auto leaving = make(g, "Exit", "Exit", {to_exit});
    g.set_context_of(leaving.node_id, outer);
    vars[i].exit = leaving.node_id;
    auto body_input = ops::identity(to_body);
    vars[i].body_input = body_input;
    body_inputs.push_back(body_input);
  }
  context->set_pivot(vars[0].body_input.node_id);
  auto next_counter = ops::add(body_inputs[0], ops::constant(g, std::int32_t{1}, "one"));
  auto results = body(std::vector<output>(body_inputs.begin() + 1, body_inputs.end()));
  if (results.size() != loop_vars.size())
    return fail("the body returned " + std::to_string(results.size()) + " values for " +
                std::to_string(loop_vars.size()) + " loop variables");
  results.insert(results.begin(), next_counter);
  for (std::size_t i = 0; i < vars.size(); ++i) {
    auto result = g.bring_into(context, results[i]);
    auto& m = g.at(vars[i].merge);
    if (!result.valid())
      return fail("the body returned an invalid value for loop variable " + std::to_string(i - 1));
    if (result.type() != m.output_types[0])
      return fail(std::string{"the body returned a "} + to_string(result.type()) + " value for loop variable " +
                  std::to_string(i - 1) + ", which is " + to_string(m.output_types[0]));
    if (!m.output_shapes[0].is_compatible_with(result.shape()) ||
        (options.shape_invariants.empty() && result.shape().rank_known() &&
         m.output_shapes[0].rank_known() && m.output_shapes[0] != result.shape() &&
         m.output_shapes[0].fully_defined()))
      return fail("loop variable " + std::to_string(i - 1) + " enters the loop with shape " +
                  m.output_shapes[0].to_string() + " but has shape " +
                  result.shape().to_string() +
                  " after an iteration; give a shape invariant to allow that");
    auto next = make(g, "NextIteration", "NextIteration", {result});
    vars[i].next_iteration = next.node_id;
    vars[i].body_output = result;
    m.inputs[1] = edge_source{next.node_id, 0};
  }
  std::vector<output> exits;
  for (std::size_t i = 1; i < vars.size(); ++i)
    exits.push_back(g.output_of(vars[i].exit));
  return exits;
}


} // namespace actorflow

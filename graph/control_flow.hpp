#pragma once
/// Control flow in graphs, TensorFlow 1.x style: conditionals and while loops built from the
/// primitives Switch, Merge, Enter, Exit, NextIteration and LoopCond (graph/control_flow_ops.cpp).
///   auto y = ops::cond(x_positive, [&] { return x * 2.0; }, [&] { return -x; });
///   auto out = ops::while_loop(
///     [](const std::vector<output>& v) { return ops::less(v[0], 10.0); },
///     [](const std::vector<output>& v) { return std::vector<output>{v[0] + 1.0, v[1] * v[1]}; },
///     {i0, x});
/// Only the taken branch of a cond runs; the other receives "dead" tensors, which are never
/// computed on and make whatever consumes them dead too, until a Merge takes the live input.
/// A while loop runs in a frame of its own; each iteration's tensors are separate, and at most
/// parallel_iterations iterations are alive at once. Tensors made outside a branch or a loop and
/// used inside are brought in automatically (a Switch on the predicate, an Enter of the whole
/// value for every iteration); the branch and loop functions run once, at build time.
/// Gradients (graph/gradients.hpp) go through both: a cond's through its Switches and Merges, a
/// while loop's by a backward loop that pops the forward values it needs from stacks the
/// forward loop pushes them to, one entry per iteration (docs/design.md, "Control flow").

#include "graph/graph.hpp"

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace actorflow {

class while_context;

/// What a cond's branch and a while loop share: the values usable inside, and how an outside
/// value comes in (capture, once per value): a forward loop's value in a gradient's backward
/// loop is popped there (while_context::set_forward); any other is brought into the outer
/// context first, then in by bring_in (a Switch, an Enter).
class capturing_context : public control_flow_context {
public:
  capturing_context(graph& g, control_flow_context* outer) : control_flow_context(outer), g_(g) {}
  output capture(const output& x) final;
  int pivot() const final { return pivot_; }
  void set_pivot(int node_id) { pivot_ = node_id; }
  /// Marks `x` as usable inside as it is (a pivot's own output, an Enter's).
  void add_inside(const output& x) { inside_.insert({x.node_id, x.index}); }

protected:
  /// `outer_value`, already in the outer context, as the nodes inside see it.
  virtual output bring_in(const output& outer_value) = 0;
  graph& g_;

private:
  int pivot_ = -1;
  std::map<std::pair<int, int>, output> captured_;
  std::set<std::pair<int, int>> inside_;
};

/// One branch of a cond: inputs from outside come through Switch(x, pred):branch.
class cond_context final : public capturing_context {
public:
  cond_context(graph& g, control_flow_context* outer, output pred, int branch, std::string name);
  std::string describe() const override { return "cond branch '" + name_ + "'"; }

  const output& pred() const { return pred_; }
  /// 1 for the true branch, 0 for the false one (the Switch output it takes).
  int branch() const { return branch_; }

  /// This branch (inside a loop's body) as the backward loop `backward` sees it: a branch of
  /// its own on the forward predicate popped there, where the gradients of this branch's ops
  /// are built (live, and popping forward values, only in iterations that took the branch).
  /// Made once per backward loop.
  cond_context* gradient_branch(while_context& backward);

protected:
  output bring_in(const output& outer_value) override;

private:
  output pred_;
  int branch_;
  std::string name_;
  std::map<while_context*, cond_context*> gradient_branches_;
};

/// A branch of a cond on `pred` (in `outer`), with its pivot: what cond() makes twice.
cond_context* make_cond_branch(graph& g, control_flow_context* outer, output pred, output pivot_source,
                               int branch, const std::string& name);

/// A while loop's frame. Nodes whose outputs live in the frame belong to it: the Enters (their
/// outputs are inside), Merges, Switches, the body; Exits belong to the outer context.
class while_context final : public capturing_context {
public:
  while_context(graph& g, control_flow_context* outer, std::string frame_name,
                std::int64_t parallel_iterations);
  std::string describe() const override { return "while loop '" + frame_name_ + "'"; }

  const std::string& frame_name() const { return frame_name_; }
  std::int64_t parallel_iterations() const { return parallel_iterations_; }

  /// Per loop variable, index 0 being the iteration counter every loop carries (int32, from 0):
  /// its Enter, Merge, Switch, Exit and NextIteration nodes, the Identity the body reads and the
  /// body's result.
  struct loop_variable {
    int enter = -1;
    int merge = -1;
    int switch_node = -1;
    int exit = -1;
    int next_iteration = -1;
    output body_input;
    output body_output;
  };
  std::vector<loop_variable> variables;
  int loop_cond = -1;

  /// Values from outside that every iteration reads: the outer value and the Enter's output.
  struct invariant {
    output outer_value;
    output inside_value;
  };
  const std::vector<invariant>& invariants() const { return invariants_; }
  /// The invariant whose Enter makes `inside_value`, if it is one.
  const invariant* find_invariant(const output& inside_value) const;

  /// Makes this loop the backward loop of `forward`: a value of the forward loop's body used
  /// inside (in this loop, or in a branch within it) is obtained from forward_value.
  void set_forward(while_context* forward) { forward_ = forward; }
  while_context* forward() const { return forward_; }
  /// In a backward loop, forward value `x` in `where` (this loop or a branch inside it): a loop
  /// invariant is brought in from outside as it is; any other value is pushed by the forward
  /// loop in every iteration that computes it, under the iteration numbers of the loops around
  /// it, and popped under the numbers of the iterations it mirrors.
  output forward_value(const output& x, control_flow_context* where);
  /// In a backward loop: the forward iteration the current iteration mirrors (int32); set by
  /// the gradient while the body is built.
  output forward_iteration;

protected:
  /// A loop invariant: an Enter of the whole value for every iteration.
  output bring_in(const output& outer_value) override;

private:
  std::string frame_name_;
  std::int64_t parallel_iterations_;
  std::vector<invariant> invariants_;
  while_context* forward_ = nullptr;
};

/// The innermost while loop enclosing `context` (itself included); null for none.
while_context* enclosing_while(control_flow_context* context);

namespace ops {

// --- primitives ------------------------------------------------------------------------------

/// "Switch": {output_false, output_true}; the one not selected by pred is dead.
std::pair<output, output> switch_(output data, output pred, const std::string& name = "Switch");
/// "Merge": {output, value_index}.
std::pair<output, output> merge(const std::vector<output>& inputs, const std::string& name = "Merge");

/// The comparisons, LogicalAnd/LogicalNot and Gather a loop's condition and body use are in
/// graph/ops.hpp.

// --- cond and while_loop ---------------------------------------------------------------------

/// tf.cond: the outputs of true_fn where pred (a bool scalar) is true, else of false_fn. Both
/// functions must return as many outputs, of matching dtypes. Only the taken branch runs.
std::vector<output> cond(output pred, const std::function<std::vector<output>()>& true_fn,
                         const std::function<std::vector<output>()>& false_fn,
                         const std::string& name = "cond");
output cond(output pred, const std::function<output()>& true_fn,
            const std::function<output()>& false_fn, const std::string& name = "cond");

struct while_options {
  /// How many iterations may run at once (TensorFlow's default).
  std::int64_t parallel_iterations = 10;
  /// Stops the loop after this many iterations even when the condition still holds.
  std::optional<std::int64_t> maximum_iterations;
  /// Per loop variable, a shape every iteration's value has (unknown dimensions allowed); by
  /// default each iteration must keep the initial value's static shape.
  std::vector<tensor_shape> shape_invariants;
  std::string name = "while";
};

using loop_condition = std::function<output(const std::vector<output>&)>;
using loop_body = std::function<std::vector<output>(const std::vector<output>&)>;

/// tf.while_loop: repeats body while cond holds, starting from loop_vars; returns the final
/// values. body returns one value per loop variable, of its dtype and shape (or shape
/// invariant). Errors (a body changing a shape, a non-bool condition) are recorded in the
/// graph's status, naming the loop and the variable.
std::vector<output> while_loop(const loop_condition& cond, const loop_body& body,
                               const std::vector<output>& loop_vars,
                               const while_options& options = {});

} // namespace ops

/// What while_loop does once it has made its context (whose outer context is the current
/// one, in the loop's name scope): builds the loop there. Gradients build backward loops with
/// it, in a context that pops forward values.
std::vector<output> build_while_loop(while_context& context, const ops::loop_condition& cond,
                                     const ops::loop_body& body, const std::vector<output>& loop_vars,
                                     const ops::while_options& options);

} // namespace actorflow

#pragma once
/// Symbolic reverse-mode differentiation (TensorFlow 1.x's tf.gradients).
///   auto loss = ops::reduce_mean(ops::square(pred - y));
///   auto grads = gradients(loss, {w.ref, b.ref});     // one output per x
///   // grads[0] has w's shape; an x that loss does not depend on gets an invalid output.
/// Gradient nodes go under the name scope "gradients" ("gradients/mul_grad/Mul", ...). As in
/// TensorFlow 1.x they are made in the device scope (string or function) and colocation scope
/// active where gradients() is called, like any other node:
///   { auto dev = g.device("/job:worker/task:1"); grads = gradients(loss, xs); }  // all there
/// With gradient_options::colocate_gradients_with_ops each op's gradient nodes go on that op's
/// device instead.

#include "graph/graph.hpp"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace actorflow {

/// How gradients() builds the gradient graph (the keyword arguments of TF1's tf.gradients).
struct gradient_options {
  /// false (TensorFlow's default): every gradient node, the seeds of the ys and the AddN nodes
  /// that sum several incoming gradients included, requests the device that the graph's device
  /// scopes give it where gradients() is called; outside any scope it requests none. true: the
  /// nodes for an op (its gradient and the sums of its output gradients) request the op's
  /// assigned device, or its requested one before placement, merged into the caller's scopes;
  /// the seed of a y goes beside y's producer. A colocate_with scope around the call wins in
  /// both cases.
  bool colocate_gradients_with_ops = false;
};

/// d(sum of ys)/d(x) for every x. `grad_ys`, when given, seeds each y (default: ones of y's
/// shape). Where the new nodes go: see gradient_options. Errors (an op on the path without a
/// gradient: "no gradient registered for op 'ArgMax' (node 'ArgMax')") are recorded in the
/// graph's status and the result holds invalid outputs.
std::vector<output> gradients(const std::vector<output>& ys, const std::vector<output>& xs,
                              const std::vector<output>& grad_ys = {},
                              const gradient_options& options = {});
inline std::vector<output> gradients(output y, const std::vector<output>& xs,
                                     const gradient_options& options = {}) {
  return gradients(std::vector<output>{y}, xs, {}, options);
}

/// Builds the gradients of one op. `grad_outputs[i]` is the gradient flowing into output i
/// (invalid when nothing flows there); fill `grad_inputs[j]` for each input j that has one
/// (leave it invalid otherwise). `op` is the forward node; its inputs are g.output_of(...).
using gradient_function = std::function<status(graph& g, const node& op,
                                               const std::vector<output>& grad_outputs,
                                               std::vector<output>& grad_inputs)>;

/// Input `i` of forward node `op` as an output: what a gradient function reads its op's inputs by.
output input_of(graph& g, const node& op, int i);

/// The registry of gradient functions by op name; filled with every differentiable standard op
/// on first use. Ops registered as not differentiable (ArgMax, Equal, random ops, ...) stop
/// gradients without an error.
class gradient_registry {
public:
  static gradient_registry& global();
  void add(const std::string& op, gradient_function fn);
  void add_not_differentiable(const std::string& op);
  const gradient_function* find(const std::string& op) const;
  bool is_not_differentiable(const std::string& op) const;

private:
  std::map<std::string, gradient_function> functions_;
  std::set<std::string> stops_;
};

} // namespace actorflow

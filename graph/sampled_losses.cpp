// Sampled losses (graph/sampled_losses.hpp): the ops' definitions, their builders and gradients.
//   LogUniformCandidateSampler(true_classes [batch, num_true] int64)   attrs num_true,
//       num_sampled, unique, range_max, seed, seed2; outputs candidates [num_sampled] int64,
//       true_expected_count [batch, num_true], sampled_expected_count [num_sampled] (float32)
//   SigmoidCrossEntropyWithLogits(logits, labels)                        elementwise
//   _AccidentalHitMask(true_classes [batch, num_true], candidates [s])  attr dtype: [batch, s],
//       a very negative number where a candidate is one of the example's true classes, else 0
// The losses follow TF's _compute_sampled_logits: the true and the sampled classes' rows come
// from two embedding lookups of the same tables, so the tables' gradients are sparse.
#include "graph/sampled_losses.hpp"

#include "graph/gradients.hpp"
#include "graph/op_registry.hpp"
#include "graph/ops.hpp"
#include "graph/sparse_ops.hpp"

namespace actorflow {

namespace {

status error(const std::string& message) { return make_error(errc::invalid_argument, message); }

graph& graph_of(const output& x) { return *x.owner; }

/// d/dx = dy * (sigmoid(x) - z); d/dz = -dy * x.
status sigmoid_xent_grad(graph& g, const node& op, const std::vector<output>& dy,
                         std::vector<output>& dx) {
  auto x = input_of(g, op, 0);
  auto z = input_of(g, op, 1);
  dx[0] = ops::mul(dy[0], ops::sub(ops::sigmoid(x, "Sigmoid"), z, "sub"), "mul");
  dx[1] = ops::mul(ops::neg(dy[0], "Neg"), x, "mul_1");
  return {};
}

/// The logits of the true classes [batch, num_true] and of the candidates [batch, num_sampled]
/// side by side, and their labels (1 / num_true for the true ones, 0 for the others).
std::pair<output, output> sampled_logits(const actorflow::variable& weights,
                                         const actorflow::variable& biases, output labels,
                                         output inputs, int num_sampled, std::int64_t num_classes,
                                         const ops::sampled_loss_options& options,
                                         bool remove_hits) {
  auto& g = graph_of(inputs);
  auto& w_shape = weights.ref.shape();
  if (!w_shape.fully_defined() || w_shape.rank() != 2 || w_shape.dim(0) != num_classes) {
    g.record_error(error("sampled loss: weights '" + weights.name() + "' of shape " +
                         w_shape.to_string() + " are not [num_classes = " +
                         std::to_string(num_classes) + ", dim]"));
    return {};
  }
  auto dim = w_shape.dim(1);
  auto num_true = options.num_true;
  auto labels_2d = ops::reshape(labels, {-1, num_true}, "labels");
  auto drawn = options.sampled ? *options.sampled
                               : ops::log_uniform_candidate_sampler(labels_2d, num_true, num_sampled,
                                                                    true, num_classes, options.seed);
  auto true_w = ops::embedding_lookup(weights, labels_2d, "true_w");         // [batch, num_true, dim]
  auto true_b = ops::embedding_lookup(biases, labels_2d, "true_b");          // [batch, num_true]
  auto sampled_w = ops::embedding_lookup(weights, drawn.candidates, "sampled_w");  // [s, dim]
  auto sampled_b = ops::embedding_lookup(biases, drawn.candidates, "sampled_b");   // [s]
  if (!sampled_b.valid())
    return {};
  auto row = ops::reshape(inputs, {-1, 1, dim}, "Reshape");
  auto true_logits = ops::sub(ops::add(ops::reduce_sum(ops::mul(true_w, row), {2}), true_b),
                              ops::log(drawn.true_expected_count, "Log"), "true_logits");
  auto sampled = ops::sub(ops::add(ops::matmul(inputs, sampled_w, false, true), sampled_b),
                          ops::log(drawn.sampled_expected_count, "Log_1"), "sampled_logits");
  if (remove_hits)
    sampled = ops::add(sampled, ops::make(g, "_AccidentalHitMask", "AccidentalHitMask",
                                          {labels_2d, drawn.candidates},
                                          {{"dtype", sampled.type()}}));
  auto logits = ops::concat({true_logits, sampled}, 1, "logits");
  auto true_labels = ops::mul(ops::make(g, "OnesLike", "OnesLike", {true_logits}),
                              ops::scalar_like(g, true_logits.type(), 1.0 / num_true, "per_true"));
  auto targets = ops::concat({true_labels, ops::make(g, "ZerosLike", "ZerosLike", {sampled})}, 1,
                             "labels_1");
  return {logits, targets};
}

} // namespace

void register_sampled_loss_ops(op_registry& r) {
  {
    op_def def{"LogUniformCandidateSampler", 1, /*stateful=*/true, false, [](shape_context& c) {
      if (c.input_types[0] != dtype::int64)
        return error(std::string{"LogUniformCandidateSampler true_classes must be int64, got "} +
                     to_string(c.input_types[0]));
      auto sampled = c.n.attr_or<std::int64_t>("num_sampled", 0);
      auto range = c.n.attr_or<std::int64_t>("range_max", 0);
      if (sampled < 1 || range < 1)
        return error("LogUniformCandidateSampler needs num_sampled and range_max of at least 1");
      if (c.n.attr_or<bool>("unique", true) && sampled > range)
        return error("LogUniformCandidateSampler: " + std::to_string(sampled) +
                     " unique candidates out of a range of " + std::to_string(range));
      c.set_output(0, dtype::int64, tensor_shape{std::vector<std::int64_t>{sampled}});
      c.set_output(1, dtype::float32, c.input_shapes[0]);
      c.set_output(2, dtype::float32, tensor_shape{std::vector<std::int64_t>{sampled}});
      return status{};
    }};
    r.add(std::move(def));
  }
  r.add(op_def{"SigmoidCrossEntropyWithLogits", 2, false, false, [](shape_context& c) {
    if (!is_floating(c.input_types[0]) || c.input_types[1] != c.input_types[0])
      return error("SigmoidCrossEntropyWithLogits takes float logits and labels of one dtype");
    if (!c.input_shapes[0].is_compatible_with(c.input_shapes[1]))
      return error("SigmoidCrossEntropyWithLogits: logits " + c.input_shapes[0].to_string() +
                   " and labels " + c.input_shapes[1].to_string() + " differ in shape");
    c.set_output(0, c.input_types[0], c.input_shapes[0]);
    return status{};
  }});
  r.add(op_def{"_AccidentalHitMask", 2, false, false, [](shape_context& c) {
    auto type = c.n.attr_or<dtype>("dtype", dtype::float32);
    auto& labels = c.input_shapes[0];
    auto& candidates = c.input_shapes[1];
    auto batch = labels.rank_known() && labels.rank() == 2 ? labels.dim(0) : -1;
    auto sampled = candidates.rank_known() && candidates.rank() == 1 ? candidates.dim(0) : -1;
    c.set_output(0, type, tensor_shape{std::vector<std::int64_t>{batch, sampled}});
    return status{};
  }});
}

void register_sampled_loss_gradients(gradient_registry& r) {
  r.add("SigmoidCrossEntropyWithLogits", sigmoid_xent_grad);
  r.add_not_differentiable("LogUniformCandidateSampler");
  r.add_not_differentiable("_AccidentalHitMask");
}

namespace ops {

sampled_values log_uniform_candidate_sampler(output true_classes, int num_true, int num_sampled,
                                             bool unique, std::int64_t range_max,
                                             std::optional<std::int64_t> seed,
                                             const std::string& name) {
  auto& g = graph_of(true_classes);
  auto [seed1, seed2] = random_seeds(g, seed);
  auto first = make(g, "LogUniformCandidateSampler", name, {true_classes},
                    {{"num_true", std::int64_t{num_true}},
                     {"num_sampled", std::int64_t{num_sampled}},
                     {"unique", unique},
                     {"range_max", range_max},
                     {"seed", seed1},
                     {"seed2", seed2}});
  return {first, g.output_of(first.node_id, 1), g.output_of(first.node_id, 2)};
}

output sigmoid_cross_entropy_with_logits(output logits, output labels, const std::string& name) {
  return make(graph_of(logits), "SigmoidCrossEntropyWithLogits", name, {logits, labels});
}

output nce_loss(const actorflow::variable& weights, const actorflow::variable& biases,
                output labels, output inputs, int num_sampled, std::int64_t num_classes,
                const sampled_loss_options& options, const std::string& name) {
  auto& g = graph_of(inputs);
  auto scope = g.name_scope(name);
  auto [logits, targets] = sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes,
                                          options, options.remove_accidental_hits.value_or(false));
  if (!logits.valid())
    return {};
  return reduce_sum(sigmoid_cross_entropy_with_logits(logits, targets, "sampled_losses"), {1}, false,
                    "Sum");
}

output sampled_softmax_loss(const actorflow::variable& weights, const actorflow::variable& biases,
                            output labels, output inputs, int num_sampled,
                            std::int64_t num_classes, const sampled_loss_options& options,
                            const std::string& name) {
  auto& g = graph_of(inputs);
  auto scope = g.name_scope(name);
  auto [logits, targets] = sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes,
                                          options, options.remove_accidental_hits.value_or(true));
  if (!logits.valid())
    return {};
  return softmax_cross_entropy_with_logits(logits, targets, "sampled_losses");
}

} // namespace ops

} // namespace actorflow

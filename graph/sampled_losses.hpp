#pragma once
/// Losses over a sample of a large vocabulary (TensorFlow's tf.nn.nce_loss and
/// tf.nn.sampled_softmax_loss) and their candidate sampler: each step scores the true classes
/// and num_sampled others drawn from a log-uniform (Zipf) distribution, so that a step costs
/// num_sampled + num_true rows of the output table instead of all of them; the rows are
/// embedding lookups, so their gradients are sparse and only those rows cross the network.
///   auto loss = ops::reduce_mean(ops::nce_loss(nce_w, nce_b, labels, embedded, 64, vocabulary));

#include "graph/graph.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace actorflow {

/// What a candidate sampler drew (TF's sampled_values): the candidates [num_sampled] (int64),
/// and the expected count of each true class [batch, num_true] and of each candidate
/// [num_sampled] (float32) among the draws.
struct sampled_values {
  output candidates;
  output true_expected_count;
  output sampled_expected_count;
};

namespace ops {

/// "LogUniformCandidateSampler" (TF's): num_sampled classes in [0, range_max) with
/// P(k) = log((k + 2) / (k + 1)) / log(range_max + 1), all distinct when `unique` (drawn until
/// num_sampled distinct ones came, the expected counts then -expm1(tries * log1p(-P(k)))), or
/// P(k) * num_sampled otherwise. true_classes [batch, num_true] int64. A new draw every run; a
/// seed makes the sequence reproducible.
sampled_values log_uniform_candidate_sampler(output true_classes, int num_true, int num_sampled,
                                             bool unique, std::int64_t range_max,
                                             std::optional<std::int64_t> seed = std::nullopt,
                                             const std::string& name = "LogUniformCandidateSampler");

/// "SigmoidCrossEntropyWithLogits": max(x, 0) - x * z + log(1 + exp(-|x|)) elementwise, for
/// logits x and labels z of one float dtype and shape (TF's, stable for large |x|).
output sigmoid_cross_entropy_with_logits(output logits, output labels,
                                         const std::string& name = "SigmoidCrossEntropyWithLogits");

struct sampled_loss_options {
  int num_true = 1;
  /// Drops the logits of sampled candidates that are one of the example's true classes
  /// (nce_loss: false by default, sampled_softmax_loss: true, as in TF).
  std::optional<bool> remove_accidental_hits;
  /// Candidates drawn elsewhere; default: log_uniform_candidate_sampler(labels, num_true,
  /// num_sampled, unique, num_classes, seed).
  std::optional<sampled_values> sampled;
  std::optional<std::int64_t> seed;
};

/// tf.nn.nce_loss: per example [batch], the sigmoid cross-entropy of its true classes' logits
/// (label 1 / num_true) and the sampled ones' (label 0), each logit w_k . x + b_k - log(expected
/// count of k). weights [num_classes, dim] and biases [num_classes] are read by lookups;
/// labels [batch, num_true] int64, inputs [batch, dim].
output nce_loss(const actorflow::variable& weights, const actorflow::variable& biases,
                output labels, output inputs, int num_sampled, std::int64_t num_classes,
                const sampled_loss_options& options = {}, const std::string& name = "nce_loss");

/// tf.nn.sampled_softmax_loss: the softmax cross-entropy over the true classes and the sampled
/// ones (same logits as nce_loss), per example [batch].
output sampled_softmax_loss(const actorflow::variable& weights, const actorflow::variable& biases,
                            output labels, output inputs, int num_sampled,
                            std::int64_t num_classes, const sampled_loss_options& options = {},
                            const std::string& name = "sampled_softmax_loss");

} // namespace ops

class op_registry;
class gradient_registry;
/// The ops above (graph/standard_ops.cpp and graph/gradients.cpp call these).
void register_sampled_loss_ops(op_registry& registry);
void register_sampled_loss_gradients(gradient_registry& registry);

} // namespace actorflow

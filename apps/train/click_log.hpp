#pragma once
/// A deterministic synthetic click log for --model wide-deep, with a known true model, so that
/// a trained model's AUC has a ceiling (the true click probabilities' own AUC on the same data):
///   train::click_log log{{/*ids_per_field=*/100000, /*seed=*/1}};
///   auto batch = log.next(256);              // ids per field, the user x item cross, labels
///   double ceiling = train::auc(batch.true_logits, batch.labels);
/// The generator, example by example (all draws from splitmix64 of the seed and a counter):
/// - three categorical fields (user, item, context); each draws a rank r in [1, V] (V =
///   ids_per_field) log-uniformly, r = floor(V^u) for u uniform in [0, 1): P(r) ~ 1/r, Zipf's
///   law with exponent 1. The field's id is a 62-bit hash of (field, r), so ids are sparse and
///   spread over hash shards; the user x item cross id is a hash of both ranks.
/// - the true logit: -1 + w_user(r_u) + w_item(r_i) + w_context(r_c) + w_cross(r_u, r_i)
///   + <a(r_u), b(r_i)>, every weight N(0, 0.5^2) and a, b 4-vectors of N(0, 0.5^2) elements,
///   each a pure function of its ranks (a hash), so a model must learn per-id weights (wide) and
///   an interaction of user and item factors (deep);
/// - the label: 1 with probability sigmoid(true logit).
/// The held-out set (`evaluation(n)`) draws from another counter range: the same model, other
/// examples.

#include "graph/tensor.hpp"

#include <cstdint>
#include <vector>

namespace actorflow::train {

struct click_log_options {
  std::int64_t ids_per_field = 100000;
  std::uint64_t seed = 1;
  /// Where next() starts in the log: between-graph workers take stretches of one log (the same
  /// true model) far apart, task k at k * 2^40.
  std::uint64_t first_example = 0;
};

/// One batch: int64 [n] ids per field and of the cross, float32 labels [n, 1], and the true
/// logits (for the ceiling).
struct click_batch {
  tensor user, item, context, cross;
  tensor labels;
  std::vector<double> true_logits;
  std::vector<float> label_values;
};

class click_log {
public:
  explicit click_log(click_log_options o) : options_(o), drawn_(o.first_example) {}
  /// The next `n` training examples.
  click_batch next(std::int64_t n);
  /// `n` held-out examples (the same for every call with the same n).
  click_batch evaluation(std::int64_t n) const;

private:
  click_batch make(std::uint64_t first, std::int64_t n) const;
  click_log_options options_;
  std::uint64_t drawn_;
};

/// The area under the ROC curve of `scores` for binary `labels` (ties counted half): the chance
/// that a random positive scores above a random negative; 0.5 when a class is missing.
double auc(const std::vector<double>& scores, const std::vector<float>& labels);

} // namespace actorflow::train

#pragma once
/// The gradient accumulator of one variable shard in synchronous training (TensorFlow's
/// ConditionalAccumulator under SyncReplicasOptimizer): gradients computed at the current
/// global step are summed until `replicas_to_aggregate` have arrived; their average is then
/// taken once and the round advances. Gradients computed at an older step are stale and
/// dropped; so is a second gradient from the same worker in one round. With more workers than
/// replicas_to_aggregate (backup workers), the slowest workers' gradients of a round arrive
/// after it closed, are stale, and never hold the round up.
///   gradient_accumulator acc{"w", dtype::float32, {256, 10}, 2};
///   auto o = acc.offer(step, worker, gradient);       // accepted, stale, duplicate, or error
///   if (auto average = acc.take_average()) apply(*average);   // once per round
///   if (auto average = acc.take_short_average()) apply(*average);   // after the round's bound
/// A plain class: the shard actor that owns it orders the calls (one at a time).

#include "devices/worker_lives.hpp"
#include "graph/status.hpp"
#include "graph/tensor.hpp"
#include "graph/tensor_shape.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace actorflow {

class gradient_accumulator {
public:
  enum class offer_outcome {
    /// Summed into the current round.
    accepted,
    /// Computed at an older global step: dropped.
    stale,
    /// This worker already contributed to the current round: dropped.
    duplicate,
    /// From an earlier life of its worker, which has since restarted (a process frozen, then
    /// resumed after its replacement joined): dropped, whatever its step.
    retired,
  };

  /// For the variable (shard) `name`, whose gradients have `type` and `shape`; a round takes
  /// `replicas_to_aggregate` (at least 1) gradients. The global step starts at `global_step`.
  gradient_accumulator(std::string name, dtype type, tensor_shape shape, int replicas_to_aggregate,
                       std::int64_t global_step = 0);

  /// Offers `gradient`, computed by `worker` from the values of global step `local_step`.
  /// Fails (invalid_argument, naming the variable) for a gradient of another dtype or shape, or
  /// a dtype that is not floating point; a gradient from a future step is refused as a bug
  /// (failed_precondition). Nothing changes on failure.
  /// `incarnation` tells the worker's lives apart (0: unknown, nothing is fenced): once a new
  /// one is seen, the worker's earlier ones are retired.
  /// `loss` and `accuracy` are those of the worker's batch; round_metrics() averages them.
  result<offer_outcome> offer(std::int64_t local_step, int worker, const tensor& gradient,
                              std::uint64_t incarnation = 0, double loss = 0, double accuracy = 0);

  /// Whether replicas_to_aggregate gradients of the current round are in.
  bool ready() const { return contributors_.size() >= static_cast<std::size_t>(replicas_); }

  /// When ready(): the average of the round's gradients, in a fresh tensor; the round closes
  /// and the global step advances by one. Otherwise nullopt, and nothing changes.
  std::optional<tensor> take_average();

  /// A round that waited its bound for workers that did not come (lost, restarted): the
  /// average of the gradients that did, at least one; the round closes as take_average's
  /// does and counts as short. nullopt when the round is complete (take_average's) or empty.
  std::optional<tensor> take_short_average();
  /// Rounds closed by take_short_average since construction.
  std::int64_t short_rounds() const { return short_rounds_; }

  std::int64_t global_step() const { return global_step_; }
  /// The round closed last (all 0 before any): its mean loss and accuracy over the batches
  /// of its gradients, and how many gradients its average took.
  struct round_metrics {
    double loss = 0;
    double accuracy = 0;
    int gradients = 0;
  };
  round_metrics last_round() const { return last_round_; }
  /// Gradients in the current round so far.
  int pending() const { return static_cast<int>(contributors_.size()); }
  int replicas_to_aggregate() const { return replicas_; }
  /// Gradients dropped because they were stale (for an earlier round), since construction.
  std::int64_t stale_dropped() const { return stale_; }
  /// ... because their worker had already given one this round.
  std::int64_t duplicates_dropped() const { return duplicates_; }
  std::int64_t retired_dropped() const { return lives_.refused(); }

private:
  std::string name_;
  dtype type_;
  tensor_shape shape_;
  int replicas_;
  std::int64_t global_step_;
  /// The running sum (float64 for float32 gradients: the average is then exact to float32).
  tensor sum_;
  std::set<int> contributors_;
  /// The current round's loss and accuracy sums, and the means of the round closed last.
  round_metrics sums_;
  round_metrics last_round_;
  std::int64_t stale_ = 0;
  std::int64_t duplicates_ = 0;
  std::int64_t short_rounds_ = 0;
  /// Each worker's current life, and the lives that restarted.
  worker_lives lives_;

  /// The average of the round's gradients; clears the round and advances the step.
  tensor close_round();
};

} // namespace actorflow

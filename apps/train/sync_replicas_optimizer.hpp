#pragma once
/// Synchronous data parallel training between graphs (TensorFlow's SyncReplicasOptimizer): each
/// worker's gradients go to the accumulators on the parameter shards of their variables; a round
/// is applied once replicas_to_aggregate fresh gradients arrived (the mean, once), and a gradient
/// that comes after its round closed (a backup worker's) is dropped as stale. The global step is
/// the number of rounds applied.
///   gradient_descent_optimizer sgd{0.1};
///   train::sync_replicas_optimizer sync{sgd, global_step, {2, 3}};   // 2 of 3 workers a round
///   auto train_op = sync.minimize(loss);
///   o.hooks.push_back(sync.make_session_run_hook(is_chief, {cluster, task}));  // first of all
///   while (!(*s)->should_stop()) (*s)->run({}, feeds, {train_op});   // one round per run
/// The train op computes the gradients; the hook (in a train::monitored_session) pushes them and
/// returns once their round was applied, and counts the global step for the session and the
/// hooks after it, so that stop_at_step_hook and the checkpoints see the rounds. Put it first
/// among the hooks. Wrapping gradient descent, the shards apply each round themselves (value -=
/// learning_rate * mean). Wrapping any other optimizer (momentum, Adam, Adagrad), the shards sum
/// each round into an accumulator variable beside each variable ("<var>/sync_gradient", the
/// mean), the chief applies the wrapped optimizer to the accumulators, zeroes them and counts
/// the global step, and the other workers wait for that count before their next round (TF's
/// token queue): the chief must stay, as in TF.
/// Only CAF's forward declarations here (through actors/sync_rounds.hpp).

#include "actors/cluster_spec.hpp"
#include "actors/sync_rounds.hpp"
#include "graph/optimizers.hpp"
#include "train/monitored_session.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace actorflow::train {

struct sync_replicas_settings {
  /// Gradients a round averages (TF's replicas_to_aggregate), of how many workers
  /// (total_num_replicas): with fewer to aggregate than workers, the others are backups.
  int replicas_to_aggregate = 1;
  int total_num_replicas = 1;
  /// A round that has some gradients but not all closes with those after this long (0: waits
  /// for all).
  double round_timeout_seconds = 0;
};

/// What one worker's hook needs to reach the shards.
struct sync_replicas_hook_options {
  std::shared_ptr<const cluster_spec> cluster;
  int worker_task = 0;
  std::string ps_job = "ps";
  /// The loss and accuracy of the worker's batch (optional, scalars): the round averages them
  /// over its gradients (last_round()).
  output loss;
  output accuracy;
  /// How long a push waits for its round to be applied.
  std::chrono::milliseconds answer_bound{std::chrono::seconds(60)};
};

/// What the last step's round did, over every shard (sync_round_client's outcome), and whether
/// the step pushed nothing: its gradients were computed before a lost ps came back, for a round
/// that is no longer the current one.
struct sync_round_report : sync_round_outcome {
  bool skipped = false;
};

class sync_replicas_hook;

class sync_replicas_optimizer : public optimizer {
public:
  /// `wrapped` must outlive the optimizer.
  sync_replicas_optimizer(optimizer& wrapped, actorflow::variable global_step,
                          sync_replicas_settings settings);

  /// A NoOp "sync_replicas" that depends on every gradient: running it computes them; the hook
  /// pushes them. Records an error in the graph when called twice or when the round is bigger
  /// than the replicas.
  output apply_gradients(const std::vector<gradient_and_variable>& pairs,
                         const std::string& name = "") override;

  /// The hook that runs the rounds of this worker; apply_gradients first.
  std::unique_ptr<sync_replicas_hook> make_session_run_hook(bool is_chief,
                                                            sync_replicas_hook_options options) const;

private:
  optimizer& wrapped_;
  actorflow::variable global_step_;
  sync_replicas_settings settings_;
  /// What the shards apply a round with: the wrapped descent's rate, or -1 (value += mean)
  /// into the accumulators when the chief applies.
  double learning_rate_ = 0;
  std::vector<gradient_and_variable> pairs_;
  /// The variables the gradients are pushed to: the variables, or their accumulators.
  std::vector<std::string> pushed_;
  /// The chief's apply of the wrapped optimizer to the accumulators, their zeroing and the
  /// global step's count; invalid when the shards apply.
  output chief_apply_;
  /// Writes the rounds into the global step before a checkpoint (the chief's).
  output round_feed_, set_global_step_;
};

class sync_replicas_hook final : public session_run_hook {
public:
  struct state;
  explicit sync_replicas_hook(std::unique_ptr<state> st);
  ~sync_replicas_hook() override;

  /// Finds the shards of every variable and reads the global step: the round to go on from.
  status after_create_session(session& s) override;
  result<session_run_args> before_run(session_run_context& context) override;
  /// Pushes the step's gradients at the current round; once the round was applied (or at once
  /// when it came too late), the global step is the rounds applied.
  status after_run(session_run_context& context, const std::vector<tensor>& values) override;
  /// The chief writes the rounds into the global step variable, so the checkpoint holds them.
  status before_save(session& s, std::int64_t step) override;

  /// The round the next step's gradients are computed at (the global step).
  std::int64_t round() const;
  const sync_round_report& last_round() const;

private:
  /// Where the chief applies: after a round closed at `round`, the chief applies it unless the
  /// global step says it did; the others wait (bounded) until it says so.
  status wait_for_apply(session& s, std::int64_t round);

  std::unique_ptr<state> state_;
};

} // namespace actorflow::train

#pragma once
/// One worker's part in synchronous rounds (TensorFlow's SyncReplicasOptimizer), whose
/// accumulators live on the parameter shards (actors/shard_actor.hpp): a round's gradients go to
/// the shards of their variables, and the answer comes once the round was applied on every
/// shard, or at once for a gradient that came too late (a backup worker's).
///   sync_round_client rounds{cluster, "ps", settings};
///   AF_RETURN_IF_ERROR(rounds.find_shards({"w", "b"}));
///   auto applied = rounds.push(round, {{"w", dw}, {"b", db}}, loss, accuracy);
///   if (applied) round = applied->global_step;
/// Large gradients go over the shards' bulk channel (shard_pusher). Errors carry the ps task
/// they came from (status::origin). Only CAF's forward declarations here. Not thread-safe: one
/// per worker. On CAF's test scheduler (actors/testing.hpp), give the system and a drive, and
/// push in two halves, so that every worker's gradients are out before the scheduler runs:
///   auto sent = rounds.begin_push(round, gradients, loss, accuracy);   // every worker's
///   auto applied = rounds.finish_push(**sent);                          // drives, then waits

#include "actors/cluster_spec.hpp"
#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include <caf/fwd.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace actorflow {

struct shard_location;

struct sync_round_settings {
  /// This worker's task index, and its process's life (new_incarnation()): once it has a
  /// successor, its gradients no longer count.
  int worker_task = 0;
  std::uint64_t incarnation = 0;
  /// Applied as value -= learning_rate * average.
  double learning_rate = 0;
  /// Gradients per round, and how long a round with some but not all waits (0: for all).
  int replicas_to_aggregate = 1;
  std::int64_t round_timeout_ms = 0;
  /// How long a push waits for every shard's answer before it fails.
  std::chrono::milliseconds answer_bound{std::chrono::seconds(60)};
  /// How long finding the shards waits for each ps task.
  double find_timeout_seconds = 10;
  /// Runs before each wait for the shards' answers: a deterministic test's scheduler
  /// (testing::deterministic_system::run_all); empty otherwise.
  std::function<void()> drive;
};

/// What a round answered, over every shard.
struct sync_round_outcome {
  /// The furthest global step any shard reached (the rounds applied so far).
  std::int64_t global_step = 0;
  /// Whether this worker's gradients were part of the applied round; then the round's mean loss
  /// and accuracy over its batches, and how many gradients it averaged.
  bool applied = false;
  double round_loss = 0;
  double round_accuracy = 0;
  std::int32_t round_gradients = 0;
  /// Over every shard so far: rounds that closed short of gradients, gradients dropped stale.
  std::int64_t short_rounds = 0;
  std::int64_t stale_dropped = 0;
};

class sync_round_client {
public:
  /// In the process's default actor system (default_actor_system()).
  sync_round_client(cluster_spec cluster, std::string ps_job, sync_round_settings settings);
  /// In `system` (a deterministic test's), which must outlive the client.
  sync_round_client(caf::actor_system& system, cluster_spec cluster, std::string ps_job,
                    sync_round_settings settings);
  ~sync_round_client();
  sync_round_client(const sync_round_client&) = delete;
  sync_round_client& operator=(const sync_round_client&) = delete;

  /// Asks every ps task for its shards (at the start, and again after a lost ps came back);
  /// fails naming a variable no ps task holds a shard of.
  status find_shards(const std::vector<std::string>& variables);
  /// The shards, known some other way (a test's task manifest) instead of find_shards.
  void use_shards(const std::map<std::string, shard_location>& shards);

  /// The gradients computed at global step `round` (variable name, gradient), with the loss and
  /// accuracy of the batch they came from: every one goes out before any answer is awaited (a
  /// round closes only once every worker's gradient arrived). A shard that goes down or fails
  /// ends the wait at once, with the shard's task as the error's origin.
  result<sync_round_outcome> push(std::int64_t round,
                                  const std::vector<std::pair<std::string, tensor>>& gradients,
                                  double loss, double accuracy);

  /// push() in two halves: the gradients sent, then their answers awaited (shared: the type
  /// is opaque here).
  class pending;
  result<std::shared_ptr<pending>>
  begin_push(std::int64_t round, const std::vector<std::pair<std::string, tensor>>& gradients,
             double loss, double accuracy);
  result<sync_round_outcome> finish_push(pending& sent);

private:
  struct state;
  std::unique_ptr<state> state_;
};

} // namespace actorflow

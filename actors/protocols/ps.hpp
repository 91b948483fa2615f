#pragma once
/// The parameter-shard protocol: one actor per variable (or shard of a partitioned variable)
/// held by a task, found by name through the task's manifest (protocols/task.hpp). Any actor,
/// of actorflow or of an embedding application in another process, pulls and pushes through it.
///   auto manifest = self->request(task, t, manifest_atom::value);       // -> task_manifest
///   auto w = self->request(task, t, shard_atom::value, "w");            // -> shard_actor
///   self->request(w, t, read_atom::value).then([](shard_value& v) { ... v.value, v.version });
///   self->request(w, t, apply_gd_atom::value, 0.1, gradient).then([](std::int64_t version) {});
/// The shard shares its storage with the device that runs the graph's ops on the variable
/// (devices/variable_shard.hpp): a training step's updates and the protocol's apply one at a
/// time, both counted by the version. Failures (an uninitialised variable, a gradient of the
/// wrong shape) come back as errors in the "actorflow" category naming the variable.

#include "actors/protocols/atoms.hpp"
#include "actors/protocols/device.hpp"

#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>

namespace actorflow::protocol {

/// A shard's value (sharing the stored buffer inside a process) and its version: how many
/// updates it has applied.
struct shard_value {
  tensor value;
  std::int64_t version = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_value& x) {
  return f(caf::meta::type_name("shard_value"), x.value, x.version);
}

/// A pushed tensor that travels over the shard's task's bulk channel (actors/bulk_channel.hpp)
/// instead of inside the message, as large device transfers do: the key of its frame. The
/// frame and the message may reach the task in either order; the shard applies the update once
/// it has both. Keys start with shard_bulk_prefix and the variable's name:
/// "shard;<variable>;<id unique to the sender>" (actors/task_client.hpp's shard_pusher makes them).
struct bulk_tensor {
  std::string key;
};

inline constexpr const char* shard_bulk_prefix = "shard;";

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bulk_tensor& x) {
  return f(caf::meta::type_name("bulk_tensor"), x.key);
}

/// Who sends an update through the shard protocol: the worker (any name its sender keeps
/// stable across restarts, e.g. "/job:worker/replica:0/task:1") and the life of its process
/// (new_incarnation(), graph/rendezvous_key.hpp). Once the shard has seen a worker's new life,
/// updates from its earlier lives are refused: a process frozen, then resumed after its
/// replacement started, changes nothing any more.
struct update_origin {
  std::string worker;
  std::uint64_t incarnation = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, update_origin& x) {
  return f(caf::meta::type_name("update_origin"), x.worker, x.incarnation);
}

/// A gradient offered for a synchronous round (make_sync_gradient).
struct sync_gradient {
  /// The global step the gradient was computed at, and by which worker.
  std::int64_t local_step = 0;
  std::int32_t worker = 0;
  tensor gradient;
  /// Applied as value -= learning_rate * average.
  double learning_rate = 0;
  /// Gradients per round (SyncReplicasOptimizer's replicas_to_aggregate); fixed by the first.
  std::int32_t replicas_to_aggregate = 1;
  /// A round that has a gradient but not all of them after this long closes with those it has
  /// (a lost worker does not stall the others); 0 waits for all. Fixed by the first.
  std::int64_t round_timeout_ms = 0;
  /// The worker process's life (random per start; 0: unknown): a gradient from a life of the
  /// worker that has since restarted is dropped.
  std::uint64_t incarnation = 0;
  /// The loss and accuracy of the worker's batch the gradient was computed on: the round's
  /// are their mean (sync_outcome), what one process on the concatenated batches would log.
  double loss = 0;
  double accuracy = 0;
};

inline sync_gradient make_sync_gradient(std::int64_t local_step, std::int32_t worker,
                                        tensor gradient, double learning_rate,
                                        std::int32_t replicas_to_aggregate,
                                        std::int64_t round_timeout_ms = 0,
                                        std::uint64_t incarnation = 0, double loss = 0,
                                        double accuracy = 0) {
  return sync_gradient{local_step, worker,           std::move(gradient), learning_rate,
                       replicas_to_aggregate, round_timeout_ms, incarnation,
                       loss,       accuracy};
}

/// The answer to a sync_gradient: whether it counted, and the shard's global step after.
struct sync_outcome {
  /// True when the gradient was part of the round that was applied; false when it was stale
  /// (an older step: a backup worker's late gradient) or a duplicate, and dropped.
  bool applied = false;
  std::int64_t global_step = 0;
  /// Rounds of this shard that closed short (round_timeout_ms) so far.
  std::int64_t short_rounds = 0;
  /// Gradients this shard dropped as stale or duplicates so far.
  std::int64_t stale_dropped = 0;
  /// When applied: the mean loss and accuracy of the round's batches (sync_gradient's), and
  /// how many gradients its average took (replicas_to_aggregate; fewer in a short round).
  double round_loss = 0;
  double round_accuracy = 0;
  std::int32_t round_gradients = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sync_gradient& x) {
  return f(caf::meta::type_name("sync_gradient"), x.local_step, x.worker, x.gradient,
           x.learning_rate, x.replicas_to_aggregate, x.round_timeout_ms, x.incarnation, x.loss,
           x.accuracy);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sync_outcome& x) {
  return f(caf::meta::type_name("sync_outcome"), x.applied, x.global_step, x.short_rounds,
           x.stale_dropped, x.round_loss, x.round_accuracy, x.round_gradients);
}

/// A parameter shard (actors/shard_actor.hpp). Updates answer with the version after them.
using shard_actor = caf::typed_actor<
  // The value and version now.
  caf::replies_to<read_atom>::with<shard_value>,
  // The same for large values: the value goes as a bulk frame with the given key to the bulk
  // endpoint at the address ("host:port"); the answer, once the frame is written, is the
  // version it had (actors/task_client.hpp's shard_puller does both sides).
  caf::replies_to<read_atom, bulk_tensor, std::string>::with<std::int64_t>,
  // Replaces the value (same dtype and shape once initialised).
  caf::replies_to<assign_atom, tensor>::with<std::int64_t>,
  // value += delta.
  caf::replies_to<assign_add_atom, tensor>::with<std::int64_t>,
  caf::replies_to<assign_add_atom, bulk_tensor>::with<std::int64_t>,
  // value -= learning_rate * gradient (ApplyGradientDescent).
  caf::replies_to<apply_gd_atom, double, tensor>::with<std::int64_t>,
  caf::replies_to<apply_gd_atom, double, bulk_tensor>::with<std::int64_t>,
  // The same from a worker's life (update_origin): refused (an "aborted" error naming the
  // worker) once a later life of the worker has been seen.
  caf::replies_to<assign_add_atom, tensor, update_origin>::with<std::int64_t>,
  caf::replies_to<assign_add_atom, bulk_tensor, update_origin>::with<std::int64_t>,
  caf::replies_to<apply_gd_atom, double, tensor, update_origin>::with<std::int64_t>,
  caf::replies_to<apply_gd_atom, double, bulk_tensor, update_origin>::with<std::int64_t>,
  // How many updates the shard has applied.
  caf::replies_to<version_atom>::with<std::int64_t>,
  // Puts back a snapshot (a read's answer): value and version, for checkpoints.
  caf::replies_to<restore_atom, shard_value>::with<std::int64_t>,
  // A gradient for the current synchronous round (devices/gradient_accumulator.hpp): answered
  // when the round it joined has been applied (the average, once), or at once when stale.
  // With a bulk_tensor, the gradient (left empty in the sync_gradient) travels over the bulk
  // channel.
  caf::replies_to<accumulate_atom, sync_gradient>::with<sync_outcome>,
  caf::replies_to<accumulate_atom, sync_gradient, bulk_tensor>::with<sync_outcome>>;

} // namespace actorflow::protocol

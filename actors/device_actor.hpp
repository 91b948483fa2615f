#pragma once
/// The actor that drives one device for one session (protocol: actors/protocols/device.hpp).
///   protocol::device_actor dev =
///     spawn_device_actor(sys, make_cpu_device(name, intra_pool), {inter_pool, trace});
/// It keeps the registered plans, the running steps and their rendezvous. Steps run on the
/// inter-op pool when one is given, otherwise inline in the actor (deterministic tests).

#include "actors/bulk_channel.hpp"
#include "actors/protocols/device.hpp"
#include "devices/device.hpp"

#include <caf/actor_system.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace actorflow {

class thread_pool;

struct device_actor_options {
  /// Pool for ready nodes; null runs every node inside the actor.
  std::shared_ptr<thread_pool> inter_op_pool;
  /// Without inter_op_pool: where the rest of a long chain of nodes goes after the actor's
  /// thread ran step_execution::max_inline_chain of them (the task's inter-op pool, unused
  /// otherwise), so that the actor, and on the I/O thread the process's connections, stay
  /// responsive. Null (deterministic tests): the chain runs to its end.
  std::shared_ptr<thread_pool> long_chain_pool;
  /// Called with a short line for every message handled ("CPU:0 run step 1"); tests use it to
  /// check message order.
  std::function<void(const std::string&)> trace;
  /// Sends large tensors to device actors of other processes whose task has a bulk endpoint
  /// (peer_table::bulk_addresses, at least bulk_min_bytes()); null sends everything through
  /// CAF. Shared by the task's device actors; its owner closes it before the actor system ends.
  std::shared_ptr<bulk_sender> bulk;
  /// Tensors may arrive for a step before the device is told to run it. Those of a step that
  /// has not started within early_tensor_ttl are dropped (a step that never runs must not hold
  /// them forever), and so are the oldest such steps' whenever all of them together exceed
  /// early_tensor_budget_bytes. Either way the step, should it come, fails waiting for them.
  std::chrono::milliseconds early_tensor_ttl{std::chrono::seconds(60)};
  std::uint64_t early_tensor_budget_bytes = std::uint64_t{1} << 30;
  /// And each sending task's early tensors together may hold at most this much: one that
  /// sends for steps that never come loses its own further tensors, not the other peers'.
  std::uint64_t early_tensor_peer_budget_bytes = std::uint64_t{512} << 20;
  /// Called with every peer table the actor is told (the task dials its peers with it).
  std::function<void(const protocol::peer_table&)> on_peers;
  /// Run the actor on the middleman's I/O thread (as a broker) where the system has one: a
  /// tensor from another process then reaches it, and its tensors for other processes reach
  /// the network, without waking another thread. Nodes it runs itself block that thread.
  bool on_network_thread = false;
};

/// The device is shared: its task keeps it too (its variables back the task's shards).
protocol::device_actor spawn_device_actor(caf::actor_system& sys, std::shared_ptr<device> dev,
                                          device_actor_options options);

/// What a task's bulk endpoint does with a received tensor: sends it, as a local
/// (tensor_atom, tensor_transfer), to the device actor its key names as receiver; a key naming
/// none of `devices` (full name -> actor) is refused with not_found. Thread-safe.
bulk_endpoint::deliver_function
deliver_to_device_actors(std::map<std::string, protocol::device_actor> devices);

namespace protocol {

struct step_plan;
struct step_outcome;

/// The actor that runs one step across devices: asks each device to run its partition, aborts
/// the others as soon as one fails, and answers with every device's result. Devices are
/// monitored: a device whose process dies or whose connection drops fails every step waiting
/// on it, with an error naming the device (and so its task).
using step_coordinator_actor =
  caf::typed_actor<caf::replies_to<run_atom, step_plan>::with<step_outcome>,
                   // A device of an all-or-nothing step holds all its first updates.
                   caf::reacts_to<prepared_atom, std::int64_t>,
                   // The step's requester gives it up: aborted on every device, this its cause.
                   caf::reacts_to<abort_atom, std::int64_t, status>>;

/// What the coordinator runs: for each device actor, its request.
struct step_plan {
  std::int64_t step_id = 0;
  std::vector<std::pair<device_actor, run_request>> calls;
  /// Full device name of each call, for errors ("... /job:ps/replica:0/task:1/device:CPU:0").
  std::vector<std::string> device_names;
  /// Each call's task incarnation (0: not known), for the origin of its errors.
  std::vector<std::uint64_t> device_incarnations;
  /// A device that has not answered after this long fails the step; 0 waits without bound.
  std::int64_t timeout_ms = 0;
  /// The whole step's bound (TensorFlow's RunOptions.timeout_in_ms): past it the step is
  /// aborted on every device and fails with deadline_exceeded; 0: none.
  std::int64_t step_timeout_ms = 0;
  /// The calls whose devices hold first updates (run_request::all_or_nothing): once each has
  /// said it is prepared, the coordinator commits the step on all of them.
  std::vector<std::int32_t> gated;
};

/// The step's status (the root cause when several devices failed) and each call's fetches.
struct step_outcome {
  status outcome;
  std::vector<std::vector<tensor>> fetched;
  /// The longest any device spent executing its partition.
  std::int64_t execution_ns = 0;
  /// The calls (indices into step_plan::calls) whose devices answered neither the step within
  /// its bound nor a probe after it: hung or unreachable, so that their caller need not wait
  /// a bound again for their answer to anything else (a session's close).
  std::vector<std::int32_t> hung_calls;
};

/// Wire encoding (for when a coordinator runs in another process); see protocols/wire.hpp.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_plan& x) {
  return f(caf::meta::type_name("step_plan"), x.step_id, x.calls, x.device_names,
           x.device_incarnations, x.timeout_ms, x.step_timeout_ms, x.gated);
}

/// Wire encoding of a step's outcome; see protocols/wire.hpp.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_outcome& x) {
  return f(caf::meta::type_name("step_outcome"), x.outcome, x.fetched, x.execution_ns,
           x.hung_calls);
}

} // namespace protocol

/// How long an actor that has not answered a step within its bound `step_timeout_ms` (a device,
/// a master) has to answer a probe then: a live actor answers at once. A quarter of the bound,
/// within [200 ms, 2 s].
std::chrono::milliseconds probe_bound(std::int64_t step_timeout_ms);

/// With `on_network_thread` (and a middleman), on the I/O thread like a cluster task's device
/// actors: run requests leave, and answers from other processes arrive, without waking another
/// thread.
protocol::step_coordinator_actor spawn_step_coordinator(caf::actor_system& sys,
                                                        bool on_network_thread = false);

} // namespace actorflow

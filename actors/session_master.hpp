#pragma once
/// What both kinds of session (the blocking `session` and the session actor) do before they
/// talk to a master: check the host's actor system, and find or spawn the master.
///   AF_RETURN_IF_ERROR(check_actor_system(sys, options));
///   auto m = make_session_master(sys, options);     // local task, in-process cluster, ...
///   ... m->master ...;  m->release();                // stops what it spawned
/// Internal to actors/: embedders use session.hpp and session_actor.hpp.

#include "actors/protocols/master.hpp"
#include "actors/protocols/task.hpp"
#include "actors/session.hpp"

#include <caf/fwd.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace actorflow {

struct master_ref {
  protocol::master_actor actor;
};

/// The master a session talks to, and what the session spawned for it.
struct session_master {
  protocol::master_actor master;
  /// The master was spawned for this session (local devices, an in-process cluster, this
  /// process acting as master of a cluster); it ends with the session.
  bool owned = false;
  /// Task services spawned for this session, stopped at its end.
  std::vector<protocol::task_actor> owned_tasks;
  /// How errors name the master: "the master", "the master at caf://h:p".
  std::string name = "the master";

  /// Stops the master and tasks this session spawned (asynchronously).
  void release();
};

/// Whether `sys` can talk across processes for `what` ("a session on caf://h:p", "a server"):
/// CAF's middleman is loaded and actorflow's message types are registered. The error says what
/// to add to the host's actor_system_config.
status check_network_system(caf::actor_system& sys, const std::string& what);

/// check_network_system for a session whose options cross processes (target, cluster); ok for
/// sessions that stay in this process.
status check_actor_system(caf::actor_system& sys, const session_options& options);

/// A config for an actor system that serves or reaches actorflow tasks over the network:
/// the middleman, actorflow's message types, actorflow's scheduler and deserialising on the
/// I/O thread; `max_threads` scheduler threads (0: CAF's default). A `serving` system's idle
/// workers sleep at once (actors/scheduler.hpp says why).
std::unique_ptr<caf::actor_system_config> network_config(std::size_t max_threads, bool serving = false);

/// `seconds` as a CAF request timeout; 0 or less waits without bound.
caf::duration request_bound(double seconds);

/// The session's master for every option but `target` (which the callers reach, blocking or
/// not): options.master as given, else a master spawned over this process's devices, an
/// in-process cluster, or options.cluster.
session_master make_session_master(caf::actor_system& sys, const session_options& options);

/// The bound on answers from tasks: options.timeout_seconds, or 10 s on a cluster (target or
/// cluster), or 0 (no bound) for this process's devices.
double task_timeout(const session_options& options);

/// What a session asks of its master, from its options; `owner` stands for the session.
protocol::session_config session_config_for(const session_options& options, caf::actor owner);

/// Logs, at verbose level, the devices a session found on its master (TensorFlow's "Creating
/// TensorFlow device" lines).
void log_session_devices(const std::string& master_name, std::int64_t handle,
                         const std::vector<std::string>& devices);

/// The bound on one answer from the master: three task bounds (reaching the tasks,
/// registering partitions, the step) plus a second; 0 (no bound) when tasks have none.
double master_timeout(const session_options& options);

} // namespace actorflow

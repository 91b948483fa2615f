#pragma once
/// The master: the actor clients open sessions on (protocol: actors/protocols/master.hpp).
///   master_options options;
///   options.cluster = spec;                       // reaches the tasks through the middleman
///   auto master = spawn_master(sys, options);     // actorflow-master publishes it
/// It learns the cluster's devices from the task services (lazily, on the first session, so
/// tasks may start after the master), places each session's graph over them, partitions it by
/// device with _Send/_Recv pairs whose rendezvous keys carry the step id, registers every
/// partition once with its device actor, and runs steps through a step coordinator that aborts
/// every device when one fails and bounds each device's answer.

#include "actors/cluster_spec.hpp"

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include <memory>
#include <vector>

namespace actorflow {

struct master_options {
  /// Task services already reached (an in-process cluster, or the worker the master runs in).
  std::vector<caf::actor> task_services;
  /// The cluster whose other tasks the master reaches through the middleman at their
  /// addresses; null when task_services are all there is.
  std::shared_ptr<const cluster_spec> cluster;
  /// Bound on reaching a task and on its answers while a session is set up (device lists,
  /// partition registrations); 0 means without bound.
  double timeout_seconds = 10;
};

caf::actor spawn_master(caf::actor_system& sys, master_options options);

} // namespace actorflow

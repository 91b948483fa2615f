#pragma once
/// The master: the actor clients open sessions on (protocol: actors/protocols/master.hpp).
///   master_options options;
///   options.cluster = spec;                       // reaches the tasks through the middleman
///   protocol::master_actor master = spawn_master(sys, options);   // actors/server.hpp publishes it
/// It learns the cluster's devices from the task services (lazily, on the first session, so
/// tasks may start after the master), places each session's graph over them, partitions it by
/// device with _Send/_Recv pairs whose rendezvous keys carry the step id, registers every
/// partition once with its device actor, and runs steps through a step coordinator that aborts
/// every device when one fails and bounds each device's answer.

#include "actors/cluster_spec.hpp"
#include "actors/protocols/master.hpp"
#include "actors/protocols/task.hpp"

#include <caf/actor_system.hpp>

#include <memory>
#include <vector>

namespace actorflow {

struct master_options {
  /// Task services already reached (an in-process cluster, or the worker the master runs in).
  std::vector<protocol::task_actor> task_services;
  /// The cluster whose other tasks the master reaches through the middleman at their
  /// addresses; null when task_services are all there is.
  std::shared_ptr<const cluster_spec> cluster;
  /// Bound on reaching a task and on its answers while a session is set up (device lists,
  /// partition registrations); 0 means without bound.
  double timeout_seconds = 10;
  /// Until the master has reached the cluster's tasks once (its first session), it waits this
  /// long for a task where nothing listens yet (started after the master or its client), trying
  /// again every half second and saying every 5 s what it waits for; later sessions, after a
  /// task was lost, fail at once as before. 0: fail at once from the start.
  double connect_timeout_seconds = 0;
  /// The task the master serves in ("/job:worker/replica:0/task:1"): nodes whose request names
  /// neither job nor task go there (SPEC: the default is the session's master task). Empty
  /// (a client acting as master, an in-process cluster): task 0 of job "worker", else of the
  /// first job.
  std::string own_task;
  /// The tasks of `cluster` the master reaches, as device-name prefixes ("/job:ps",
  /// "/job:worker/task:1"; TensorFlow's device_filters). Empty: every task. A between-graph
  /// worker's master needs only the ps tasks and its own, and must not wait for the others.
  std::vector<std::string> device_filters;
  /// Where the master's partition, step and session ids start: they must not collide with
  /// another master's on the tasks both use. Negative: random with a cluster (masters of
  /// different processes), 0 (ids from 1, deterministic) with task_services alone; masters that
  /// share in-process task services need bases of their own.
  std::int64_t id_base = -1;
};

protocol::master_actor spawn_master(caf::actor_system& sys, master_options options);

} // namespace actorflow

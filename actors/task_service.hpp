#pragma once
/// The task service: the actor that stands for one task (a ps or worker process) of a cluster.
///   protocol::task_actor task = spawn_task_service(sys, "worker", 0, task_service_options{});
///   self->request(task, timeout, protocol::devices_atom::value).then([](device_list& l) {});
///   caf::anon_send(task, protocol::stop_atom::value);          // stops its devices, then itself
/// Protocol: actors/protocols/task.hpp. Every task serves the master protocol too (its master
/// is spawned on the first master message). actors/server.hpp publishes one over the network.

#include "actors/cluster_spec.hpp"
#include "actors/protocols/task.hpp"
#include "devices/device.hpp"
#include "devices/gpu_options.hpp"
#include "devices/runtime_env.hpp"

#include <caf/actor_system.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace actorflow {

/// How a task sets up its devices.
struct task_service_options {
  /// Number of CPU devices (CPU:0 .. CPU:n-1); values below 1 mean 1.
  int cpu_device_count = 1;
  /// Test devices (TEST:0 ..., devices/test_device.hpp); -1: ACTORFLOW_TEST_DEVICES decides.
  int test_device_count = -1;
  /// How much of each GPU's (and test device's) memory the task takes.
  gpu_options gpu;
  /// Size of the task's inter-op pool and of its intra-op parallelism (the intra-op pool has
  /// one thread fewer: the calling thread helps); 0 means one per hardware thread.
  int threads = 0;
  /// Passed to every device actor (device_actor_options::trace); may be empty.
  std::function<void(const std::string&)> trace;
  /// Pools to use instead of the task's own (a local session shares its env's pools); both or
  /// neither.
  compute_pools pools;
  /// Makes the task's own pools and prepares host memory (devices/runtime_env.hpp); null: the
  /// process default.
  std::shared_ptr<runtime_env> env;
  /// Deterministic tests: every node runs inside its device actor (no inter-op pool).
  bool run_inline = false;
  /// The task's incarnation (device_list::incarnation); 0 draws a random one.
  std::uint64_t incarnation = 0;
  /// The cluster this task belongs to: the master the task serves (on the first master message)
  /// reaches the other tasks of it. Null: the master knows only this task.
  std::shared_ptr<const cluster_spec> cluster;
  /// Bound on reaching a task and on its answers for the master this task serves; 0 waits
  /// without bound.
  double master_timeout_seconds = 10;
  /// master_options::connect_timeout_seconds for the master this task serves.
  double master_connect_timeout_seconds = 0;
  /// A task that workers joined (task_joined_atom) stops this long after the last of them went
  /// away without finishing; 0 never stops for that.
  double abandoned_grace_seconds = 60;
  /// master_options::device_filters for the master this task serves.
  std::vector<std::string> master_device_filters;
  /// Host (name or address) of the task's bulk tensor endpoint (actors/bulk_channel.hpp) as
  /// peers reach it, listed in device_list::bulk_address with its port. Empty (in-process
  /// clusters, local sessions): no endpoint, large tensors for this task's devices come through
  /// CAF. actorflow-worker passes the host of its cluster address.
  std::string bulk_host;
  /// Where the endpoint listens when that is not bulk_host (a pod's "0.0.0.0" behind a Service
  /// name or NAT address); empty: bulk_host.
  std::string bulk_bind_host;
  /// The endpoint's port; 0: one the system picks.
  std::uint16_t bulk_port = 0;
};

/// Why a task service ended when its workers went away without finishing: the exit reason
/// of the task service (an "actorflow" error whose code is errc::aborted).
bool ended_abandoned(const caf::error& exit_reason);

/// Spawns the service of task `task` of job `job`: it creates the task's devices and their
/// device actors (on thread pools it owns), sends each device actor a peer_table of the task's
/// own devices, answers (devices_atom) with a device_list and on (stop_atom) sends an exit to
/// every device actor and to its master, and quits. Master messages (protocols/master.hpp) go
/// to a master it spawns on the first one, whose own task (where nodes naming no job or task
/// go) is this one. The device actors live as long as the task service (they are linked to
/// it), shared by every client that uses them. Any thread may call this.
protocol::task_actor spawn_task_service(caf::actor_system& sys, const std::string& job, int task,
                                        task_service_options options);

} // namespace actorflow

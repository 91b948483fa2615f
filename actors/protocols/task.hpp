#pragma once
/// The task's protocol: one actor per task (a ps or worker process) that owns the task's device
/// actors, tells masters where they are, and serves the master protocol too (every TensorFlow
/// server runs a MasterService and a WorkerService): a client may open sessions on any task.
///   auto task = sys.middleman().remote_actor<protocol::task_actor>("127.0.0.1", port);
///   self->request(*task, timeout, devices_atom::value).then([](device_list& l) { ... });
/// `task_actor` extends `master_actor`, so a task handle converts to a master handle.

#include "actors/protocols/atoms.hpp"
#include "actors/protocols/collective.hpp"
#include "actors/protocols/device.hpp"
#include "actors/protocols/master.hpp"
#include "actors/protocols/ps.hpp"

#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace actorflow::protocol {

/// A task's devices: full names ("/job:ps/replica:0/task:0/device:CPU:0") and their actors.
struct device_list {
  std::vector<std::pair<std::string, device_actor>> devices;
  /// "host:port" of the task's bulk tensor endpoint (actors/bulk_channel.hpp), where large
  /// tensors for these devices may be sent; empty when the task has none.
  std::string bulk_address;
  /// The task's incarnation: drawn when it starts, so a restarted task has a new one
  /// (graph/rendezvous_key.hpp).
  std::uint64_t incarnation = 0;
  /// Per device type of the task: the kernels its devices run, as "Op:dtype" (e.g.
  /// "MatMul:float32"). The master places over these, not over its own registry, so a master
  /// built without CUDA places nodes on a worker's GPUs.
  std::vector<std::pair<std::string, std::vector<std::string>>> kernels;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, device_list& x) {
  return f(caf::meta::type_name("actorflow::device_list"), x.devices, x.bulk_address,
           x.incarnation, x.kernels);
}

/// What a task offers: its devices (and bulk endpoint and incarnation), and a parameter shard
/// per variable its devices hold, by variable name.
struct task_manifest {
  device_list devices;
  std::vector<std::pair<std::string, shard_actor>> shards;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, task_manifest& x) {
  return f(caf::meta::type_name("actorflow::task_manifest"), x.devices, x.shards);
}

/// Any task, as another task watches it (task_joined_atom): a task_actor converts to it.
using task_presence = caf::typed_actor<caf::replies_to<devices_atom>::with<device_list>>;

/// A task service (actors/task_service.hpp): the master protocol, plus
using task_actor = master_actor::extend<
  // every device of the task, by full name;
  caf::replies_to<devices_atom>::with<device_list>,
  // its devices and parameter shards;
  caf::replies_to<manifest_atom>::with<task_manifest>,
  // whether it answers at all (liveness probes): its incarnation, and nothing else made;
  caf::replies_to<probe_atom>::with<std::int64_t>,
  // the shard of the variable with this name (an error naming it when the task has none);
  caf::replies_to<shard_atom, std::string>::with<shard_actor>,
  // task `task` of job `job` has finished its work (a between-graph worker at the end of
  // training). Answers how many tasks of that job have not finished yet; at 0, a task of
  // another job (a ps) stops by itself, so no parameter server outlives its workers.
  caf::replies_to<task_done_atom, std::string, std::int32_t>::with<std::int32_t>,
  // task `task` of job `job`, served by the given task actor, works with this task (a
  // between-graph worker using a ps). The task watches it: when every such worker of a job went
  // away without finishing, it stops after its grace period (a ps outlives no crashed job).
  // Answers how many tasks of that job have joined so far.
  caf::replies_to<task_joined_atom, std::string, std::int32_t, task_presence>::with<std::int32_t>,
  // Collectives across tasks (actors/collective.hpp's collective_group::join): a task of a
  // name that sorts before this one introduces its collective member; the answer is this
  // task's (spawned on first use). One dialer per pair of tasks, as for direct links.
  caf::replies_to<collective_atom, collective_member_info>::with<collective_member_info>,
  // From this task's own process: the member of task `task` of job `job`, answered once that
  // task has introduced it (at once for this task's own). Bounded by the caller's request.
  caf::replies_to<collective_atom, std::string, std::int32_t>::with<collective_member_info>>;
// (stop_atom), inherited from master_actor, shuts the task down: its devices, its master,
// then itself (the worker app exits 0).

} // namespace actorflow::protocol

#pragma once
/// The master's directory of a cluster's devices: what each task listed, sorted, looked up by
/// name or actor, and where unpinned nodes go. A plain class: the master actor asks it what to
/// send, and unit tests drive it without an actor system (null actor handles are fine).
///   device_directory d;
///   AF_RETURN_IF_ERROR(d.add_task("/job:ps/replica:0/task:0 at h:2221", listed));
///   d.finish();                           // sorted by job, task, type, id
///   auto peers = d.peers();               // what every device actor is told
///   auto home = d.default_task(config.default_task, own_task);

#include "actors/cluster_spec.hpp"
#include "actors/protocols/device.hpp"
#include "actors/protocols/task.hpp"
#include "graph/device_name.hpp"
#include "graph/status.hpp"

#include <caf/actor_addr.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace actorflow {

/// A task the cluster spec lists that no known task service covers yet.
struct unreached_task {
  /// "/job:ps/replica:0/task:1 at host:2222", for errors.
  std::string where;
  std::string host;
  std::uint16_t port = 0;
  /// The task, as the origin of the errors of reaching it.
  task_origin task;
};

class device_directory {
public:
  /// Adds the devices a task listed. `where` names the task in errors. Fails (data_loss) on a
  /// device name that is not fully specified; nothing is added then.
  status add_task(const std::string& where, const protocol::device_list& listed);

  /// Sorts the devices by job, task, type and id: placement and partition order depend on it.
  void finish();

  /// Forgets every device (a task went away: the next session finds the cluster again).
  void clear();

  bool empty() const { return devices_.empty(); }

  /// Every device's full name, in order.
  std::vector<device_name> names() const;

  /// Whether a device of type `device_type` runs op `op` with dtype `type`: by the kernel sets
  /// the tasks reported, or, for a type no task reported one for, by this process's registry.
  bool has_kernel(const std::string& op, const std::string& device_type, dtype type) const;

  /// Whether a device of this full name is known.
  bool has(const std::string& full_name) const;

  /// The actor of the device with this full name, or a null handle.
  protocol::device_actor find(const std::string& full_name) const;

  /// Whether `source` is one of the devices' actors.
  bool has_actor(const caf::actor_addr& source) const;

  /// Each device's task incarnation, by full device name (for rendezvous keys).
  const std::map<std::string, std::uint64_t>& incarnations() const { return incarnations_; }

  /// What every device actor is told: every device by name, their bulk endpoints and their
  /// tasks' incarnations.
  protocol::peer_table peers() const;

  /// Where nodes naming neither job nor task go: `requested` (a session's default_task) when
  /// it parses, else `own_task` (the master's own task), else task 0 of job "worker", else of
  /// the first job (an empty name when there are no devices).
  device_name default_task(const std::string& requested, const std::string& own_task) const;

  /// The tasks of `cluster` none of whose devices are known, in the spec's job order, keeping
  /// only those matched by one of `filters` (device-name prefixes such as "/job:ps" or
  /// "/job:worker/task:1"; empty keeps all). Fails on an address or filter that does not parse.
  result<std::vector<unreached_task>> unreached(const cluster_spec& cluster,
                                                const std::vector<std::string>& filters = {}) const;

  const std::vector<std::pair<device_name, protocol::device_actor>>& devices() const {
    return devices_;
  }

private:
  std::vector<std::pair<device_name, protocol::device_actor>> devices_;
  /// Bulk endpoint "host:port" by full device name, for devices whose task listed one.
  std::map<std::string, std::string> bulk_addresses_;
  std::map<std::string, std::uint64_t> incarnations_;
  /// device_list::kernels of every task, merged by device type.
  std::map<std::string, std::set<std::string>> kernels_;
};

} // namespace actorflow

#pragma once
/// The task service's protocol: one actor per task (a ps or worker process) that owns the task's
/// device actors and tells clients and masters where they are.
///   auto task = sys.middleman().remote_actor("127.0.0.1", port);      // a published task
///   self->request(*task, timeout, devices_atom::value).receive([](device_list& l) { ... });
///
/// Messages a task service handles:
///   (devices_atom)  -> device_list     every device of the task, by full name
///   (stop_atom)     -> (nothing)       shuts the task down (the worker app exits 0)

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>

#include <string>
#include <utility>
#include <vector>

namespace actorflow::protocol {

using devices_atom = caf::atom_constant<caf::atom("devices")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;

/// A task's devices: full names ("/job:ps/replica:0/task:0/device:CPU:0") and their actors.
struct device_list {
  std::vector<std::pair<std::string, caf::actor>> devices;
  /// "host:port" of the task's bulk tensor endpoint (actors/bulk_channel.hpp), where large
  /// tensors for these devices may be sent; empty when the task has none.
  std::string bulk_address;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, device_list& x) {
  return f(caf::meta::type_name("actorflow::device_list"), x.devices, x.bulk_address);
}

} // namespace actorflow::protocol

#pragma once
/// The device actor's protocol: registering partitions, running steps, moving tensors.
///   auto dev = spawn_device_actor(sys, make_cpu_device(name, pool), options);
///   self->request(dev, infinite, register_atom::value, partition_registration{1, part});
///   self->request(dev, infinite, run_atom::value, run_request{1, step, feeds, fetches});
/// Inside a process every message is a plain struct shared by reference (tensors are never
/// copied); the structs gain wire encodings when they cross processes.
///
/// Messages a device actor handles:
///   (register_atom, partition_registration)        -> status
///   (deregister_atom, int64 handle)                -> status
///   (peers_atom, peer_table)                       -> (nothing)
///   (run_atom, run_request)                        -> step_result   (when the step ends)
///   (tensor_atom, tensor_transfer)                 -> (nothing)     from another device
///   (abort_atom, int64 step_id, status)            -> (nothing)

#include "graph/graph.hpp"
#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace actorflow::protocol {

using register_atom = caf::atom_constant<caf::atom("register")>;
using deregister_atom = caf::atom_constant<caf::atom("dereg")>;
using peers_atom = caf::atom_constant<caf::atom("peers")>;
using run_atom = caf::atom_constant<caf::atom("run")>;
using tensor_atom = caf::atom_constant<caf::atom("tensor")>;
using abort_atom = caf::atom_constant<caf::atom("abort")>;
using finished_atom = caf::atom_constant<caf::atom("finished")>;

/// A partition to run under `handle` on one device; the graph is shared, never copied.
struct partition_registration {
  std::int64_t handle = 0;
  std::shared_ptr<const graph> partition;
};

inline partition_registration make_partition_registration(std::int64_t handle,
                                                           std::shared_ptr<const graph> partition) {
  return partition_registration{handle, std::move(partition)};
}

/// Device actors by full device name, for _Send nodes to address their receivers.
struct peer_table {
  std::map<std::string, caf::actor> devices;
};

/// One step of one registered partition.
struct run_request {
  std::int64_t handle = 0;
  std::int64_t step_id = 0;
  std::vector<std::pair<std::string, tensor>> feeds;
  std::vector<std::string> fetches;
};

inline run_request make_run_request(std::int64_t handle, std::int64_t step_id,
                                    std::vector<std::pair<std::string, tensor>> feeds,
                                    std::vector<std::string> fetches) {
  return run_request{handle, step_id, std::move(feeds), std::move(fetches)};
}

/// A device's answer to a run_request: its status and the fetched tensors in request order.
struct step_result {
  status outcome;
  std::vector<tensor> fetched;
  /// Time the device spent executing its partition, start to last node.
  std::int64_t execution_ns = 0;
};

/// A tensor crossing from one device to another for one step.
struct tensor_transfer {
  std::int64_t step_id = 0;
  std::string key;
  tensor value;
};

} // namespace actorflow::protocol

// Local-only for now: these structs hold shared graphs and tensors by reference.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actorflow::status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actorflow::protocol::partition_registration)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actorflow::protocol::peer_table)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actorflow::protocol::run_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actorflow::protocol::step_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actorflow::protocol::tensor_transfer)

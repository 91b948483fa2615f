#pragma once
/// The device actor's protocol: registering partitions, running steps, moving tensors.
///   device_actor dev = spawn_device_actor(sys, make_cpu_device(name, pool), options);
///   self->request(dev, infinite, register_atom::value, make_partition_registration(1, part));
///   self->request(dev, infinite, run_atom::value, make_run_request(1, step, feeds, fetches));
/// `device_actor` is a CAF typed actor: a message it does not handle does not compile.
/// Inside a process every message is a plain struct shared by reference (tensors are never
/// copied); CAF encodes them with the `inspect` overloads below only when they cross processes
/// (register them with add_actorflow_message_types, actors/protocols/wire.hpp).
///

#include "actors/protocols/wire.hpp"
#include "devices/update_fence.hpp"
#include "graph/graph.hpp"
#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include "actors/protocols/atoms.hpp"

#include <caf/deserializer.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/save_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/serializer.hpp>
#include <caf/typed_actor.hpp>
#include <caf/replies_to.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace actorflow {

/// Dispatches an inspector to the wire codecs (serializer, deserializer) or, for CAF's
/// printing inspectors, to a short description made by `describe()`.
template <class Inspector, class T, class Describe>
typename Inspector::result_type inspect_with_codec(Inspector& f, T& x, const char* name,
                                                   Describe describe) {
  if constexpr (std::is_base_of_v<caf::serializer, Inspector>)
    return wire::save(f, x);
  else if constexpr (std::is_base_of_v<caf::deserializer, Inspector>)
    return wire::load(f, x);
  else
    return f(caf::meta::type_name(name), describe());
}

/// A status on the wire: its code and message.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, status& x) {
  return inspect_with_codec(f, x, "status", [&] { return x.to_string(); });
}

/// A tensor on the wire: dtype, shape and its bytes as one block (see wire.hpp). Loading
/// allocates from the default host allocator only after every size has been checked.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tensor& x) {
  return inspect_with_codec(f, x, "tensor", [&] { return x.debug_string(); });
}

} // namespace actorflow

namespace actorflow::protocol {

struct partition_registration;
struct peer_table;
struct run_request;
struct step_result;
struct tensor_transfer;
struct tensor_chunk;

/// A device actor (actors/device_actor.hpp): one per device of a task.
using device_actor = caf::typed_actor<
  // Makes a partition runnable under its handle (plans it once).
  caf::replies_to<register_atom, partition_registration>::with<status>,
  // Frees the partition registered under a handle.
  caf::replies_to<deregister_atom, std::int64_t>::with<status>,
  // Where _Send nodes find their receivers.
  caf::reacts_to<peers_atom, peer_table>,
  // Runs one step of a partition; answered when the step ends on this device.
  caf::replies_to<run_atom, run_request>::with<step_result>,
  // A tensor from another device (or, locally, from the task's bulk endpoint).
  caf::reacts_to<tensor_atom, tensor_transfer>,
  // A piece of a large tensor from another process.
  caf::reacts_to<tensor_atom, tensor_chunk>,
  // Ends a step on this device with a reason (another device failed).
  caf::reacts_to<abort_atom, std::int64_t, status>,
  // Answered at once with the number of steps in flight here: a device that answers is alive,
  // so a step it did not finish in time was waiting on another (the coordinator asks).
  caf::replies_to<probe_atom>::with<std::int64_t>,
  // An all-or-nothing step commits: its held updates apply. From the step's coordinator.
  caf::reacts_to<commit_atom, std::int64_t>,
  // Whether this device committed the step (lately): a device of the step whose coordinator
  // went away asks the step's other devices (run_request::commit_participants), so that the
  // step commits everywhere when the coordinator committed it anywhere before it died.
  caf::replies_to<committed_atom, std::int64_t>::with<bool>>;

/// A partition to run under `handle` on one device; the graph is shared, never copied.
struct partition_registration {
  std::int64_t handle = 0;
  std::shared_ptr<const graph> partition;
  /// The session's memory limit on this device (session_config::memory_limit_bytes); 0: none
  /// but the task's.
  std::int64_t memory_limit_bytes = 0;
  /// The master's session handle: the session's plans share the kernels that keep state (a
  /// random op continues its sequence in every run signature). 0: the plan keeps its own.
  std::int64_t session = 0;
};

inline partition_registration make_partition_registration(std::int64_t handle,
                                                           std::shared_ptr<const graph> partition,
                                                           std::int64_t memory_limit_bytes = 0,
                                                           std::int64_t session = 0) {
  return partition_registration{handle, std::move(partition), memory_limit_bytes, session};
}

/// Device actors by full device name, for _Send nodes to address their receivers.
struct peer_table {
  std::map<std::string, device_actor> devices;
  /// Bulk endpoint "host:port" by full device name, for devices whose task has one: large
  /// tensors for them leave the process over the bulk channel (actors/bulk_channel.hpp).
  std::map<std::string, std::string> bulk_addresses;
  /// The incarnation of each device's task (graph/rendezvous_key.hpp), where known: a tensor
  /// whose key names another incarnation of its sender is refused.
  std::map<std::string, std::uint64_t> incarnations;
};

/// One step of one registered partition.
struct run_request {
  std::int64_t handle = 0;
  std::int64_t step_id = 0;
  std::vector<std::pair<std::string, tensor>> feeds;
  std::vector<std::string> fetches;
  /// What this step's variable updates claim (devices/update_fence.hpp); unfenced by default.
  update_fence fence;
  /// Hold the partition's first updates (commit_gate_attr) until the coordinator commits the
  /// step (devices/commit_gate.hpp).
  bool all_or_nothing = false;
  /// All-or-nothing: the full names of the step's devices that hold first updates, whom this
  /// device asks whether they committed when the coordinator goes away before deciding here.
  std::vector<std::string> commit_participants;
};

inline run_request make_run_request(std::int64_t handle, std::int64_t step_id,
                                    std::vector<std::pair<std::string, tensor>> feeds,
                                    std::vector<std::string> fetches) {
  return run_request{handle, step_id, std::move(feeds), std::move(fetches), {}, false, {}};
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

inline tensor_transfer make_tensor_transfer(std::int64_t step_id, std::string key, tensor value) {
  return tensor_transfer{step_id, std::move(key), std::move(value)};
}

/// One piece of a tensor crossing to a device actor in another process for one step, used
/// when the tensor has more than wire_chunk_bytes() bytes (actors/protocols/wire.hpp). The
/// receiving device actor copies the pieces, in any order, into one tensor allocated when the
/// first arrives and hands it to the step's rendezvous once every byte has arrived. Made by
/// make_tensor_chunks.
struct tensor_chunk {
  std::int64_t step_id = 0;
  /// The rendezvous key, as in tensor_transfer.
  std::string key;
  /// The whole tensor: dtype, shape and byte count (dtype size times elements).
  dtype type = dtype::float32;
  tensor_shape shape;
  std::uint64_t total_bytes = 0;
  /// This piece: `size` bytes starting `offset` bytes into the tensor's bytes.
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  /// Owns the memory `data` points into: on the sender the tensor's own buffer (a chunk
  /// copies nothing until CAF encodes it), on the receiver a buffer of the chunk's own.
  std::shared_ptr<const buffer> storage;
  /// The piece's first byte; valid as long as `storage` lives.
  const void* data = nullptr;
};

/// Splits `value` into chunks of at most `chunk_bytes` (at least 1) bytes, in offset order,
/// each sharing value's buffer (nothing is copied). A tensor without bytes gives no chunks.
std::vector<tensor_chunk> make_tensor_chunks(std::int64_t step_id, const std::string& key,
                                             const tensor& value, std::size_t chunk_bytes);

/// Encodes the chunk's header and bytes with the checked codecs of wire.hpp.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tensor_chunk& x) {
  return inspect_with_codec(f, x, "tensor_chunk", [&] {
    return x.key + " " + to_string(x.type) + x.shape.to_string() + " bytes [" +
           std::to_string(x.offset) + ", " + std::to_string(x.offset + x.size) + ") of " +
           std::to_string(x.total_bytes);
  });
}

/// The partition travels as serialize_graph's bytes and is decoded into a new graph.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, partition_registration& x) {
  if constexpr (std::is_base_of_v<caf::serializer, Inspector>) {
    return f(caf::meta::type_name("partition_registration"), x.handle, x.memory_limit_bytes, x.session,
             caf::meta::save_callback([&] { return wire::save(f, x.partition); }));
  } else if constexpr (std::is_base_of_v<caf::deserializer, Inspector>) {
    return f(caf::meta::type_name("partition_registration"), x.handle, x.memory_limit_bytes, x.session,
             caf::meta::load_callback([&] { return wire::load(f, x.partition); }));
  } else {
    auto nodes = x.partition ? std::to_string(x.partition->size()) + " nodes" : "no graph";
    return f(caf::meta::type_name("partition_registration"), x.handle, x.session, nodes);
  }
}

/// Actor handles encode as CAF's node and actor ids; remote ones decode to proxies.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, peer_table& x) {
  return f(caf::meta::type_name("peer_table"), x.devices, x.bulk_addresses, x.incarnations);
}

/// Feeds carry their tensors' bytes (see inspect(tensor)).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_request& x) {
  return f(caf::meta::type_name("run_request"), x.handle, x.step_id, x.feeds, x.fetches,
           x.fence, x.all_or_nothing, x.commit_participants);
}

/// Encodes the status, the fetched tensors and the execution time.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_result& x) {
  return f(caf::meta::type_name("step_result"), x.outcome, x.fetched, x.execution_ns);
}

/// Encodes the step, the rendezvous key and the tensor.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tensor_transfer& x) {
  return f(caf::meta::type_name("tensor_transfer"), x.step_id, x.key, x.value);
}

} // namespace actorflow::protocol

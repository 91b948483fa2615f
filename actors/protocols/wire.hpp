#pragma once
/// Wire encodings of actorflow's messages, for when they leave the process through CAF's
/// middleman. Every embedder registers the message types on its own config:
///   caf::actor_system_config cfg;
///   actorflow::add_actorflow_message_types(cfg);   // before constructing the actor_system
///   caf::actor_system sys{cfg};
/// Inside one process CAF never serializes a message: tensors and graphs stay shared by
/// reference. The `inspect` overloads that use these codecs live next to the message structs
/// (actors/protocols/device.hpp, actors/device_actor.hpp).
///
/// Decoding treats its input as hostile: every size is checked against the bytes actually left
/// and against the caps below before anything is allocated; failures are caf::error values in
/// the "actorflow" category (code = actorflow::errc), never crashes.
///
/// Encodings (all integers in CAF's binary format; tensor bytes in host order, which must be
/// little-endian):
///   status:  uint8 code, string message
///   tensor:  uint8 dtype, bool initialized; if initialized: bool rank_known, uint32 rank,
///            int64 dims..., uint64 byte count, the raw bytes as one block
///   graph:   bool present; if present: uint64 byte count, serialize_graph's Cap'n Proto bytes

#include "graph/graph.hpp"
#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include <caf/error.hpp>
#include <caf/fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace actorflow {

/// The largest tensor (in data bytes) one message may carry. A peer claiming more is refused
/// before anything is allocated; larger tensors will be sent in chunks (not yet implemented,
/// so today they fail to encode with a clear error).
inline constexpr std::size_t max_tensor_message_bytes = std::size_t{256} << 20;

/// The largest encoded partition graph one message may carry.
inline constexpr std::size_t max_graph_message_bytes = std::size_t{256} << 20;

/// The most dimensions a tensor on the wire may have (TensorFlow's limit).
inline constexpr std::size_t max_tensor_rank = 254;

/// Registers every actorflow message type (statuses, tensors, the device protocol's structs,
/// step plans and outcomes) and the "actorflow" error category with `cfg`. Call it once on
/// every config whose actor_system sends or receives actorflow messages across processes;
/// actorflow's own default_actor_system() does.
void add_actorflow_message_types(caf::actor_system_config& cfg);

/// The master protocol's share of add_actorflow_message_types (defined in actors/master.cpp).
void add_master_message_types(caf::actor_system_config& cfg);

/// An error in the "actorflow" category carrying `code` and `message`.
caf::error make_wire_error(errc code, std::string message);

/// The status a caf::error stands for: actorflow-category errors map back to their code and
/// message; any other error becomes data_loss (for CAF's serialization errors) or unavailable
/// with CAF's rendering of it; no error gives ok.
status status_from_error(const caf::error& err);

namespace wire {

/// Codecs behind the `inspect` overloads. Each writes or reads exactly the layout described at
/// the top of this header; loads leave `x` unchanged on error.
caf::error save(caf::serializer& sink, const status& x);
caf::error load(caf::deserializer& source, status& x);
caf::error save(caf::serializer& sink, const tensor& x);
caf::error load(caf::deserializer& source, tensor& x);
caf::error save(caf::serializer& sink, const std::shared_ptr<const graph>& x);
/// Decodes into a new graph, which deserialize_graph validates.
caf::error load(caf::deserializer& source, std::shared_ptr<const graph>& x);

} // namespace wire
} // namespace actorflow

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
///   status:  uint8 code, string message, bool has_origin; if has_origin: string job,
///            int32 task, uint64 incarnation (status::origin(), the task it came from)
///   tensor:  uint8 dtype, bool initialized; if initialized: bool rank_known, uint32 rank,
///            int64 dims..., uint64 byte count, the raw bytes as one block
///            (byte count <= max_tensor_message_bytes)
///   tensor chunk (protocol::tensor_chunk, one piece of a tensor too large for one message):
///            int64 step id, string key, uint8 dtype, uint32 rank, int64 dims..., uint64 total
///            byte count (must equal dtype size * elements and be <= max_tensor_bytes()),
///            uint64 offset, uint64 byte count (>= 1, <= max_tensor_message_bytes, offset +
///            byte count <= total), the chunk's raw bytes as one block
///   graph:   bool present; if present: uint64 byte count, serialize_graph's Cap'n Proto bytes
///
/// Tensors larger than wire_chunk_bytes() travel between device actors in different processes
/// as several tensor chunks, which the receiving device actor reassembles into one tensor
/// (allocated once) before its _Recv sees it; in-process sends are never split or copied.
/// Tensors of at least bulk_min_bytes() for a device whose task has a bulk endpoint skip these
/// encodings altogether: they go over the bulk channel (actors/bulk_channel.hpp, its own frame).

#include "graph/environment.hpp"
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

namespace protocol {
struct tensor_chunk;
} // namespace protocol

/// The largest tensor (in data bytes) one message may carry, and the largest tensor chunk. A
/// peer claiming more is refused before anything is allocated; device actors send larger
/// tensors in chunks (see wire_chunk_bytes()), any other message carrying one fails to encode
/// with a clear error.
inline constexpr std::size_t max_tensor_message_bytes = std::size_t{256} << 20;

/// The default of max_tensor_bytes(): the largest tensor a process accepts in chunks.
inline constexpr std::size_t default_max_tensor_bytes = std::size_t{8} << 30;

/// The largest encoded partition graph one message may carry.
inline constexpr std::size_t max_graph_message_bytes = std::size_t{256} << 20;


/// The most dimensions a tensor on the wire may have (TensorFlow's limit).
inline constexpr std::size_t max_tensor_rank = 254;

/// Device actors split a tensor of more than this many bytes into chunks of at most this many
/// when they send it to a device actor in another process. max_tensor_message_bytes unless the
/// environment variable ACTORFLOW_WIRE_CHUNK_BYTES (read on the first call) or
/// set_wire_chunk_bytes() says otherwise; always between 1 and max_tensor_message_bytes.
/// Thread-safe.
std::size_t wire_chunk_bytes();

/// Overrides wire_chunk_bytes() for this process (clamped to 1 .. max_tensor_message_bytes);
/// 0 goes back to the default. For tests and benchmarks; thread-safe.
void set_wire_chunk_bytes(std::size_t bytes);

/// The largest tensor (in data bytes) this process accepts in chunks: a chunk declaring a
/// larger total is refused before anything is allocated. default_max_tensor_bytes unless the
/// environment variable ACTORFLOW_WIRE_MAX_TENSOR_BYTES (read on the first call) or
/// set_max_tensor_bytes() says otherwise. Thread-safe.
std::size_t max_tensor_bytes();

/// Overrides max_tensor_bytes() for this process; 0 goes back to the default. Thread-safe.
void set_max_tensor_bytes(std::size_t bytes);

/// Registers every actorflow message type (statuses, tensors, the device protocol's structs,
/// step plans and outcomes) and the "actorflow" error category with `cfg`. Call it once on
/// every config whose actor_system sends or receives actorflow messages across processes;
/// actorflow's own default_actor_system() does.
void add_actorflow_message_types(caf::actor_system_config& cfg);

/// The master protocol's share of add_actorflow_message_types (defined in actors/master.cpp).
void add_master_message_types(caf::actor_system_config& cfg);

/// An error in the "actorflow" category carrying `code` and `message`.
caf::error make_wire_error(errc code, std::string message);
/// The same for `s`, with its origin (status_from_error gives it back); no error for ok.
caf::error make_wire_error(const status& s);

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
/// Writes the chunk's header and its bytes (read through x.data, never copied first).
caf::error save(caf::serializer& sink, const protocol::tensor_chunk& x);
/// Checks the header (dtype, shape, total against the shape and max_tensor_bytes(), the
/// chunk's range against the total, its size against max_tensor_message_bytes and the bytes
/// left) before allocating the chunk's own buffer from the default host allocator.
caf::error load(caf::deserializer& source, protocol::tensor_chunk& x);

} // namespace wire
} // namespace actorflow

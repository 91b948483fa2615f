#pragma once
/// Graphs and tensors to and from bytes and files (Cap'n Proto schema serialization/graph.capnp).
///   AF_RETURN_IF_ERROR(save_graph(g, "/tmp/model.graph"));
///   graph loaded;
///   AF_RETURN_IF_ERROR(load_graph("/tmp/model.graph", loaded));
/// This header carries no Cap'n Proto types: including it does not pull capnp in.
///
/// Loading treats its input as hostile. Truncated, corrupted or crafted bytes give an error
/// value (errc::data_loss for bytes that cannot be trusted), never a crash, a hang or a huge
/// allocation; every index, name, enum value, shape and tensor size is checked, and errors name
/// the node (index and name) and the field at fault.
///
/// All functions are reentrant and may be called from any thread; a graph passed in must not be
/// modified concurrently.

#include "graph/graph.hpp"
#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace actorflow {

/// The schema version written by this build (Graph.formatVersion). Readers accept 1..this.
inline constexpr std::uint32_t graph_format_version = 1;

/// Encodes every node of `g` (names, ops, inputs, control inputs, attrs including tensor
/// values, requested and assigned devices, output types and shapes, kernel type), its
/// variables and its seed as one flat Cap'n Proto message. Scope state (name scopes, device
/// and control-dependency stacks) is not part of the encoding. Fails with invalid_argument
/// for a tensor too large for one Cap'n Proto blob (2^29 - 1 bytes).
result<std::vector<std::uint8_t>> serialize_graph(const graph& g);

/// Decodes bytes made by serialize_graph into `out`, which must be empty (no nodes, no
/// variables). The bytes are only read during the call and may have any alignment.
/// On error `out` holds an unspecified prefix of the graph with the error recorded in
/// out.status(); it must not be used except to be destroyed.
status deserialize_graph(const std::uint8_t* data, std::size_t size, graph& out);

/// Writes serialize_graph(g) to `path` atomically: a temporary file in the same directory is
/// written, fsynced and renamed over `path`, so readers see the old file or the new one, never
/// a torn one. Errors name the file.
status save_graph(const graph& g, const std::string& path);

/// Reads a file written by save_graph into the empty graph `out` (see deserialize_graph).
/// Errors name the file.
status load_graph(const std::string& path, graph& out);

/// Encodes one tensor as a standalone schema::Tensor message (dtype, shape, raw little-endian
/// bytes copied in one block).
result<std::vector<std::uint8_t>> serialize_tensor(const tensor& t);

/// Decodes bytes made by serialize_tensor into a fresh tensor from the default host allocator.
/// The data size is checked against the shape before anything is allocated.
result<tensor> deserialize_tensor(const std::uint8_t* data, std::size_t size);

} // namespace actorflow

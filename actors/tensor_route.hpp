#pragma once
/// How a tensor travels to its receiver, decided in one place (device actors' sends, shard
/// pushes): by reference inside a process, in one CAF message, in checked chunks over CAF's
/// per-message cap, or over the receiver task's bulk channel.
///   switch (choose_tensor_route({same_process, have_sender, address, value.bytes()})) { ... }

#include "actors/bulk_channel.hpp"
#include "actors/protocols/wire.hpp"

#include <cstddef>
#include <string_view>

namespace actorflow {

enum class tensor_route {
  /// Same process: the message carries the tensor by reference, nothing is encoded.
  in_process,
  /// Another process, one CAF message.
  message,
  /// Another process, over wire_chunk_bytes(): tensor_chunks, reassembled by the receiver.
  chunks,
  /// Another process whose task has a bulk endpoint, at least bulk_min_bytes(): a bulk frame.
  bulk,
};

struct tensor_route_facts {
  bool same_process = false;
  /// Whether this side has a bulk sender at all.
  bool can_send_bulk = false;
  /// The receiver task's bulk endpoint ("host:port"); empty when it has none.
  std::string_view receiver_bulk_address;
  std::size_t bytes = 0;
};

/// The route for `facts`, with the thresholds as they are now (bulk_min_bytes(),
/// wire_chunk_bytes(); both can be changed for tests and benchmarks).
inline tensor_route choose_tensor_route(const tensor_route_facts& facts) {
  if (facts.same_process)
    return tensor_route::in_process;
  if (facts.can_send_bulk && !facts.receiver_bulk_address.empty() && facts.bytes >= bulk_min_bytes())
    return tensor_route::bulk;
  if (facts.bytes > wire_chunk_bytes())
    return tensor_route::chunks;
  return tensor_route::message;
}

} // namespace actorflow

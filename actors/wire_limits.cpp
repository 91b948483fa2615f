// The wire's size limits (actors/protocols/wire.hpp), apart from the CAF encoders: the bulk
// frame and tensor header decoders use them too, and so do the fuzzers, built without CAF.
#include "actors/protocols/wire.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>

namespace actorflow {
namespace {

std::size_t clamp_chunk_bytes(std::size_t bytes) {
  return std::clamp<std::size_t>(bytes, 1, max_tensor_message_bytes);
}

std::atomic<std::size_t> chunk_bytes_override{0};
std::atomic<std::size_t> max_tensor_bytes_override{0};

} // namespace

std::size_t wire_chunk_bytes() {
  if (auto bytes = chunk_bytes_override.load(std::memory_order_relaxed))
    return bytes;
  static const std::size_t from_environment = clamp_chunk_bytes(
    size_from_environment("ACTORFLOW_WIRE_CHUNK_BYTES", max_tensor_message_bytes));
  return from_environment;
}

void set_wire_chunk_bytes(std::size_t bytes) {
  chunk_bytes_override.store(bytes == 0 ? 0 : clamp_chunk_bytes(bytes), std::memory_order_relaxed);
}

std::size_t max_tensor_bytes() {
  if (auto bytes = max_tensor_bytes_override.load(std::memory_order_relaxed))
    return bytes;
  static const std::size_t from_environment =
    size_from_environment("ACTORFLOW_WIRE_MAX_TENSOR_BYTES", default_max_tensor_bytes);
  return from_environment;
}

void set_max_tensor_bytes(std::size_t bytes) {
  max_tensor_bytes_override.store(bytes, std::memory_order_relaxed);
}

} // namespace actorflow

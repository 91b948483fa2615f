#include "devices/memory_budget.hpp"

#include "graph/environment.hpp"

#include <algorithm>

namespace actorflow {

memory_budget::memory_budget(std::string owner, std::size_t limit_bytes)
  : owner_(std::move(owner)), limit_(limit_bytes) {}

void memory_budget::charge(std::size_t bytes) {
  auto used = in_use_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ || used > limit_ - bytes)
      throw allocation_failure(
        "memory limit of " + owner_ + ": cannot allocate " + format_bytes(bytes) + "; its tensors hold " +
        format_bytes(used) + " of its limit of " + format_bytes(limit_) +
        " (session_options::memory_limit_bytes, ACTORFLOW_SESSION_MEMORY_BYTES)");
  } while (!in_use_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  auto now = used + bytes;
  auto peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

tensor memory_budget::allocate(dtype type, tensor_shape shape, allocator* from) {
  auto bytes = check_tensor_allocation_cap(type, shape);
  charge(bytes);
  std::unique_ptr<buffer> made;
  try {
    made = std::make_unique<buffer>(from, bytes);
  } catch (...) {
    refund(bytes);
    throw;
  }
  // The refund rides on the buffer's end, however long a fetch or a variable keeps it.
  std::shared_ptr<buffer> charged{made.release(), [self = shared_from_this(), bytes](buffer* b) {
                                    delete b;
                                    self->refund(bytes);
                                  }};
  return tensor{type, std::move(shape), std::move(charged)};
}

std::size_t session_memory_limit(std::size_t requested) {
  static const std::size_t process_limit = size_from_environment("ACTORFLOW_SESSION_MEMORY_BYTES", 0);
  if (requested == 0)
    return process_limit;
  if (process_limit == 0)
    return requested;
  return std::min(requested, process_limit);
}

} // namespace actorflow

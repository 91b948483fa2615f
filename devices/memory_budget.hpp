#pragma once
/// A cap on the memory one session's steps hold on one device: every output its kernels
/// allocate is charged when made and returned when its last reference dies (a fetched result
/// or a variable's new value keeps counting until then). Going over fails the allocation, and
/// so the step, with an error naming the node, the device, the bytes and the limit.
///   auto budget = std::make_shared<memory_budget>("session partition 3 on /device:CPU:0", limit);
///   tensor t = budget->allocate(dtype::float32, shape, dev.device_allocator());
/// The limit is session_options::memory_limit_bytes, capped by the process's
/// ACTORFLOW_SESSION_MEMORY_BYTES (a worker's bound on what any client may make it hold).

#include "graph/tensor.hpp"

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

namespace actorflow {

class memory_budget : public std::enable_shared_from_this<memory_budget> {
public:
  /// `owner` names what is capped in messages; `limit_bytes` is above 0.
  memory_budget(std::string owner, std::size_t limit_bytes);

  /// A tensor from `from`, charged to this budget until its buffer dies. Throws
  /// allocation_failure (the per-tensor cap, this limit, or `from` itself) charging nothing.
  tensor allocate(dtype type, tensor_shape shape, allocator* from);

  std::size_t limit_bytes() const { return limit_; }
  std::size_t bytes_in_use() const { return in_use_.load(std::memory_order_relaxed); }
  std::size_t peak_bytes_in_use() const { return peak_.load(std::memory_order_relaxed); }

private:
  void charge(std::size_t bytes);
  void refund(std::size_t bytes) { in_use_.fetch_sub(bytes, std::memory_order_relaxed); }

  std::string owner_;
  std::size_t limit_;
  std::atomic<std::size_t> in_use_{0};
  std::atomic<std::size_t> peak_{0};
};

/// The limit a session's partition gets: the smaller of `requested` and the process's
/// ACTORFLOW_SESSION_MEMORY_BYTES, where each is set (0: not set); 0 when neither is.
std::size_t session_memory_limit(std::size_t requested);

} // namespace actorflow

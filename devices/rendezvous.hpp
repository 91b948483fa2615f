#pragma once
/// Where a step's tensors meet their receivers on one device: a _Recv waits for a key, a
/// delivery from another device fills it. Thread-safe; callbacks run outside the lock.
///   rendezvous rv;
///   rv.recv("a;b;x:0", [](result<tensor> t) { ... });
///   rv.deliver("a;b;x:0", value);     // runs the callback
///   rv.abort(error);                  // every waiting and later recv gets `error`

#include "graph/tensor.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace actorflow {

class rendezvous {
public:
  using callback = std::function<void(result<tensor>)>;

  void deliver(const std::string& key, tensor value);
  void recv(const std::string& key, callback done);
  void abort(const status& reason);
  /// Whether abort() was called: later deliveries are dropped.
  bool aborted() const;

private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, tensor> arrived_;
  std::unordered_map<std::string, callback> waiting_;
  status aborted_;
};

/// Reassembles tensors that arrive in pieces (byte ranges, in any order) into one tensor each,
/// allocated once from the default host allocator when its first piece arrives. Pieces are
/// refused (and the partial tensor dropped) when they disagree with the tensor's dtype, shape
/// or size, overlap bytes already received, or declare a tensor over the size limit. Not
/// thread-safe: one owner (a device actor) calls it.
///   tensor_assembler assembler{max_bytes};
///   auto done = assembler.add(step, key, type, shape, total, offset, data, size);
///   if (!done) refuse(done.error());                       // the partial tensor is gone
///   else if (done->is_initialized()) deliver(std::move(*done)); // that was the last piece
///   assembler.drop_step(step);                             // step aborted or ended
class tensor_assembler {
public:
  /// `max_tensor_bytes` bounds the tensor one first piece may make this allocate.
  explicit tensor_assembler(std::uint64_t max_tensor_bytes) : max_tensor_bytes_(max_tensor_bytes) {}

  /// Copies `size` bytes from `data` to `offset` of the tensor (type, shape, total_bytes)
  /// under (step_id, key). Gives the whole tensor when these were its last missing bytes, an
  /// empty handle while bytes are missing, or an error (data_loss for pieces that do not fit
  /// or overlap, resource_exhausted for a tensor over the limit or out of memory).
  result<tensor> add(std::int64_t step_id, const std::string& key, dtype type,
                     const tensor_shape& shape, std::uint64_t total_bytes, std::uint64_t offset,
                     const void* data, std::uint64_t size);

  /// Drops every partial tensor of `step_id`.
  void drop_step(std::int64_t step_id);

  /// Partial tensors held, and the bytes allocated for them.
  std::size_t partial_count() const;
  std::uint64_t partial_bytes() const { return partial_bytes_; }

private:
  struct partial {
    dtype type = dtype::float32;
    tensor_shape shape;
    tensor value;
    std::uint64_t received = 0;
    /// Received byte ranges [begin, end), adjacent ones merged.
    std::map<std::uint64_t, std::uint64_t> ranges;
  };

  std::uint64_t max_tensor_bytes_;
  std::uint64_t partial_bytes_ = 0;
  std::unordered_map<std::int64_t, std::unordered_map<std::string, partial>> steps_;
};

} // namespace actorflow

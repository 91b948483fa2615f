#pragma once
/// A pooling host allocator: freed buffers go to per-size-class free lists and are handed out
/// again, so that steady-state training steps allocate no fresh memory.
///   install_host_pool_allocator();                  // tensors now come from the pool
///   tensor t{dtype::float32, {1024, 1024}};         // first time: fresh memory
///   auto s = host_pool_allocator().stats();         // s.reuse_hits, s.bytes_cached, ...
/// Fresh memory is expensive on the VMs this runs on: the first touch of each 4 KiB page
/// faults (about 11 us a page), so a 4 MiB activation made anew every step costs ~11 ms.

#include "graph/tensor.hpp"

#include <array>
#include <chrono>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace actorflow {

/// Counters of a pool_allocator; a consistent-enough snapshot (each field is read atomically,
/// the set is not).
struct pool_allocator_stats {
  /// Bytes of size-class blocks currently handed out.
  std::size_t bytes_in_use = 0;
  /// The largest bytes_in_use seen.
  std::size_t peak_bytes_in_use = 0;
  /// Bytes of blocks kept in the free lists for reuse.
  std::size_t bytes_cached = 0;
  /// allocate() calls.
  std::uint64_t allocations = 0;
  /// allocate() calls served from a free list.
  std::uint64_t reuse_hits = 0;
  /// allocate() calls that had to get fresh memory from the system.
  std::uint64_t system_allocations = 0;
};

/// Rounds each request up to a size class (64, 128, 256 bytes, then quarter steps between
/// powers of two, so at most 25% is wasted), every block 64-byte aligned. Thread-safe: each
/// size class has its own lock, so threads allocating different sizes do not contend.
class pool_allocator final : public allocator {
public:
  /// `max_cached_bytes` bounds the free lists; a freed block that would exceed it goes back to
  /// the system instead. Cached blocks of large_block_bytes or more that nobody has used for
  /// `large_block_idle` go back to the system too (a 2 GiB tensor used once must not hold 2 GiB
  /// for the rest of the process): checked at most once a second by allocate and deallocate.
  explicit pool_allocator(std::size_t max_cached_bytes = default_max_cached_bytes,
                          std::chrono::milliseconds large_block_idle = default_large_block_idle);
  /// Releases the cached blocks. Blocks still in use must not be freed after this.
  ~pool_allocator() override;
  pool_allocator(const pool_allocator&) = delete;
  pool_allocator& operator=(const pool_allocator&) = delete;

  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  const char* name() const override { return "host_pool"; }

  pool_allocator_stats stats() const;

  /// Returns every cached block to the system; blocks in use are unaffected.
  void trim();

  /// Returns the cached large blocks of every size nobody allocated or freed for
  /// large_block_idle to the system now (what allocate and deallocate do once a second).
  void release_idle_large_blocks();

  /// The size of the block a request of `bytes` gets.
  static std::size_t class_size(std::size_t bytes);

  static constexpr std::size_t default_max_cached_bytes = std::size_t{4} << 30;
  static constexpr std::size_t large_block_bytes = std::size_t{64} << 20;
  static constexpr std::chrono::milliseconds default_large_block_idle{5000};

private:
  static std::size_t class_index(std::size_t bytes);
  /// The block size of class `i` (every block of a class has it).
  static std::size_t class_size_of_index(std::size_t i);

  struct size_class {
    std::mutex mutex;
    std::vector<void*> free_blocks;
    /// The last allocate or deallocate of this size (large classes only).
    std::chrono::steady_clock::time_point last_used{};
  };

  /// release_idle_large_blocks when a second has passed since the last time.
  void maybe_release_idle_large_blocks();

  // 3 small classes plus 4 quarter steps for each power of two from 2^8 to 2^63.
  static constexpr std::size_t num_classes = 3 + 4 * 56;

  std::size_t max_cached_bytes_;
  std::chrono::milliseconds large_block_idle_;
  /// Cached blocks of large_block_bytes or more: idle checks are skipped while there are none.
  std::atomic<std::size_t> large_blocks_cached_{0};
  /// steady_clock ticks of the next idle check.
  std::atomic<std::int64_t> next_idle_check_{0};
  std::array<size_class, num_classes> classes_;
  std::atomic<std::size_t> bytes_in_use_{0};
  std::atomic<std::size_t> peak_bytes_in_use_{0};
  std::atomic<std::size_t> bytes_cached_{0};
  std::atomic<std::uint64_t> allocations_{0};
  std::atomic<std::uint64_t> reuse_hits_{0};
  std::atomic<std::uint64_t> system_allocations_{0};
};

/// The process-wide host pool. Never destroyed, so buffers freed during static destruction
/// still have somewhere to go.
pool_allocator& host_pool_allocator();

/// Makes host_pool_allocator() the default host allocator (graph's set_default_host_allocator).
/// Idempotent; thread-safe.
void install_host_pool_allocator();

} // namespace actorflow

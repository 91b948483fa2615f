#pragma once
/// A best-fit-with-coalescing allocator for device memory: it takes a few big regions from the
/// device and carves every tensor out of them, so that a training step never pays for
/// cudaMalloc/cudaFree (which synchronise the device) and fragmentation stays low.
///   bfc_options opts;
///   opts.memory_limit = std::size_t{14} << 30;      // 14 GiB of the card
///   bfc_allocator dev{"/job:w/replica:0/task:0/device:GPU:0", make_host_region_source(), opts};
///   tensor t{dtype::float32, {1024, 1024}, &dev};   // a 4 MiB chunk of the region
///   std::cout << dev.describe();                    // in use 4.0 MiB of 14.0 GiB (peak ...
/// Free chunks are binned by size class; allocate takes the smallest free chunk that fits and
/// splits off the rest; deallocate merges a chunk with its free address-order neighbours.

#include "graph/tensor.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace actorflow {

/// Where a bfc_allocator gets its big regions: cudaMalloc for a GPU, aligned host memory for
/// the test device. Implementations are thread-safe.
class region_source {
public:
  virtual ~region_source() = default;
  /// `bytes` of fresh memory, 256-byte aligned (as cudaMalloc's is), or nullptr when the device
  /// has no more. The caller owns it until it hands it back to free_region.
  virtual void* allocate_region(std::size_t bytes) = 0;
  /// Returns a region allocate_region gave out; `bytes` is the size it was asked for.
  virtual void free_region(void* ptr, std::size_t bytes) = 0;
};

/// Host memory regions (std::aligned_alloc, 256-byte aligned); for tests and the test device.
std::unique_ptr<region_source> make_host_region_source();

/// How a bfc_allocator reserves memory.
struct bfc_options {
  /// The most bytes the allocator may ever reserve from its source (per_process_gpu_memory_fraction
  /// of the card, say). Rounded down to a multiple of 256.
  std::size_t memory_limit = 0;
  /// false: reserve memory_limit in one region at construction (TF's default);
  /// true: take initial_region_bytes at the first allocation that needs memory and grow,
  /// doubling region sizes, up to memory_limit.
  bool allow_growth = false;
  /// The first region's size with allow_growth (rounded up to a multiple of 256).
  std::size_t initial_region_bytes = 2u << 20;
  /// The device memory the regions are in, reported by bfc_allocator::space() so tensors know
  /// the CPU cannot read them; owned by the device, which outlives the allocator's buffers.
  /// Null: host memory.
  const memory_space* space = nullptr;
};

/// A snapshot of a bfc_allocator's counters, taken under its lock (so the fields agree).
struct bfc_stats {
  /// Sum of the (rounded) sizes of live allocations.
  std::size_t bytes_in_use = 0;
  /// The largest bytes_in_use seen.
  std::size_t peak_bytes_in_use = 0;
  /// Sum of region sizes taken from the source.
  std::size_t bytes_reserved = 0;
  /// bfc_options::memory_limit, rounded down to a multiple of 256.
  std::size_t memory_limit = 0;
  /// The largest request that would succeed without taking another region.
  std::size_t largest_free_chunk = 0;
  /// Successful allocate() calls.
  std::uint64_t allocations = 0;
  /// allocate() calls that threw allocation_failure.
  std::uint64_t failed_allocations = 0;
  /// deallocate() calls with a pointer that is not a live allocation (double or foreign
  /// frees); they are otherwise ignored.
  std::uint64_t bad_frees = 0;
  /// Regions taken from the source.
  std::size_t regions = 0;
};

/// Carves allocations out of regions from a region_source (see the top of this file). Every
/// pointer and chunk size is a multiple of 256 bytes; a 0-byte request gets 256 bytes.
/// allocate and deallocate are O(log n) in the number of chunks. Thread-safe: one mutex
/// guards all state.
class bfc_allocator final : public allocator {
public:
  /// `name` appears in messages ("/job:w/replica:0/task:0/device:GPU:0"). When
  /// !allow_growth, reserves the whole limit now; when the source cannot give it, construction
  /// still succeeds, the allocator has no memory, and every allocate throws an
  /// allocation_failure saying the reservation failed.
  bfc_allocator(std::string name, std::unique_ptr<region_source> source, bfc_options options);
  /// Returns every region to the source; pointers still handed out dangle afterwards.
  ~bfc_allocator() override;
  bfc_allocator(const bfc_allocator&) = delete;
  bfc_allocator& operator=(const bfc_allocator&) = delete;

  /// At least `bytes` (rounded up to 256), 256-byte aligned. Throws allocation_failure when no
  /// free chunk fits and (with growth) no region that fits can be had within the limit.
  void* allocate(std::size_t bytes) override;
  /// Frees `ptr` (nullptr: nothing); `bytes` is not needed. A pointer that is not a live
  /// allocation of this allocator is ignored and counted in bfc_stats::bad_frees.
  void deallocate(void* ptr, std::size_t bytes) override;
  const char* name() const override { return name_.c_str(); }
  /// bfc_options::space.
  const memory_space* space() const override { return options_.space; }

  bfc_stats stats() const;
  /// "in use 3.0 MiB of 64.0 MiB (peak 5.0 MiB), largest free chunk 1.0 MiB".
  std::string describe() const;

  /// The unit of alignment and of chunk sizes.
  static constexpr std::size_t min_chunk_bytes = 256;

private:
  using chunk_handle = std::size_t;
  static constexpr chunk_handle no_chunk = static_cast<chunk_handle>(-1);

  /// A piece of a region. prev/next are the address-order neighbours within the same region
  /// (no_chunk at a region's ends), so merging can never cross regions.
  struct chunk {
    char* ptr = nullptr;
    std::size_t size = 0;
    /// What the caller asked for (0 while free); for debugging.
    std::size_t requested = 0;
    bool in_use = false;
    chunk_handle prev = no_chunk;
    chunk_handle next = no_chunk;
  };

  /// A free chunk's place in its bin: ordered by size, then address, so lower_bound finds the
  /// best fit and ties go to the lowest address.
  struct free_key {
    std::size_t size;
    std::uintptr_t address;
    chunk_handle handle;
    bool operator<(const free_key& other) const {
      return size != other.size ? size < other.size : address < other.address;
    }
  };

  struct region {
    char* ptr;
    std::size_t bytes;
  };

  // Bin k holds free chunks of size in [256 << k, 256 << (k + 1)); 56 bins cover 2^64.
  static constexpr std::size_t num_bins = 56;
  static std::size_t bin_index(std::size_t size);

  chunk_handle new_chunk();
  void delete_chunk(chunk_handle h);
  void insert_free(chunk_handle h);
  void remove_free(chunk_handle h);
  /// The smallest free chunk of at least `size` bytes, or no_chunk.
  chunk_handle find_free(std::size_t size) const;
  /// Takes a region for a request of `size` bytes within the limit; false when none can be had.
  bool grow(std::size_t size);
  /// Adds [ptr, ptr + bytes) as a region holding one free chunk.
  void add_region(void* ptr, std::size_t bytes);
  std::size_t largest_free_chunk() const;
  std::string describe_locked() const;

  std::string name_;
  std::unique_ptr<region_source> source_;
  bfc_options options_;

  mutable std::mutex mutex_;
  std::vector<region> regions_;
  /// Every chunk, free or in use; handles are indices, reused through free_handles_.
  std::vector<chunk> chunks_;
  std::vector<chunk_handle> free_handles_;
  std::set<free_key> bins_[num_bins];
  /// Live allocations by address, for deallocate.
  std::unordered_map<const void*, chunk_handle> in_use_;
  /// With growth: the size of the next region (doubles each time one is taken).
  std::size_t next_region_bytes_ = 0;
  /// Without growth: the reservation the constructor tried and the source refused (0: none).
  std::size_t failed_reservation_bytes_ = 0;
  std::size_t bytes_in_use_ = 0;
  std::size_t peak_bytes_in_use_ = 0;
  std::size_t bytes_reserved_ = 0;
  std::uint64_t allocations_ = 0;
  std::uint64_t failed_allocations_ = 0;
  std::uint64_t bad_frees_ = 0;
};

} // namespace actorflow

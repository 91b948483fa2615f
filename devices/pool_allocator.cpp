#include "devices/pool_allocator.hpp"

#include "devices/device.hpp"
#include "graph/metrics.hpp"

#include <cstdlib>
#include <new>

namespace actorflow {

namespace {

int floor_log2(std::size_t x) { return 63 - __builtin_clzll(static_cast<unsigned long long>(x)); }

void* system_allocate(std::size_t bytes) {
  void* p = std::aligned_alloc(tensor_alignment, bytes);
  if (p == nullptr)
    throw std::bad_alloc{};
  return p;
}

} // namespace

std::size_t pool_allocator::class_size(std::size_t bytes) {
  if (bytes <= 64)
    return 64;
  if (bytes <= 256)
    return std::size_t{1} << (floor_log2(bytes - 1) + 1);
  // 2^k < bytes <= 2^(k+1), k >= 8: steps of 2^k / 4, a multiple of the 64-byte alignment.
  auto k = floor_log2(bytes - 1);
  auto base = std::size_t{1} << k;
  auto step = base >> 2;
  auto quarters = (bytes - base + step - 1) / step;
  return base + quarters * step;
}

std::size_t pool_allocator::class_index(std::size_t bytes) {
  if (bytes <= 64)
    return 0;
  if (bytes <= 128)
    return 1;
  if (bytes <= 256)
    return 2;
  auto k = floor_log2(bytes - 1);
  auto base = std::size_t{1} << k;
  auto step = base >> 2;
  auto quarters = (bytes - base + step - 1) / step;
  return 3 + static_cast<std::size_t>(k - 8) * 4 + (quarters - 1);
}

std::size_t pool_allocator::class_size_of_index(std::size_t i) {
  if (i < 3)
    return std::size_t{64} << i;
  auto k = (i - 3) / 4 + 8;
  auto quarters = (i - 3) % 4 + 1;
  auto base = std::size_t{1} << k;
  return base + quarters * (base >> 2);
}

pool_allocator::pool_allocator(std::size_t max_cached_bytes,
                               std::chrono::milliseconds large_block_idle)
  : max_cached_bytes_(max_cached_bytes), large_block_idle_(large_block_idle) {}

pool_allocator::~pool_allocator() { trim(); }

void* pool_allocator::allocate(std::size_t bytes) {
  maybe_release_idle_large_blocks();
  auto size = class_size(bytes);
  auto& cls = classes_[class_index(bytes)];
  allocations_.fetch_add(1, std::memory_order_relaxed);
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> guard{cls.mutex};
    if (size >= large_block_bytes)
      cls.last_used = std::chrono::steady_clock::now();
    if (!cls.free_blocks.empty()) {
      p = cls.free_blocks.back();
      cls.free_blocks.pop_back();
    }
  }
  if (p != nullptr) {
    reuse_hits_.fetch_add(1, std::memory_order_relaxed);
    bytes_cached_.fetch_sub(size, std::memory_order_relaxed);
    if (size >= large_block_bytes)
      large_blocks_cached_.fetch_sub(1, std::memory_order_relaxed);
  } else {
    p = system_allocate(size);
    system_allocations_.fetch_add(1, std::memory_order_relaxed);
  }
  auto in_use = bytes_in_use_.fetch_add(size, std::memory_order_relaxed) + size;
  auto peak = peak_bytes_in_use_.load(std::memory_order_relaxed);
  while (in_use > peak &&
         !peak_bytes_in_use_.compare_exchange_weak(peak, in_use, std::memory_order_relaxed)) {
  }
  return p;
}

void pool_allocator::deallocate(void* ptr, std::size_t bytes) {
  if (ptr == nullptr)
    return;
  maybe_release_idle_large_blocks();
  auto size = class_size(bytes);
  bytes_in_use_.fetch_sub(size, std::memory_order_relaxed);
  // Reserve room in the cache first so that concurrent frees cannot overshoot the bound.
  auto cached = bytes_cached_.fetch_add(size, std::memory_order_relaxed) + size;
  if (cached > max_cached_bytes_) {
    bytes_cached_.fetch_sub(size, std::memory_order_relaxed);
    std::free(ptr);
    return;
  }
  auto& cls = classes_[class_index(bytes)];
  std::lock_guard<std::mutex> guard{cls.mutex};
  if (size >= large_block_bytes) {
    cls.last_used = std::chrono::steady_clock::now();
    // The first large block cached starts the once-a-second checks.
    if (large_blocks_cached_.fetch_add(1, std::memory_order_relaxed) == 0)
      next_idle_check_.store((cls.last_used + std::chrono::seconds(1)).time_since_epoch().count(),
                             std::memory_order_relaxed);
  }
  cls.free_blocks.push_back(ptr);
}

void pool_allocator::maybe_release_idle_large_blocks() {
  // The common case, every allocation of a step: no large block cached, no clock to read.
  if (large_blocks_cached_.load(std::memory_order_relaxed) == 0)
    return;
  auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  auto next = next_idle_check_.load(std::memory_order_relaxed);
  if (now < next)
    return;
  auto second = std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::seconds(1)).count();
  // One thread checks; the others go on.
  if (!next_idle_check_.compare_exchange_strong(next, now + second, std::memory_order_relaxed))
    return;
  release_idle_large_blocks();
}

void pool_allocator::release_idle_large_blocks() {
  auto now = std::chrono::steady_clock::now();
  for (auto i = class_index(large_block_bytes); i < num_classes; ++i) {
    auto& cls = classes_[i];
    std::vector<void*> idle;
    {
      std::lock_guard<std::mutex> guard{cls.mutex};
      if (cls.free_blocks.empty() || now - cls.last_used < large_block_idle_)
        continue;
      idle.swap(cls.free_blocks);
    }
    // Every block of class i has the same size: the class size of its index.
    for (void* block : idle) {
      std::free(block);
      bytes_cached_.fetch_sub(class_size_of_index(i), std::memory_order_relaxed);
    }
    large_blocks_cached_.fetch_sub(idle.size(), std::memory_order_relaxed);
  }
}

pool_allocator_stats pool_allocator::stats() const {
  pool_allocator_stats s;
  s.bytes_in_use = bytes_in_use_.load(std::memory_order_relaxed);
  s.peak_bytes_in_use = peak_bytes_in_use_.load(std::memory_order_relaxed);
  s.bytes_cached = bytes_cached_.load(std::memory_order_relaxed);
  s.allocations = allocations_.load(std::memory_order_relaxed);
  s.reuse_hits = reuse_hits_.load(std::memory_order_relaxed);
  s.system_allocations = system_allocations_.load(std::memory_order_relaxed);
  return s;
}

void pool_allocator::trim() {
  for (std::size_t i = 0; i < num_classes; ++i) {
    std::vector<void*> blocks;
    {
      std::lock_guard<std::mutex> guard{classes_[i].mutex};
      blocks.swap(classes_[i].free_blocks);
    }
    if (blocks.empty())
      continue;
    auto size = class_size_of_index(i);
    if (size >= large_block_bytes)
      large_blocks_cached_.fetch_sub(blocks.size(), std::memory_order_relaxed);
    for (void* p : blocks)
      std::free(p);
    bytes_cached_.fetch_sub(size * blocks.size(), std::memory_order_relaxed);
  }
}

pool_allocator& host_pool_allocator() {
  // Leaked on purpose: tensors in static objects may be freed after exit-time destructors.
  static auto* pool = new pool_allocator{};
  // Reported for as long as the process runs, like the pool itself.
  static auto* reported = new metrics_registry::collector_handle{
    default_metrics().collect([](metric_sink& out) { 
      auto now = pool->stats();
      report_allocator_bytes(out, "host_pool", now.bytes_in_use, now.peak_bytes_in_use);
    })};
  static_cast<void>(reported);
  return *pool;
}

void install_host_pool_allocator() { set_default_host_allocator(&host_pool_allocator()); }

} // namespace actorflow

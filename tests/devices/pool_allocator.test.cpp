// The pooling host allocator: size classes, reuse, statistics, trimming, concurrency.
#include "devices/pool_allocator.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

using namespace actorflow;

TEST_CASE("size classes are 64-byte multiples wasting at most a quarter", "[pool_allocator]") {
  CHECK(pool_allocator::class_size(0) == 64);
  CHECK(pool_allocator::class_size(1) == 64);
  CHECK(pool_allocator::class_size(64) == 64);
  CHECK(pool_allocator::class_size(65) == 128);
  CHECK(pool_allocator::class_size(200) == 256);
  CHECK(pool_allocator::class_size(257) == 320);
  CHECK(pool_allocator::class_size(1024) == 1024);
  CHECK(pool_allocator::class_size(1025) == 1280);
  CHECK(pool_allocator::class_size(std::size_t{3} << 20) == std::size_t{3} << 20);
  for (std::size_t bytes = 1; bytes < (std::size_t{1} << 22); bytes = bytes * 5 / 4 + 7) {
    auto size = pool_allocator::class_size(bytes);
    INFO(bytes << " bytes -> class " << size);
    REQUIRE(size >= bytes);
    REQUIRE(size % 64 == 0);
    if (bytes > 256)
      REQUIRE(size <= bytes + bytes / 4 + 64);
  }
}

TEST_CASE("a freed buffer is handed out again for a request of the same class",
          "[pool_allocator]") {
  pool_allocator pool;
  void* first = pool.allocate(1000);
  REQUIRE(reinterpret_cast<std::uintptr_t>(first) % 64 == 0);
  auto s = pool.stats();
  CHECK(s.allocations == 1);
  CHECK(s.system_allocations == 1);
  CHECK(s.reuse_hits == 0);
  CHECK(s.bytes_in_use == 1024);
  CHECK(s.bytes_cached == 0);

  pool.deallocate(first, 1000);
  s = pool.stats();
  CHECK(s.bytes_in_use == 0);
  CHECK(s.bytes_cached == 1024);

  // 1000 and 980 bytes share the 1024-byte class.
  void* second = pool.allocate(980);
  CHECK(second == first);
  s = pool.stats();
  CHECK(s.allocations == 2);
  CHECK(s.reuse_hits == 1);
  CHECK(s.system_allocations == 1);
  CHECK(s.bytes_cached == 0);
  CHECK(s.bytes_in_use == 1024);
  CHECK(s.peak_bytes_in_use == 1024);

  // Another class does not take it.
  void* other = pool.allocate(5000);
  CHECK(other != first);
  pool.deallocate(second, 980);
  pool.deallocate(other, 5000);
}

TEST_CASE("trim returns every cached buffer to the system", "[pool_allocator]") {
  pool_allocator pool;
  std::vector<void*> blocks;
  for (std::size_t bytes : {100, 4096, 100000, 3000000})
    blocks.push_back(pool.allocate(bytes));
  std::size_t i = 0;
  for (std::size_t bytes : {100, 4096, 100000, 3000000})
    pool.deallocate(blocks[i++], bytes);
  CHECK(pool.stats().bytes_cached > 3000000);
  pool.trim();
  CHECK(pool.stats().bytes_cached == 0);
  CHECK(pool.stats().bytes_in_use == 0);
  // After a trim, requests go to the system again.
  void* p = pool.allocate(4096);
  CHECK(pool.stats().system_allocations == 5);
  pool.deallocate(p, 4096);
}

TEST_CASE("the cache bound sends surplus buffers back to the system", "[pool_allocator]") {
  pool_allocator pool{4096};
  void* a = pool.allocate(4096);
  void* b = pool.allocate(4096);
  pool.deallocate(a, 4096);
  pool.deallocate(b, 4096);
  CHECK(pool.stats().bytes_cached == 4096);
}

TEST_CASE("tensors in a steady loop reuse pooled buffers", "[pool_allocator]") {
  pool_allocator pool;
  for (int step = 0; step < 10; ++step) {
    tensor activations{dtype::float32, {128, 256}, &pool};
    tensor gradients{dtype::float32, {128, 256}, &pool};
    tensor bias{dtype::float32, {256}, &pool};
  }
  auto s = pool.stats();
  CHECK(s.allocations == 30);
  // Only the first step needed fresh memory.
  CHECK(s.system_allocations == 3);
  CHECK(s.reuse_hits == 27);
  CHECK(s.bytes_in_use == 0);
}

TEST_CASE("concurrent allocation and release from several threads stays consistent",
          "[pool_allocator]") {
  pool_allocator pool;
  constexpr int threads = 4;
  constexpr int rounds = 2000;
  std::atomic<bool> clash{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&pool, &clash, t] {
      std::vector<std::pair<void*, std::size_t>> held;
      for (int i = 0; i < rounds; ++i) {
        std::size_t bytes = 64 + static_cast<std::size_t>((i * 37 + t * 101) % 9000);
        auto* p = static_cast<unsigned char*>(pool.allocate(bytes));
        // Touch both ends: overlapping blocks handed to two threads would clash here.
        p[0] = static_cast<unsigned char>(t);
        p[bytes - 1] = static_cast<unsigned char>(t);
        held.emplace_back(p, bytes);
        if (held.size() > 8) {
          auto [q, n] = held.front();
          auto* bytes_q = static_cast<unsigned char*>(q);
          if (bytes_q[0] != static_cast<unsigned char>(t) || bytes_q[n - 1] != static_cast<unsigned char>(t))
            clash = true;
          pool.deallocate(q, n);
          held.erase(held.begin());
        }
      }
      for (auto [q, n] : held)
        pool.deallocate(q, n);
    });
  for (auto& w : workers)
    w.join();
  CHECK_FALSE(clash.load());
  auto s = pool.stats();
  CHECK(s.allocations == threads * rounds);
  CHECK(s.bytes_in_use == 0);
  CHECK(s.reuse_hits + s.system_allocations == s.allocations);
  CHECK(s.reuse_hits > s.system_allocations);
}

TEST_CASE("install_host_pool_allocator makes the pool the default for new tensors",
          "[pool_allocator]") {
  install_host_pool_allocator();
  CHECK(default_host_allocator() == &host_pool_allocator());
  auto before = host_pool_allocator().stats().allocations;
  tensor t{dtype::float64, {10}};
  CHECK(host_pool_allocator().stats().allocations == before + 1);
}

TEST_CASE("large cached blocks nobody used for a while go back to the system, small ones stay",
          "[pool_allocator]") {
  using namespace std::chrono_literals;
  auto large = pool_allocator::large_block_bytes;
  SECTION("idle past the bound") {
    pool_allocator pool{pool_allocator::default_max_cached_bytes, 0ms};
    pool.deallocate(pool.allocate(large), large);
    pool.deallocate(pool.allocate(4096), 4096);
    CHECK(pool.stats().bytes_cached == pool_allocator::class_size(large) + 4096);
    pool.release_idle_large_blocks();
    CHECK(pool.stats().bytes_cached == 4096);
    // The next large request gets fresh memory.
    auto before = pool.stats().system_allocations;
    pool.deallocate(pool.allocate(large), large);
    CHECK(pool.stats().system_allocations == before + 1);
  }
  SECTION("recently used") {
    pool_allocator pool{pool_allocator::default_max_cached_bytes, 1h};
    pool.deallocate(pool.allocate(large), large);
    pool.release_idle_large_blocks();
    CHECK(pool.stats().bytes_cached == pool_allocator::class_size(large));
    auto before = pool.stats().reuse_hits;
    pool.deallocate(pool.allocate(large), large);
    CHECK(pool.stats().reuse_hits == before + 1);
  }
}

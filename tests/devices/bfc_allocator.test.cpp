// The best-fit-with-coalescing device allocator: rounding, best fit, coalescing, reservation
// and growth, out-of-memory reports, bad frees, a randomized stress run and concurrency.
#include "devices/bfc_allocator.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace actorflow;

namespace {

constexpr std::size_t KiB = std::size_t{1} << 10;
constexpr std::size_t MiB = std::size_t{1} << 20;
const std::string device = "/job:w/replica:0/task:0/device:GPU:0";

/// What a counting_source saw; outlives the source (the allocator owns and destroys it).
struct source_log {
  std::mutex mutex;
  /// The size of every allocate_region call, granted or not.
  std::vector<std::size_t> requested;
  /// Regions handed out and not yet freed, by address.
  std::map<void*, std::size_t> outstanding;
  std::size_t frees = 0;
};

/// Host regions, recording every call; refuses regions above `max_region` (the device has
/// less than that free).
class counting_source final : public region_source {
public:
  counting_source(std::shared_ptr<source_log> log,
                  std::size_t max_region = std::numeric_limits<std::size_t>::max())
    : log_(std::move(log)), max_region_(max_region) {}
  void* allocate_region(std::size_t bytes) override {
    std::lock_guard<std::mutex> guard{log_->mutex};
    log_->requested.push_back(bytes);
    if (bytes > max_region_)
      return nullptr;
    void* p = host_->allocate_region(bytes);
    log_->outstanding.emplace(p, bytes);
    return p;
  }
  void free_region(void* ptr, std::size_t bytes) override {
    std::lock_guard<std::mutex> guard{log_->mutex};
    auto it = log_->outstanding.find(ptr);
    // A region freed with the wrong size or twice shows up as one still outstanding.
    if (it != log_->outstanding.end() && it->second == bytes)
      log_->outstanding.erase(it);
    ++log_->frees;
    host_->free_region(ptr, bytes);
  }

private:
  std::shared_ptr<source_log> log_;
  std::size_t max_region_;
  std::unique_ptr<region_source> host_ = make_host_region_source();
};

/// Hands out consecutive slices of one buffer, so that region i + 1 starts where region i ends.
class adjacent_source final : public region_source {
public:
  explicit adjacent_source(std::size_t capacity)
    : buffer_(make_host_region_source()), base_(static_cast<char*>(buffer_->allocate_region(capacity))),
      capacity_(capacity) {}
  ~adjacent_source() override { buffer_->free_region(base_, capacity_); }
  void* allocate_region(std::size_t bytes) override {
    if (used_ + bytes > capacity_)
      return nullptr;
    void* p = base_ + used_;
    used_ += bytes;
    return p;
  }
  void free_region(void*, std::size_t) override {}

private:
  std::unique_ptr<region_source> buffer_;
  char* base_;
  std::size_t capacity_;
  std::size_t used_ = 0;
};

bfc_options fixed(std::size_t limit) {
  bfc_options o;
  o.memory_limit = limit;
  return o;
}

bfc_options growing(std::size_t initial, std::size_t limit) {
  bfc_options o;
  o.memory_limit = limit;
  o.allow_growth = true;
  o.initial_region_bytes = initial;
  return o;
}

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

} // namespace

TEST_CASE("requests round up to 256 bytes, pointers are 256-byte aligned and bytes in use and "
          "peak follow allocations and frees",
          "[bfc]") {
  bfc_allocator alloc{device, make_host_region_source(), fixed(1 * MiB)};
  CHECK(std::string{alloc.name()} == device);

  auto* a = static_cast<char*>(alloc.allocate(1));
  CHECK(alloc.stats().bytes_in_use == 256);
  auto* b = static_cast<char*>(alloc.allocate(0));
  CHECK(alloc.stats().bytes_in_use == 512);
  auto* c = static_cast<char*>(alloc.allocate(300));
  CHECK(alloc.stats().bytes_in_use == 1024);
  auto* d = static_cast<char*>(alloc.allocate(256));
  CHECK(alloc.stats().bytes_in_use == 1280);

  for (auto* p : {a, b, c, d})
    CHECK(address(p) % 256 == 0);
  // A fresh region is carved front to back, so each chunk is exactly its rounded size.
  CHECK(b == a + 256);
  CHECK(c == b + 256);
  CHECK(d == c + 512);

  alloc.deallocate(c, 300);
  auto s = alloc.stats();
  CHECK(s.bytes_in_use == 768);
  CHECK(s.peak_bytes_in_use == 1280);
  alloc.deallocate(a, 1);
  alloc.deallocate(b, 0);
  alloc.deallocate(d, 256);
  s = alloc.stats();
  CHECK(s.bytes_in_use == 0);
  CHECK(s.peak_bytes_in_use == 1280);
  CHECK(s.allocations == 4);
  CHECK(s.failed_allocations == 0);
  CHECK(s.largest_free_chunk == 1 * MiB);
}

TEST_CASE("allocate takes the smallest free chunk that is big enough", "[bfc]") {
  bfc_allocator alloc{device, make_host_region_source(), fixed(1 * MiB)};
  // Free chunks of 1, 4 and 2 KiB, kept apart by live separators so they cannot coalesce.
  auto* one = alloc.allocate(1 * KiB);
  auto* sep1 = alloc.allocate(256);
  auto* four = alloc.allocate(4 * KiB);
  auto* sep2 = alloc.allocate(256);
  auto* two = alloc.allocate(2 * KiB);
  auto* sep3 = alloc.allocate(256);
  alloc.deallocate(one, 1 * KiB);
  alloc.deallocate(four, 4 * KiB);
  alloc.deallocate(two, 2 * KiB);

  auto* p = alloc.allocate(1536);
  CHECK(p == two);
  auto* q = alloc.allocate(3 * KiB);
  CHECK(q == four);
  auto* r = alloc.allocate(1 * KiB);
  CHECK(r == one);
  // What was left of the 2 KiB chunk (512 bytes) is now the best fit for a small request.
  auto* t = alloc.allocate(512);
  CHECK(t == static_cast<char*>(two) + 1536);

  for (auto* x : {p, q, r, t, sep1, sep2, sep3})
    alloc.deallocate(x, 0);
  CHECK(alloc.stats().largest_free_chunk == 1 * MiB);
}

TEST_CASE("freed neighbours coalesce back into the whole region", "[bfc]") {
  bfc_allocator alloc{device, make_host_region_source(), fixed(64 * KiB)};
  auto* a = static_cast<char*>(alloc.allocate(16 * KiB));
  auto* b = static_cast<char*>(alloc.allocate(16 * KiB));
  auto* c = static_cast<char*>(alloc.allocate(16 * KiB));
  REQUIRE(b == a + 16 * KiB);
  REQUIRE(c == b + 16 * KiB);
  CHECK(alloc.stats().largest_free_chunk == 16 * KiB);

  alloc.deallocate(a, 16 * KiB);
  CHECK(alloc.stats().largest_free_chunk == 16 * KiB);
  alloc.deallocate(c, 16 * KiB); // merges with the free tail of the region
  CHECK(alloc.stats().largest_free_chunk == 32 * KiB);
  alloc.deallocate(b, 16 * KiB); // merges with both sides
  CHECK(alloc.stats().largest_free_chunk == 64 * KiB);

  auto* whole = alloc.allocate(64 * KiB);
  CHECK(whole == a);
  CHECK(alloc.stats().bytes_in_use == 64 * KiB);
  alloc.deallocate(whole, 64 * KiB);
}

TEST_CASE("chunks never merge across regions even when the regions are adjacent in memory",
          "[bfc]") {
  bfc_allocator alloc{device, std::make_unique<adjacent_source>(64 * KiB),
                      growing(4 * KiB, 64 * KiB)};
  auto* a = static_cast<char*>(alloc.allocate(4 * KiB)); // fills region 1
  auto* b = static_cast<char*>(alloc.allocate(8 * KiB)); // fills region 2
  REQUIRE(alloc.stats().regions == 2);
  REQUIRE(b == a + 4 * KiB); // the precondition that makes this test mean something
  alloc.deallocate(a, 4 * KiB);
  alloc.deallocate(b, 8 * KiB);
  auto s = alloc.stats();
  CHECK(s.largest_free_chunk == 8 * KiB);
  CHECK(s.bytes_reserved == 12 * KiB);
  // 12 KiB would fit in the two regions together, but it must take a third.
  auto* c = alloc.allocate(12 * KiB);
  CHECK(alloc.stats().regions == 3);
  CHECK(c == b + 8 * KiB);
  alloc.deallocate(c, 12 * KiB);
}

TEST_CASE("without growth the whole limit is reserved at construction", "[bfc]") {
  auto log = std::make_shared<source_log>();
  {
    bfc_allocator alloc{device, std::make_unique<counting_source>(log), fixed(64 * KiB + 100)};
    // The limit rounds down to a multiple of 256.
    CHECK(log->requested == std::vector<std::size_t>{64 * KiB});
    auto s = alloc.stats();
    CHECK(s.bytes_reserved == 64 * KiB);
    CHECK(s.memory_limit == 64 * KiB);
    CHECK(s.regions == 1);
    CHECK(s.largest_free_chunk == 64 * KiB);
    auto* p = alloc.allocate(60 * KiB);
    alloc.deallocate(p, 60 * KiB);
    CHECK_THROWS_AS(alloc.allocate(64 * KiB + 1), allocation_failure);
    CHECK(log->requested.size() == 1);
  }
  CHECK(log->frees == 1);
  CHECK(log->outstanding.empty());
}

TEST_CASE("with growth regions start at the initial size and double up to the limit", "[bfc]") {
  auto log = std::make_shared<source_log>();
  {
    bfc_allocator alloc{device, std::make_unique<counting_source>(log),
                        growing(1 * KiB, 12 * KiB)};
    CHECK(log->requested.empty());
    CHECK(alloc.stats().bytes_reserved == 0);

    alloc.allocate(1 * KiB); // the initial region
    CHECK(log->requested == std::vector<std::size_t>{1 * KiB});
    alloc.allocate(3 * KiB); // bigger than the next 2 KiB: a region of its own size
    CHECK(log->requested == std::vector<std::size_t>{1 * KiB, 3 * KiB});
    alloc.allocate(256); // nothing free: the next size, doubled again, 4 KiB
    CHECK(log->requested == std::vector<std::size_t>{1 * KiB, 3 * KiB, 4 * KiB});
    alloc.allocate(3584); // fits what is left of the 4 KiB region
    CHECK(log->requested.size() == 3);
    CHECK(alloc.stats().bytes_reserved == 8 * KiB);
    alloc.allocate(1 * KiB); // the next size (8 KiB) exceeds what is left: exactly what is left
    CHECK(log->requested == std::vector<std::size_t>{1 * KiB, 3 * KiB, 4 * KiB, 4 * KiB});
    auto s = alloc.stats();
    CHECK(s.bytes_reserved == 12 * KiB);
    CHECK(s.regions == 4);
    CHECK(s.bytes_in_use == 1 * KiB + 3 * KiB + 256 + 3584 + 1 * KiB);

    CHECK_THROWS_AS(alloc.allocate(4 * KiB), allocation_failure);
    CHECK(log->requested.size() == 4); // the limit is reached: the source is not asked
    CHECK(alloc.stats().bytes_reserved == 12 * KiB);
  }
  CHECK(log->frees == 4);
  CHECK(log->outstanding.empty());
}

TEST_CASE("with growth a source that refuses the doubled size still gives a region the request "
          "fits",
          "[bfc]") {
  auto log = std::make_shared<source_log>();
  bfc_allocator alloc{device, std::make_unique<counting_source>(log, 2 * KiB),
                      growing(4 * KiB, 1 * MiB)};
  auto* p = alloc.allocate(1 * KiB);
  CHECK(p != nullptr);
  CHECK(log->requested == std::vector<std::size_t>{4 * KiB, 1 * KiB});
  CHECK(alloc.stats().bytes_reserved == 1 * KiB);
  // Neither the doubled size nor the request itself: out of memory.
  CHECK_THROWS_AS(alloc.allocate(3 * KiB), allocation_failure);
  CHECK(log->requested == std::vector<std::size_t>{4 * KiB, 1 * KiB, 8 * KiB, 3 * KiB});
  alloc.deallocate(p, 1 * KiB);
}

TEST_CASE("running out of memory throws an allocation_failure naming the request and what is "
          "in use and the allocator still works afterwards",
          "[bfc]") {
  auto log = std::make_shared<source_log>();
  {
    bfc_allocator alloc{device, std::make_unique<counting_source>(log), fixed(64 * KiB)};
    auto* held = alloc.allocate(48 * KiB);
    std::string message;
    try {
      alloc.allocate(32 * KiB);
    } catch (const allocation_failure& e) {
      message = e.what();
    }
    INFO(message);
    CHECK(message.find(device) != std::string::npos);
    CHECK(message.find("cannot allocate 32.0 KiB") != std::string::npos);
    CHECK(message.find("in use 48.0 KiB of 64.0 KiB (peak 48.0 KiB)") != std::string::npos);
    CHECK(message.find("largest free chunk 16.0 KiB") != std::string::npos);

    // Existing catch sites for std::bad_alloc see it too; a size near SIZE_MAX cannot overflow.
    CHECK_THROWS_AS(alloc.allocate(std::numeric_limits<std::size_t>::max()), std::bad_alloc);
    CHECK_THROWS_AS(alloc.allocate(std::numeric_limits<std::size_t>::max() - 100),
                    allocation_failure);

    auto s = alloc.stats();
    CHECK(s.failed_allocations == 3);
    CHECK(s.allocations == 1);
    CHECK(s.bytes_in_use == 48 * KiB);
    CHECK(s.largest_free_chunk == 16 * KiB);

    auto* rest = alloc.allocate(16 * KiB);
    alloc.deallocate(held, 48 * KiB);
    alloc.deallocate(rest, 16 * KiB);
    auto* whole = alloc.allocate(64 * KiB);
    CHECK(whole == held);
    alloc.deallocate(whole, 64 * KiB);
    CHECK(alloc.stats().bytes_in_use == 0);
  }
  CHECK(log->outstanding.empty());
}

TEST_CASE("describe sums up use, limit, peak and the largest free chunk", "[bfc]") {
  bfc_allocator alloc{device, make_host_region_source(), fixed(64 * MiB)};
  auto* a = alloc.allocate(3 * MiB);
  auto* b = alloc.allocate(2 * MiB);
  alloc.deallocate(b, 2 * MiB);
  CHECK(alloc.describe() == "in use 3.0 MiB of 64.0 MiB (peak 5.0 MiB), largest free chunk 61.0 MiB");
  alloc.deallocate(a, 3 * MiB);
  auto* c = alloc.allocate(1536 * MiB / 1024); // 1.5 MiB
  CHECK(alloc.describe() == "in use 1.5 MiB of 64.0 MiB (peak 5.0 MiB), largest free chunk 62.5 MiB");
  alloc.deallocate(c, 0);
  auto* d = alloc.allocate(512);
  CHECK(alloc.describe().rfind("in use 512 B of", 0) == 0);
  alloc.deallocate(d, 512);
}

TEST_CASE("a source that refuses the reservation leaves an allocator whose allocations throw and "
          "say so",
          "[bfc]") {
  auto log = std::make_shared<source_log>();
  {
    bfc_allocator alloc{device, std::make_unique<counting_source>(log, 0), fixed(64 * KiB)};
    CHECK(log->requested == std::vector<std::size_t>{64 * KiB});
    auto s = alloc.stats();
    CHECK(s.bytes_reserved == 0);
    CHECK(s.regions == 0);
    CHECK(s.largest_free_chunk == 0);

    std::string message;
    try {
      alloc.allocate(1);
    } catch (const allocation_failure& e) {
      message = e.what();
    }
    INFO(message);
    CHECK(message.find("cannot allocate 1 B") != std::string::npos);
    CHECK(message.find("reserving 64.0 KiB from the device failed") != std::string::npos);
    CHECK(alloc.stats().failed_allocations == 1);
  }
  CHECK(log->frees == 0);
}

TEST_CASE("double frees and unknown pointers are ignored and counted", "[bfc]") {
  bfc_allocator alloc{device, make_host_region_source(), fixed(64 * KiB)};
  auto* a = static_cast<char*>(alloc.allocate(1 * KiB));
  auto* b = static_cast<char*>(alloc.allocate(2 * KiB));
  alloc.deallocate(a, 1 * KiB);
  alloc.deallocate(a, 1 * KiB); // double free
  CHECK(alloc.stats().bad_frees == 1);
  int local = 0;
  alloc.deallocate(&local, sizeof local); // never allocated here
  CHECK(alloc.stats().bad_frees == 2);
  alloc.deallocate(b + 256, 2 * KiB); // inside a live allocation
  CHECK(alloc.stats().bad_frees == 3);
  alloc.deallocate(nullptr, 0); // like free(nullptr): fine, not counted
  CHECK(alloc.stats().bad_frees == 3);

  // Nothing was disturbed: b is still in use, and freeing it restores the whole region.
  auto s = alloc.stats();
  CHECK(s.bytes_in_use == 2 * KiB);
  CHECK(s.largest_free_chunk == 64 * KiB - 1 * KiB - 2 * KiB);
  alloc.deallocate(b, 2 * KiB);
  s = alloc.stats();
  CHECK(s.bytes_in_use == 0);
  CHECK(s.largest_free_chunk == 64 * KiB);
  CHECK(s.bad_frees == 3);
}

TEST_CASE("random allocations and frees never overlap and keep the statistics consistent",
          "[bfc]") {
  const bool allow_growth = GENERATE(false, true);
  const std::uint32_t seed = 20240517;
  INFO("seed " << seed << ", allow_growth " << (allow_growth ? "on" : "off"));
  std::mt19937 rng{seed};
  auto options = allow_growth ? growing(64 * KiB, 4 * MiB) : fixed(4 * MiB);
  bfc_allocator alloc{device, make_host_region_source(), options};

  struct live_block {
    std::size_t requested;
    std::size_t rounded;
    unsigned char fill;
  };
  std::map<std::uintptr_t, live_block> live;
  std::size_t in_use = 0, peak = 0;
  std::uint64_t successes = 0, failures = 0;
  unsigned char next_fill = 1;

  auto free_one = [&](std::map<std::uintptr_t, live_block>::iterator it) {
    auto* p = reinterpret_cast<unsigned char*>(it->first);
    // Another live block written over this one would show here.
    for (std::size_t i = 0; i < it->second.requested; ++i)
      if (p[i] != it->second.fill)
        FAIL("block at offset " << i << " of " << it->second.requested << " was overwritten");
    alloc.deallocate(p, it->second.requested);
    in_use -= it->second.rounded;
    live.erase(it);
  };

  std::uniform_int_distribution<int> action{0, 99};
  for (int op = 0; op < 4000; ++op) {
    if (live.empty() || action(rng) < 55) {
      std::size_t bytes;
      auto kind = action(rng);
      if (kind < 5)
        bytes = 0;
      else if (kind < 80)
        bytes = std::uniform_int_distribution<std::size_t>{1, 4 * KiB}(rng);
      else if (kind < 97)
        bytes = std::uniform_int_distribution<std::size_t>{4 * KiB, 64 * KiB}(rng);
      else
        bytes = std::uniform_int_distribution<std::size_t>{64 * KiB, 1 * MiB}(rng);
      void* p = nullptr;
      try {
        p = alloc.allocate(bytes);
      } catch (const allocation_failure&) {
        ++failures;
        continue;
      }
      ++successes;
      auto rounded = bytes == 0 ? std::size_t{256} : (bytes + 255) / 256 * 256;
      INFO("op " << op << ": " << bytes << " bytes at " << p);
      REQUIRE(address(p) % 256 == 0);
      auto at = address(p);
      auto after = live.lower_bound(at);
      if (after != live.end())
        REQUIRE(at + rounded <= after->first);
      if (after != live.begin()) {
        auto before = std::prev(after);
        REQUIRE(before->first + before->second.rounded <= at);
      }
      std::memset(p, next_fill, bytes);
      live.emplace(at, live_block{bytes, rounded, next_fill});
      next_fill = static_cast<unsigned char>(next_fill % 255 + 1);
      in_use += rounded;
      peak = std::max(peak, in_use);
    } else {
      auto it = live.begin();
      std::advance(it, std::uniform_int_distribution<std::size_t>{0, live.size() - 1}(rng));
      free_one(it);
    }
    if (op % 97 == 0) {
      auto s = alloc.stats();
      REQUIRE(s.bytes_in_use == in_use);
      REQUIRE(s.peak_bytes_in_use == peak);
      REQUIRE(s.allocations == successes);
      REQUIRE(s.failed_allocations == failures);
      REQUIRE(s.bytes_reserved <= s.memory_limit);
      REQUIRE(s.largest_free_chunk <= s.bytes_reserved - s.bytes_in_use);
    }
  }
  INFO(successes << " allocations, " << failures << " failures, peak " << peak);
  CHECK(successes > 1000);
  while (!live.empty())
    free_one(live.begin());

  auto s = alloc.stats();
  CHECK(s.bytes_in_use == 0);
  CHECK(s.peak_bytes_in_use == peak);
  CHECK(s.allocations == successes);
  CHECK(s.bad_frees == 0);
  CHECK(s.bytes_reserved <= 4 * MiB);
  if (s.regions == 1)
    CHECK(s.largest_free_chunk == s.bytes_reserved);
  if (!allow_growth) {
    CHECK(s.regions == 1);
    CHECK(s.bytes_reserved == 4 * MiB);
  }
  // Everything coalesced: the largest region can be allocated whole again.
  auto* whole = alloc.allocate(s.largest_free_chunk);
  CHECK(whole != nullptr);
  alloc.deallocate(whole, s.largest_free_chunk);
}

TEST_CASE("two threads allocating and freeing at once keep the counters consistent", "[bfc]") {
  bfc_allocator alloc{device, make_host_region_source(), fixed(8 * MiB)};
  constexpr int iterations = 3000;
  std::atomic<int> corrupted{0};
  std::atomic<int> failures{0};
  auto work = [&](unsigned char fill, std::uint32_t seed) {
    std::mt19937 rng{seed};
    std::vector<std::pair<unsigned char*, std::size_t>> held;
    for (int i = 0; i < iterations; ++i) {
      auto bytes = std::uniform_int_distribution<std::size_t>{1, 8 * KiB}(rng);
      try {
        auto* p = static_cast<unsigned char*>(alloc.allocate(bytes));
        std::memset(p, fill, bytes);
        held.emplace_back(p, bytes);
      } catch (const allocation_failure&) {
        ++failures;
      }
      if (held.size() > 16 || (i % 3 == 0 && !held.empty())) {
        auto k = std::uniform_int_distribution<std::size_t>{0, held.size() - 1}(rng);
        auto [p, n] = held[k];
        for (std::size_t j = 0; j < n; ++j)
          if (p[j] != fill) {
            ++corrupted;
            break;
          }
        alloc.deallocate(p, n);
        held[k] = held.back();
        held.pop_back();
      }
    }
    for (auto [p, n] : held)
      alloc.deallocate(p, n);
  };
  std::thread t1{work, static_cast<unsigned char>(0xA1), 1u};
  std::thread t2{work, static_cast<unsigned char>(0xB2), 2u};
  t1.join();
  t2.join();

  CHECK(corrupted == 0);
  CHECK(failures == 0);
  auto s = alloc.stats();
  CHECK(s.allocations == 2 * iterations);
  CHECK(s.bytes_in_use == 0);
  CHECK(s.bad_frees == 0);
  CHECK(s.largest_free_chunk == 8 * MiB);
}

#pragma once
/// Helpers for tests of moving tensors between devices and processes (wire codecs, chunks,
/// the bulk channel): byte-exact comparison, random payloads, an allocator that records the
/// largest request (to prove hostile input allocates nothing large), and a graph split across
/// two devices of different tasks.
///   test::scoped_counting_allocator counting;      // default host allocator while it lives
///   ... decode hostile bytes ...
///   CHECK(counting.largest() < 1024);

#include "graph/ops.hpp"
#include "graph/partition.hpp"
#include "graph/tensor.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>

namespace actorflow::test {

/// Same dtype, shape and bytes (bit for bit, NaNs included).
inline bool same_bytes(const tensor& a, const tensor& b) {
  return a.is_initialized() && b.is_initialized() && a.type() == b.type() &&
         a.shape() == b.shape() && a.bytes() == b.bytes() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.bytes()) == 0;
}

/// `elements` float32 values of random bits from `seed`.
inline tensor random_tensor(std::int64_t elements, std::uint32_t seed) {
  tensor t{dtype::float32, tensor_shape{elements}};
  std::mt19937 rng{seed};
  auto* words = static_cast<std::uint32_t*>(t.raw_data());
  for (std::int64_t i = 0; i < elements; ++i)
    words[i] = rng();
  return t;
}

/// Forwards to `inner` and records the largest request; thread-safe.
class counting_allocator : public allocator {
public:
  explicit counting_allocator(allocator* inner) : inner_(inner) {}
  void* allocate(std::size_t bytes) override {
    auto seen = largest_.load();
    while (bytes > seen && !largest_.compare_exchange_weak(seen, bytes)) {
    }
    return inner_->allocate(bytes);
  }
  void deallocate(void* ptr, std::size_t bytes) override { inner_->deallocate(ptr, bytes); }
  const char* name() const override { return "counting"; }
  std::size_t largest() const { return largest_; }

private:
  allocator* inner_;
  std::atomic<std::size_t> largest_{0};
};

/// Installs a counting_allocator as the default host allocator while it lives (also when a
/// REQUIRE ends the test early).
class scoped_counting_allocator {
public:
  scoped_counting_allocator() : previous_(default_host_allocator()), counting_(previous_) {
    set_default_host_allocator(&counting_);
  }
  ~scoped_counting_allocator() { set_default_host_allocator(previous_); }
  std::size_t largest() const { return counting_.largest(); }

private:
  allocator* previous_;
  counting_allocator counting_;
};

inline const std::string sender_device = "/job:a/replica:0/task:0/device:CPU:0";
inline const std::string receiver_device = "/job:b/replica:0/task:0/device:CPU:0";

/// A graph whose constant `value` lives on sender_device and whose Identity of it, fetched, on
/// receiver_device; its partitions by device.
struct crossing_graph {
  graph g;
  output fetched;
  std::map<std::string, std::shared_ptr<graph>> parts;

  explicit crossing_graph(const tensor& value) {
    auto x = ops::constant(g, value, "x");
    fetched = ops::identity(x, "y");
    REQUIRE(g.status().ok());
    g.at(x.node_id).assigned_device = sender_device;
    g.at(fetched.node_id).assigned_device = receiver_device;
    auto needed = prune(g, {fetched.node_id}, {});
    auto split = partition_graph(g, needed, {});
    REQUIRE(split.ok());
    parts = std::move(*split);
    REQUIRE(parts.size() == 2);
  }

  /// The rendezvous key of the one tensor that crosses.
  std::string key() const {
    for (std::size_t i = 0; i < parts.at(receiver_device)->size(); ++i) {
      auto& n = parts.at(receiver_device)->at(static_cast<int>(i));
      if (n.op == "_Recv")
        return n.attr_or<std::string>("key", "");
    }
    return "";
  }
};

} // namespace actorflow::test

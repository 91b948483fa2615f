// The per-session memory cap (devices/memory_budget.hpp): charges, refunds and refusals.
#include "devices/memory_budget.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

using namespace actorflow;

TEST_CASE("a budget charges each tensor until its buffer dies, and refuses what would go over", "[memory_budget]") {
  auto budget = std::make_shared<memory_budget>("the test's budget", 1000);
  auto a = budget->allocate(dtype::float32, {100}, default_host_allocator()); // 400 bytes
  CHECK(budget->bytes_in_use() == 400);
  {
    auto b = budget->allocate(dtype::float64, {50}, default_host_allocator()); // 400 bytes
    CHECK(budget->bytes_in_use() == 800);
    auto shared = b; // a second reference: still one charge
    CHECK(budget->bytes_in_use() == 800);
    try {
      budget->allocate(dtype::float32, {51}, default_host_allocator()); // 204 bytes: over
      FAIL("allocated over the limit");
    } catch (const allocation_failure& e) {
      std::string message = e.what();
      CHECK(message.find("the test's budget") != std::string::npos);
      CHECK(message.find("cannot allocate 204 B") != std::string::npos);
      CHECK(message.find("hold 800 B of its limit of 1000 B") != std::string::npos);
    }
    // The refusal charged nothing.
    CHECK(budget->bytes_in_use() == 800);
    CHECK(budget->allocate(dtype::float32, {50}, default_host_allocator()).num_elements() == 50);
  }
  // b and the 200-byte tensor are gone: refunded.
  CHECK(budget->bytes_in_use() == 400);
  CHECK(budget->peak_bytes_in_use() == 1000);
  CHECK(a.data<float>() != nullptr);
}

TEST_CASE("a tensor outliving every other reference to its budget still refunds it", "[memory_budget]") {
  tensor kept;
  std::weak_ptr<memory_budget> watched;
  {
    auto budget = std::make_shared<memory_budget>("a partition that was deregistered", 4096);
    watched = budget;
    kept = budget->allocate(dtype::int32, {16}, default_host_allocator());
  }
  // The tensor holds the budget alive, so its refund has somewhere to go.
  REQUIRE_FALSE(watched.expired());
  CHECK(watched.lock()->bytes_in_use() == 64);
  kept = tensor{};
  CHECK(watched.expired());
}

TEST_CASE("the per-tensor cap still applies under a budget", "[memory_budget]") {
  set_max_tensor_allocation_bytes(256);
  auto budget = std::make_shared<memory_budget>("a budget", 1 << 20);
  CHECK_THROWS_WITH(budget->allocate(dtype::float32, {100}, default_host_allocator()),
                    Catch::Contains("per-tensor cap of 256"));
  set_max_tensor_allocation_bytes(0);
  CHECK(budget->bytes_in_use() == 0);
}

TEST_CASE("threads charging one budget never take it over its limit", "[memory_budget]") {
  auto budget = std::make_shared<memory_budget>("a shared budget", 64 * 1024);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      std::vector<tensor> held;
      for (int i = 0; i < 2000; ++i) {
        try {
          held.push_back(budget->allocate(dtype::float32, {256}, default_host_allocator()));
        } catch (const allocation_failure&) {
          // over the limit: refused, as it should be
        }
        if (held.size() > 20)
          held.erase(held.begin(), held.begin() + 10);
      }
    });
  for (auto& t : threads)
    t.join();
  CHECK(budget->peak_bytes_in_use() <= 64 * 1024);
  CHECK(budget->bytes_in_use() == 0);
}

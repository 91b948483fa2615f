// The intra-op thread pool: scheduling, parallel_for coverage, nesting.
#include "devices/thread_pool.hpp"

#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <system_error>

#include <atomic>
#include <chrono>
#include <memory>
#include <future>
#include <vector>

using namespace actorflow;

TEST_CASE("scheduled tasks run on pool threads", "[thread_pool]") {
  thread_pool pool{"test", 2};
  CHECK(pool.num_threads() == 2);
  CHECK_FALSE(pool.on_pool_thread());
  std::promise<bool> on_pool;
  pool.schedule([&] { on_pool.set_value(pool.on_pool_thread()); });
  CHECK(on_pool.get_future().get());
}

TEST_CASE("parallel_for covers every index exactly once in contiguous blocks", "[thread_pool]") {
  thread_pool pool{"test", 3};
  for (std::int64_t n : {0, 1, 7, 1000, 100003}) {
    INFO("n = " << n);
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
    std::atomic<int> blocks{0};
    std::atomic<int> empty_blocks{0};
    // No Catch assertions on pool threads: Catch is not thread-safe.
    pool.parallel_for(
      n,
      [&](std::int64_t begin, std::int64_t end) {
        if (begin >= end)
          ++empty_blocks;
        ++blocks;
        for (auto i = begin; i < end; ++i)
          ++hits[static_cast<std::size_t>(i)];
      },
      100);
    CHECK(empty_blocks.load() == 0);
    for (auto& h : hits)
      REQUIRE(h.load() == 1);
    CHECK(blocks.load() <= pool.num_threads() + 1);
  }
}

TEST_CASE("parallel_for called from inside a pool task does not deadlock", "[thread_pool]") {
  thread_pool pool{"test", 2};
  std::atomic<std::int64_t> total{0};
  pool.parallel_for(
    4,
    [&](std::int64_t begin, std::int64_t end) {
      for (auto i = begin; i < end; ++i)
        pool.parallel_for(
          1000, [&](std::int64_t b, std::int64_t e) { total += e - b; }, 10);
    },
    1);
  CHECK(total.load() == 4000);
}

TEST_CASE("a pool runs queued work before it is destroyed", "[thread_pool]") {
  std::atomic<int> done{0};
  {
    thread_pool pool{"test", 1};
    for (int i = 0; i < 50; ++i)
      pool.schedule([&] { ++done; });
  }
  CHECK(done.load() == 50);
}

TEST_CASE("a thread count of 0 means one per hardware thread", "[thread_pool]") {
  CHECK(resolve_thread_count(3) == 3);
  CHECK(resolve_thread_count(0) >= 1);
}

TEST_CASE("a pool whose last owner lets go inside one of its own tasks shuts down cleanly") {
  for (int round = 0; round < 20; ++round) {
    auto pool = std::make_shared<actorflow::thread_pool>("self_release", 2);
    std::promise<void> released;
    auto future = released.get_future();
    auto* raw = pool.get();
    raw->schedule([owner = std::move(pool), &released]() mutable {
      owner.reset(); // the pool's destructor runs on the pool's own thread
      released.set_value();
    });
    REQUIRE(future.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  }
}

TEST_CASE("a pool the system cannot start fails with an error naming it, and leaves no thread behind",
          "[devices][pool]") {
  // In a child whose address space leaves room for a few thread stacks only: 1000 threads need
  // about 8 GB of stacks. Without the clean-up, the already running threads would be destroyed
  // joinable and the child would die in std::terminate.
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    rlimit limit{};
    ::getrlimit(RLIMIT_AS, &limit);
    std::ifstream statm{"/proc/self/statm"};
    std::size_t pages = 0;
    statm >> pages;
    limit.rlim_cur = pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)) + (std::size_t{256} << 20);
    ::setrlimit(RLIMIT_AS, &limit);
    try {
      thread_pool pool{"too-big", 1000};
      ::_exit(2); // started them all: the limit did not bite
    } catch (const std::system_error& e) {
      std::string what = e.what();
      bool named = what.find("thread pool 'too-big'") != std::string::npos &&
                   what.find("of 1000") != std::string::npos;
      ::_exit(named ? 0 : 3);
    }
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

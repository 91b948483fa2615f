// The GPU device's completion thread (devices/cuda/completion_poller.hpp), driven by plain
// flags in place of CUDA events: callbacks run on the callback thread once their probes say
// so, errors reach them, and destruction waits for what is pending. Waits are bounded.
#include "devices/cuda/completion_poller.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

using namespace actorflow;
using namespace actorflow::cuda;

namespace {

constexpr auto bounded_wait = std::chrono::seconds(60);

using probe_result = completion_poller::probe_result;

/// A probe that finishes once `flag` is set.
completion_poller::probe when_set(std::shared_ptr<std::atomic<bool>> flag) {
  return [flag] { return flag->load() ? probe_result::done() : probe_result::pending(); };
}

/// What callbacks saw, in the order they ran.
struct journal {
  std::mutex mutex;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  std::vector<status> results;

  completion_poller::callback entry(int id, std::promise<void>* finished = nullptr) {
    return [this, id, finished](status s) {
      {
        std::lock_guard<std::mutex> guard{mutex};
        order.push_back(id);
        threads.push_back(std::this_thread::get_id());
        results.push_back(std::move(s));
      }
      if (finished != nullptr)
        finished->set_value();
    };
  }
};

} // namespace

TEST_CASE("completions run on the callback thread once their work has finished, in finishing order",
          "[cuda][completions]") {
  journal seen;
  std::promise<void> first_done;
  std::promise<void> second_done;
  {
    completion_poller poller{"test"};
    auto first = std::make_shared<std::atomic<bool>>(false);
    auto second = std::make_shared<std::atomic<bool>>(false);
    poller.when_done(when_set(first), seen.entry(1, &first_done));
    poller.when_done(when_set(second), seen.entry(2, &second_done));
    CHECK(poller.pending() == 2);

    second->store(true);
    REQUIRE(second_done.get_future().wait_for(bounded_wait) == std::future_status::ready);
    {
      std::lock_guard<std::mutex> guard{seen.mutex};
      CHECK(seen.order == std::vector<int>{2});
    }
    first->store(true);
    REQUIRE(first_done.get_future().wait_for(bounded_wait) == std::future_status::ready);
  }
  REQUIRE(seen.order == std::vector<int>{2, 1});
  CHECK(seen.threads[0] != std::this_thread::get_id());
  CHECK(seen.threads[0] == seen.threads[1]);
  CHECK(seen.results[0].ok());
  CHECK(seen.results[1].ok());
}

TEST_CASE("a failed completion hands its error to the callback", "[cuda][completions]") {
  journal seen;
  std::promise<void> done;
  completion_poller poller{"test"};
  poller.when_done([] { return probe_result::failed(make_error(errc::internal, "kernel faulted")); },
                   seen.entry(7, &done));
  REQUIRE(done.get_future().wait_for(bounded_wait) == std::future_status::ready);
  std::lock_guard<std::mutex> guard{seen.mutex};
  REQUIRE(seen.results.size() == 1);
  CHECK(seen.results[0].code() == errc::internal);
  CHECK(seen.results[0].message() == "kernel faulted");
}

TEST_CASE("completions that finish in the same poll run in registration order",
          "[cuda][completions]") {
  journal seen;
  auto go = std::make_shared<std::atomic<bool>>(false);
  {
    completion_poller poller{"test"};
    for (int id = 0; id < 5; ++id)
      poller.when_done(when_set(go), seen.entry(id));
    go->store(true);
  } // the destructor waits for all five
  CHECK(seen.order == std::vector<int>{0, 1, 2, 3, 4});
}

TEST_CASE("destroying the poller waits for pending work and runs its callbacks",
          "[cuda][completions]") {
  journal seen;
  auto polls = std::make_shared<std::atomic<int>>(0);
  {
    completion_poller poller{"test"};
    // Finishes on its third poll: still pending when the destructor starts.
    poller.when_done([polls] { return ++*polls >= 3 ? probe_result::done() : probe_result::pending(); },
                     seen.entry(1));
  }
  CHECK(polls->load() >= 3);
  CHECK(seen.order == std::vector<int>{1});
}

TEST_CASE("posted completions run on the callback thread, never in the caller",
          "[cuda][completions]") {
  journal seen;
  std::promise<void> done;
  completion_poller poller{"test"};
  poller.post(seen.entry(3, &done));
  REQUIRE(done.get_future().wait_for(bounded_wait) == std::future_status::ready);
  std::lock_guard<std::mutex> guard{seen.mutex};
  REQUIRE(seen.threads.size() == 1);
  CHECK(seen.threads[0] != std::this_thread::get_id());
  CHECK(seen.results[0].ok());
}

TEST_CASE("callbacks may register further completions", "[cuda][completions]") {
  std::promise<void> chained;
  completion_poller poller{"test"};
  poller.when_done([] { return probe_result::done(); }, [&](status) {
    poller.when_done([] { return probe_result::done(); }, [&](status) { chained.set_value(); });
  });
  REQUIRE(chained.get_future().wait_for(bounded_wait) == std::future_status::ready);
}

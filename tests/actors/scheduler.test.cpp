// actorflow's scheduler (actors/scheduler.hpp) on real threads: every message is delivered
// across workers under load and at shutdown, and idle workers fall asleep after their poll
// instead of burning a core.
#include "actors/scheduler.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <chrono>
#include <thread>

using namespace actorflow;

namespace {

struct scheduled_system {
  explicit scheduled_system(std::size_t threads) {
    use_actorflow_scheduler(config, scheduler_spin());
    config.set("scheduler.max-threads", threads);
    system = std::make_unique<caf::actor_system>(config);
  }
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> system;
};

/// CPU seconds this process has used, user and system.
double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

/// Answers a count with the count plus one.
caf::behavior incrementer(caf::event_based_actor*) {
  return {[](int value) { return value + 1; }};
}

/// Forwards each count to `next` and adds one to the answer: a chain of these makes every
/// message a hop between actors that any worker may run.
caf::behavior relay(caf::event_based_actor* self, caf::actor next) {
  return {[=](int value) -> caf::result<int> {
    auto answer = self->make_response_promise<int>();
    self->request(next, caf::infinite, value).then([=](int result) mutable { answer.deliver(result + 1); });
    return answer;
  }};
}

} // namespace

TEST_CASE("the scheduler delivers every message through a chain of actors on its workers",
          "[scheduler]") {
  scheduled_system sys{3};
  constexpr int chain_length = 8;
  auto next = sys.system->spawn(incrementer);
  for (int i = 1; i < chain_length; ++i)
    next = sys.system->spawn(relay, next);
  caf::scoped_actor self{*sys.system};
  int total = 0;
  for (int round = 0; round < 2000; ++round)
    self->request(next, std::chrono::seconds(10), round)
      .receive([&](int result) { total += result - round; },
               [&](caf::error& err) { FAIL("round " << round << ": " << sys.system->render(err)); });
  CHECK(total == 2000 * chain_length);
}

TEST_CASE("the scheduler runs many senders at once and loses no message", "[scheduler]") {
  scheduled_system sys{2};
  auto target = sys.system->spawn(incrementer);
  caf::scoped_actor self{*sys.system};
  constexpr int senders = 16, per_sender = 200;
  std::vector<caf::actor> workers;
  for (int s = 0; s < senders; ++s)
    workers.push_back(sys.system->spawn([target](caf::event_based_actor* worker) -> caf::behavior {
      return {[=](int count) -> caf::result<int> {
        auto answer = worker->make_response_promise<int>();
        auto left = std::make_shared<int>(count);
        auto sum = std::make_shared<int>(0);
        for (int i = 0; i < count; ++i)
          worker->request(target, caf::infinite, i).then([=](int result) mutable {
            *sum += result;
            if (--*left == 0)
              answer.deliver(*sum);
          });
        return answer;
      }};
    }));
  for (auto& w : workers)
    self->send(w, per_sender);
  int expected = per_sender * (per_sender + 1) / 2; // sum of i + 1 for i < per_sender
  for (int s = 0; s < senders; ++s)
    self->receive([&](int sum) { CHECK(sum == expected); },
                  caf::after(std::chrono::seconds(10)) >> [&] { FAIL("sender " << s << " did not answer"); });
}

TEST_CASE("idle scheduler workers sleep after their poll instead of burning a core",
          "[scheduler]") {
  scheduled_system sys{2};
  auto target = sys.system->spawn(incrementer);
  caf::scoped_actor self{*sys.system};
  // Some traffic first, so that the workers have been woken and start polling when it ends.
  for (int i = 0; i < 100; ++i)
    self->request(target, std::chrono::seconds(10), i).receive([](int) {}, [](caf::error&) {});
  // Well past any poll (scheduler_spin(): 50 us by default, at most a few ms if set).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto before = process_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  auto used = process_cpu_seconds() - before;
  INFO("CPU seconds used by an idle system in 0.4 s: " << used << "; poll " << scheduler_spin().count() << " us");
  // A worker that never slept would have used about 0.4 s.
  CHECK(used < 0.1);
}

#include "actors/scheduler.hpp"

#include "graph/environment.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/blocking_actor.hpp>
#include <caf/policy/unprofiled.hpp>
#include <caf/resumable.hpp>
#include <caf/scheduler/coordinator.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

namespace actorflow {

std::chrono::microseconds scheduler_spin() {
  static const std::chrono::microseconds spin = [] {
    const char* text = std::getenv("ACTORFLOW_SCHEDULER_SPIN_US");
    if (text != nullptr && std::strcmp(text, "0") == 0)
      return std::chrono::microseconds{0};
    return std::chrono::microseconds{size_from_environment("ACTORFLOW_SCHEDULER_SPIN_US", 50)};
  }();
  return spin;
}

namespace {

/// Calls `ready` until it returns true (then true) or `duration` has passed (then false),
/// yielding the core between calls: a runnable thread (a kernel's) gets it when there is one.
template <class Ready>
bool poll_for(std::chrono::microseconds duration, Ready ready) {
  if (duration.count() <= 0)
    return false;
  auto until = std::chrono::steady_clock::now() + duration;
  do {
    if (ready())
      return true;
    std::this_thread::yield();
  } while (std::chrono::steady_clock::now() < until);
  return false;
}

/// CAF's work_sharing with a poll before the sleep (scheduler.hpp says why).
class spin_then_sleep_sharing : public caf::policy::unprofiled {
public:
  struct coordinator_data {
    explicit coordinator_data(caf::scheduler::abstract_coordinator*) {}

    std::deque<caf::resumable*> queue;
    std::mutex lock;
    std::condition_variable cv;
    /// queue.size(), readable without the lock: what a polling worker watches.
    std::atomic<std::size_t> queued{0};
    /// Workers in cv.wait (changed under the lock): an enqueue with none skips the notify.
    std::size_t sleepers = 0;
    /// How long an idle worker polls before it sleeps (set before the workers start).
    std::chrono::microseconds idle_poll{0};
  };

  struct worker_data {
    explicit worker_data(caf::scheduler::abstract_coordinator*) {}
  };

  template <class Coordinator>
  void enqueue(Coordinator* self, caf::resumable* job) {
    auto& shared = d(self);
    bool wake;
    {
      std::lock_guard<std::mutex> guard(shared.lock);
      shared.queue.push_back(job);
      shared.queued.store(shared.queue.size(), std::memory_order_release);
      wake = shared.sleepers > 0;
    }
    if (wake)
      shared.cv.notify_one();
  }

  template <class Coordinator>
  void central_enqueue(Coordinator* self, caf::resumable* job) {
    enqueue(self, job);
  }

  template <class Worker>
  void external_enqueue(Worker* self, caf::resumable* job) {
    enqueue(self->parent(), job);
  }

  template <class Worker>
  void internal_enqueue(Worker* self, caf::resumable* job) {
    enqueue(self->parent(), job);
  }

  template <class Worker>
  void resume_job_later(Worker* self, caf::resumable* job) {
    enqueue(self->parent(), job);
  }

  template <class Worker>
  caf::resumable* dequeue(Worker* self) {
    auto& shared = d(self->parent());
    caf::resumable* job = nullptr;
    auto taken = [&] {
      if (shared.queued.load(std::memory_order_acquire) == 0)
        return false;
      std::lock_guard<std::mutex> guard(shared.lock);
      job = take(shared);
      return job != nullptr;
    };
    if (poll_for(shared.idle_poll, taken))
      return job;
    std::unique_lock<std::mutex> guard(shared.lock);
    while (shared.queue.empty()) {
      ++shared.sleepers;
      shared.cv.wait(guard);
      --shared.sleepers;
    }
    return take(shared);
  }

  template <class Worker, class UnaryFunction>
  void foreach_resumable(Worker*, UnaryFunction) {}

  template <class Coordinator, class UnaryFunction>
  void foreach_central_resumable(Coordinator* self, UnaryFunction f) {
    auto& shared = d(self);
    std::lock_guard<std::mutex> guard(shared.lock);
    while (auto* job = take(shared))
      f(job);
  }

private:
  /// The queue's first job, or nullptr when it is empty; the caller holds the lock.
  static caf::resumable* take(coordinator_data& shared) {
    if (shared.queue.empty())
      return nullptr;
    auto* job = shared.queue.front();
    shared.queue.pop_front();
    shared.queued.store(shared.queue.size(), std::memory_order_release);
    return job;
  }
};

using actorflow_coordinator = caf::scheduler::coordinator<spin_then_sleep_sharing>;

} // namespace

std::chrono::microseconds idle_poll_of(caf::actor_system& system) {
  // CAF's own schedulers (the test coordinator too, which delivers only when driven) poll not.
  auto* scheduler = dynamic_cast<actorflow_coordinator*>(&system.scheduler());
  return scheduler != nullptr ? scheduler->data().idle_poll : std::chrono::microseconds{0};
}

void poll_mailbox_briefly(caf::blocking_actor& self, std::chrono::microseconds duration) {
  poll_for(duration, [&self] { return !self.mailbox().empty(); });
}

void use_actorflow_scheduler(caf::actor_system_config& config, std::chrono::microseconds idle_poll) {
  // CAF creates its own scheduler only when no module factory made one; its workers start
  // later (module start), after idle_poll is set.
  config.module_factories.push_back([idle_poll](caf::actor_system& sys) -> caf::actor_system::module* {
    auto* scheduler = new actorflow_coordinator(sys);
    scheduler->data().idle_poll = idle_poll;
    return scheduler;
  });
}

} // namespace actorflow

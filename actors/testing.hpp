#pragma once
/// Deterministic tests of actorflow actors, for actorflow's own tests and for embedders
/// (installed as <actorflow/actors/testing.hpp>): an actor system on CAF's test scheduler, and
/// options that make sessions, tasks and devices run on it message by message.
///   testing::deterministic_system sys;
///   session s{sys.system(), g, sys.session_options()};     // blocking: drives the scheduler
///   auto r = s.run({c});                                    // messages ran one at a time
///   CHECK(sys.trace() == std::vector<std::string>{"/device:CPU:0 register 1", ...});
/// The same interleaving every run: one thread, jobs in FIFO order, no wall clock; timeouts
/// fire only when the test asks (sys.scheduler().trigger_timeouts()).
///
/// What determinism needs, and why these options set it:
/// - run_inline: every node runs inside its device actor, on the scheduler's thread. Otherwise
///   nodes run on the task's inter-op pool, whose threads race the scheduler.
/// - one thread per task (task_options(): threads = 1): the intra-op pool then has no threads
///   of its own, and multithreaded kernels run on the calling thread.
/// - drive: a blocking session runs the scheduler before each wait for an answer (it would wait
///   forever otherwise: nothing else runs the actors). A session actor (session_actor.hpp)
///   needs no drive: run the scheduler with run_all() after sending it a request.
/// - trace: every device actor reports each message it handles ("/device:CPU:1 run step 2"),
///   which is what tests assert the order of.
/// Across nodes (tasks in several simulated processes), CAF's test multiplexer plays the
/// network: <actorflow/actors/testing_network.hpp> (testing::test_network).

#include "actors/session.hpp"
#include "actors/task_service.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace actorflow::testing {

class deterministic_system {
public:
  deterministic_system() {
    config_.set("scheduler.policy", caf::atom("testing"));
    system_ = std::make_unique<caf::actor_system>(config_);
    scheduler_ = &dynamic_cast<caf::scheduler::test_coordinator&>(system_->scheduler());
  }

  caf::actor_system& system() { return *system_; }
  caf::scheduler::test_coordinator& scheduler() { return *scheduler_; }

  /// Options for a session whose every step is run by this scheduler, message by message, and
  /// traced into trace().
  actorflow::session_options session_options(actorflow::session_options base = {}) {
    base.run_inline = true;
    // Pools of its own with one thread: kernels run on the calling thread.
    base.use_per_session_threads = true;
    base.inter_op_parallelism_threads = 1;
    base.intra_op_parallelism_threads = 1;
    base.drive = [this] { run_all(); };
    base.trace = tracer();
    return base;
  }

  /// Options for a task service (spawn_task_service) whose devices run on this scheduler, with
  /// one thread, traced into trace() as "<tag> <line>" ("ps /device:CPU:0 run step 2"): the
  /// devices of different tasks have the same local names.
  task_service_options task_options(const std::string& tag, task_service_options base = {}) {
    base.run_inline = true;
    base.threads = 1;
    base.trace = tracer(tag);
    return base;
  }

  /// A trace function that appends its lines to trace(), after "<tag> " when a tag is given
  /// (for device_actor_options::trace and the like).
  std::function<void(const std::string&)> tracer(const std::string& tag = {}) {
    auto prefix = tag.empty() ? std::string{} : tag + " ";
    return [this, prefix](const std::string& line) { trace_.push_back(prefix + line); };
  }

  /// Runs jobs one at a time until none is left; returns how many ran.
  std::size_t run_all() {
    std::size_t count = 0;
    while (scheduler_->try_run_once())
      ++count;
    return count;
  }

  const std::vector<std::string>& trace() const { return trace_; }
  void clear_trace() { trace_.clear(); }

private:
  caf::actor_system_config config_;
  std::unique_ptr<caf::actor_system> system_;
  caf::scheduler::test_coordinator* scheduler_ = nullptr;
  std::vector<std::string> trace_;
};

} // namespace actorflow::testing

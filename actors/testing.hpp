#pragma once
/// An actor system on CAF's deterministic test scheduler, and session options that run every
/// node inside its device actor and drive the scheduler before each wait.
///   deterministic_system sys;
///   session s{sys.system(), g, sys.session_options()};
///   auto r = s.run({c});              // messages ran one by one, in a fixed order
///   CHECK(sys.trace() == std::vector<std::string>{...});
/// The same interleaving every run: one thread, jobs in FIFO order, no wall clock.

#include "actors/session.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/scheduler/test_coordinator.hpp>

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

  /// Options for a session whose every step is run by this scheduler, message by message.
  actorflow::session_options session_options(actorflow::session_options base = {}) {
    base.run_inline = true;
    base.drive = [this] { run_all(); };
    base.trace = [this](const std::string& line) { trace_.push_back(line); };
    return base;
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

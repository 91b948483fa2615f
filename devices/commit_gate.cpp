#include "devices/commit_gate.hpp"

namespace actorflow {

commit_gate::commit_gate(int expected, std::function<void()> on_armed)
  : expected_(expected), on_armed_(std::move(on_armed)) {}

void commit_gate::hold(std::function<void(bool)> release) {
  std::function<void()> armed;
  bool kept = false;
  bool decided_commit = false;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    if (state_ == state::open) {
      held_.push_back(std::move(release));
      kept = true;
      if (++holds_ == expected_)
        armed = std::move(on_armed_);
    } else {
      decided_commit = state_ == state::committed;
    }
  }
  if (!kept) {
    release(decided_commit);
    return;
  }
  if (armed)
    armed();
}

void commit_gate::commit() { release_all(state::committed); }

void commit_gate::cancel() { release_all(state::cancelled); }

void commit_gate::cancel_unless_prepared() { release_all(state::cancelled, true); }

void commit_gate::release_all(state to, bool unless_prepared) {
  std::vector<std::function<void(bool)>> released;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    if (state_ != state::open || (unless_prepared && holds_ >= expected_))
      return;
    state_ = to;
    released.swap(held_);
  }
  for (auto& release : released)
    release(to == state::committed);
}

bool commit_gate::armed() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return holds_ >= expected_ || state_ == state::committed;
}

bool commit_gate::committed() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return state_ == state::committed;
}

} // namespace actorflow

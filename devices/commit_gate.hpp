#pragma once
/// All-or-nothing variable updates of one step on one device (run_options::all_or_nothing):
/// each update kernel whose inputs depend on no other update of the step (the master marks
/// them, attr "_commit_gate") waits here until every such update of the step, on every device,
/// is ready; then the step's coordinator commits and they all apply, or the step ends first and
/// none does. A worker lost in the middle of a step so leaves no variable half updated.
///   commit_gate gate{2, [] { tell_coordinator_prepared(); }};
///   gate.hold([](bool commit) { commit ? apply() : fail(); });   // twice
///   gate.commit();                                                 // or gate.cancel()
/// Once armed, the device has told the coordinator it is prepared, and only the coordinator's
/// decision (commit() or cancel()) releases the held updates: a failure of the device's own
/// (cancel_unless_prepared()) then leaves them for it. The coordinator may already have
/// committed every other device.
/// Thread-safe.

#include <functional>
#include <mutex>
#include <vector>

namespace actorflow {

/// The node attr (bool) that marks an update as one of its step's first updates.
inline constexpr const char* commit_gate_attr = "_commit_gate";

class commit_gate {
public:
  /// `expected` holds make the gate armed; `on_armed` then runs once, on the holding thread.
  commit_gate(int expected, std::function<void()> on_armed);

  /// Holds an update: `release(true)` once the step commits, `release(false)` when it ends
  /// without (at once when it already has).
  void hold(std::function<void(bool commit)> release);
  /// Releases every held update to apply, and later ones at once.
  void commit();
  /// Releases every held update to fail, and later ones at once; nothing after a commit.
  void cancel();
  /// cancel(), unless every expected update is held (prepared): the coordinator decides then.
  void cancel_unless_prepared();
  /// Whether every expected update is held (or the gate committed).
  bool armed() const;
  bool committed() const;

private:
  enum class state { open, committed, cancelled };
  void release_all(state to, bool unless_prepared = false);

  mutable std::mutex mutex_;
  int expected_;
  std::function<void()> on_armed_;
  std::vector<std::function<void(bool)>> held_;
  int holds_ = 0;
  state state_ = state::open;
};

} // namespace actorflow

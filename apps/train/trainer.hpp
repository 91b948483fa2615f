#pragma once
/// The training loop every mode of actorflow-train shares (TensorFlow's MonitoredTrainingSession
/// in small): a step function run until the last step, and hooks that see every step's report
/// and may stop training with an error.
///   std::vector<std::unique_ptr<training_hook>> hooks;
///   hooks.push_back(make_finite_loss_hook());
///   hooks.push_back(make_checkpoint_hook(save, steps_per_epoch));
///   trainer t{std::move(hooks)};
///   AF_RETURN_IF_ERROR(t.run(resumed_step, total_steps, [&](std::int64_t step) { ... }));
/// No sessions or actors here: steps and checkpoints are functions the caller gives.

#include "graph/status.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace actorflow::train {

/// What one training step reports to the hooks.
struct step_report {
  /// Steps done, this one included (the first step is 1).
  std::int64_t step = 0;
  int epoch = 1;
  double loss = 0;
  /// Accuracy on the step's batch; negative when the model measures none.
  double batch_accuracy = -1;
  /// Examples in the step's batch, and how long the step took.
  std::int64_t examples = 0;
  double seconds = 0;
  /// Synchronous training: gradients the ps shards dropped as stale so far (the most any shard
  /// reported); negative otherwise.
  std::int64_t stale_gradients_dropped = -1;
  /// Set by the step function when training is over after this step (a shared global step
  /// reached its end); the trainer then stops after the hooks saw it.
  bool last = false;
};

class training_hook {
public:
  virtual ~training_hook() = default;
  /// After each step; an error stops training with it.
  virtual status after_step(const step_report& report) = 0;
  /// After the last step, when training ended without an error.
  virtual status end(const step_report& last) {
    static_cast<void>(last);
    return {};
  }
};

class trainer {
public:
  using step_function = std::function<result<step_report>(std::int64_t step)>;

  explicit trainer(std::vector<std::unique_ptr<training_hook>> hooks) : hooks_(std::move(hooks)) {}

  /// Runs step(first_step + 1) ... step(last_step), every hook after each, or fewer when a
  /// step's report says it was the last. Returns the first error of a step or a hook, which
  /// stops training; the last report is last().
  status run(std::int64_t first_step, std::int64_t last_step, const step_function& step);

  const step_report& last() const { return last_; }

private:
  std::vector<std::unique_ptr<training_hook>> hooks_;
  step_report last_;
};

/// Stops training with an error when the loss is NaN or infinite: "the loss is nan at step 12;
/// lower --learning-rate" (a diverged model would otherwise train on to the end and exit 0).
std::unique_ptr<training_hook> make_finite_loss_hook();

/// Calls `save(step)` every `every_steps` steps and at `last_step` (when positive), and not
/// otherwise; its error stops training.
std::unique_ptr<training_hook> make_checkpoint_hook(std::function<status(std::int64_t step)> save,
                                                    std::int64_t every_steps,
                                                    std::int64_t last_step = 0);

/// Calls `observe(report)` after every step (progress lines, metrics rows).
std::unique_ptr<training_hook> make_observer_hook(std::function<void(const step_report&)> observe);

/// Examples per second over windows of about half a second (the mean so far until the first
/// window closes), and over the whole run.
class throughput_meter {
public:
  /// Adds a step; returns the current rate.
  double add(const step_report& report);
  /// Examples per second of step time over every step added.
  double overall() const;

private:
  using clock = std::chrono::steady_clock;
  double step_seconds_ = 0;
  std::int64_t examples_ = 0;
  clock::time_point window_start_ = clock::now();
  std::int64_t window_examples_ = 0;
  double current_ = 0;
  bool window_closed_ = false;
};

/// How a worker that is not the chief waits for the variables (TensorFlow's
/// SessionManager.wait_for_session): `check` runs until it succeeds, `pause` between tries.
struct readiness_wait {
  /// Reads what must be ready (the variables); ok once the chief initialised or restored them.
  std::function<status()> check;
  /// How long to keep trying, and what the error then blames (a flag, say).
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  std::string timeout_source = "--init-timeout";
  /// Between tries: 100 ms of sleep unless a test says otherwise.
  std::function<void()> pause;
  /// Told the first "not yet" once, so that a long wait is not a silent one.
  std::function<void(const status&)> waiting;
  /// The clock the timeout is measured on; steady_clock unless a test says otherwise.
  std::function<std::chrono::steady_clock::time_point()> now;
};

/// Tries `wait.check` until it succeeds. Failures that mean "not yet" (an uninitialised
/// variable, a task not up yet, a timeout) are retried; any other error ends the wait at once.
/// When the time runs out, the last failure (naming what is still uninitialised or unreachable)
/// comes back with what ran out. Returns how many tries it took.
result<int> wait_until_ready(const readiness_wait& wait);

} // namespace actorflow::train

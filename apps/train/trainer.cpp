#include "train/trainer.hpp"

#include "actors/task_client.hpp"

#include <cmath>
#include <string>
#include <thread>

namespace actorflow::train {

status trainer::run(std::int64_t first_step, std::int64_t last_step, const step_function& step) {
  for (auto next = first_step + 1; next <= last_step; ++next) {
    auto report = step(next);
    if (!report)
      return report.error();
    last_ = *report;
    for (auto& hook : hooks_)
      AF_RETURN_IF_ERROR(hook->after_step(last_));
    if (last_.last)
      break;
  }
  for (auto& hook : hooks_)
    AF_RETURN_IF_ERROR(hook->end(last_));
  return {};
}

namespace {

class finite_loss_hook final : public training_hook {
public:
  status after_step(const step_report& report) override {
    if (std::isfinite(report.loss))
      return {};
    return make_error(errc::out_of_range, "the loss is " + std::to_string(report.loss) +
                                            " at step " + std::to_string(report.step) +
                                            "; lower --learning-rate");
  }
};

class checkpoint_hook final : public training_hook {
public:
  checkpoint_hook(std::function<status(std::int64_t)> save, std::int64_t every, std::int64_t last)
    : save_(std::move(save)), every_(every), last_(last) {}

  status after_step(const step_report& report) override {
    bool due = (every_ > 0 && report.step % every_ == 0) || (last_ > 0 && report.step == last_);
    return due ? save_(report.step) : status{};
  }

private:
  std::function<status(std::int64_t)> save_;
  std::int64_t every_;
  std::int64_t last_;
};

class observer_hook final : public training_hook {
public:
  explicit observer_hook(std::function<void(const step_report&)> observe)
    : observe_(std::move(observe)) {}

  status after_step(const step_report& report) override {
    observe_(report);
    return {};
  }

private:
  std::function<void(const step_report&)> observe_;
};

} // namespace

std::unique_ptr<training_hook> make_finite_loss_hook() {
  return std::make_unique<finite_loss_hook>();
}

std::unique_ptr<training_hook> make_checkpoint_hook(std::function<status(std::int64_t)> save,
                                                    std::int64_t every_steps, std::int64_t last_step) {
  return std::make_unique<checkpoint_hook>(std::move(save), every_steps, last_step);
}

std::unique_ptr<training_hook> make_observer_hook(std::function<void(const step_report&)> observe) {
  return std::make_unique<observer_hook>(std::move(observe));
}

double throughput_meter::add(const step_report& report) {
  step_seconds_ += report.seconds;
  examples_ += report.examples;
  window_examples_ += report.examples;
  auto now = clock::now();
  auto window = std::chrono::duration<double>(now - window_start_).count();
  if (window > 0.5) {
    current_ = static_cast<double>(window_examples_) / window;
    window_start_ = now;
    window_examples_ = 0;
    window_closed_ = true;
  } else if (!window_closed_ && step_seconds_ > 0) {
    // Before the first window closes, the mean so far rather than 0.
    current_ = static_cast<double>(examples_) / step_seconds_;
  }
  return current_;
}

double throughput_meter::overall() const {
  return step_seconds_ > 0 ? static_cast<double>(examples_) / step_seconds_ : 0.0;
}

result<int> wait_until_ready(const readiness_wait& wait) {
  auto now = wait.now ? wait.now : [] { return std::chrono::steady_clock::now(); };
  auto deadline = now() + wait.timeout;
  for (int tries = 1;; ++tries) {
    auto st = wait.check();
    if (st.ok())
      return tries;
    // Uninitialised, or a task not (yet, or no longer) reachable: a ps lost during the wait
    // answers aborted or data_loss, and comes back within the wait as well as one not up yet.
    bool not_yet = st.code() == errc::failed_precondition || connection_like(st);
    if (!not_yet)
      return st;
    if (tries == 1 && wait.waiting)
      wait.waiting(st);
    if (now() >= deadline) {
      auto ms = wait.timeout.count();
      auto bound = ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
      return st.with_context("the variables were not ready within " + bound + " (" +
                             wait.timeout_source + ")");
    }
    if (wait.pause)
      wait.pause();
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

} // namespace actorflow::train

#include "train/monitored_session.hpp"

#include "actors/saver.hpp"
#include "actors/task_client.hpp"
#include "graph/ops.hpp"
#include "train/metrics.hpp"
#include "train/session_manager.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>

namespace actorflow::train {

namespace {

/// The int64 global step a read gave.
std::int64_t step_of(const tensor& t) { return t.scalar_value<std::int64_t>(); }

class stop_at_step final : public session_run_hook {
public:
  stop_at_step(output global_step, std::int64_t last_step)
      : global_step_(global_step), last_step_(last_step) {}
  result<session_run_args> before_run(session_run_context&) override {
    return session_run_args{{global_step_}, {}};
  }
  status after_run(session_run_context& context, const std::vector<tensor>& values) override {
    if (auto& counted = context.global_step()) {
      if (*counted >= last_step_)
        context.request_stop();
      return {};
    }
    // The read may have run before the step's own increment (TF's hook reasons the same way):
    // only when it may have reached the last step is the exact value read.
    if (step_of(values.at(0)) + 1 < last_step_)
      return {};
    auto now = context.raw_session().run({global_step_});
    if (!now)
      return now.error();
    if (step_of(now->at(0)) >= last_step_)
      context.request_stop();
    return {};
  }

private:
  output global_step_;
  std::int64_t last_step_;
};

class nan_loss final : public session_run_hook {
public:
  nan_loss(output loss, output global_step) : loss_(loss), global_step_(global_step) {}
  result<session_run_args> before_run(session_run_context&) override {
    return session_run_args{{loss_, global_step_}, {}};
  }
  status after_run(session_run_context&, const std::vector<tensor>& values) override {
    auto loss = values.at(0).scalar_value<double>();
    if (std::isfinite(loss))
      return {};
    return make_error(errc::out_of_range, std::string{"the loss is "} +
                                            (std::isnan(loss) ? "nan" : "infinite") +
                                            " at global step " +
                                            std::to_string(step_of(values.at(1))));
  }

private:
  output loss_, global_step_;
};

class logging final : public session_run_hook {
public:
  logging(std::vector<output> tensors, std::int64_t every_n,
          std::function<void(std::int64_t, const std::vector<tensor>&)> log)
      : tensors_(std::move(tensors)), every_n_(std::max<std::int64_t>(every_n, 1)), log_(std::move(log)) {}
  result<session_run_args> before_run(session_run_context&) override {
    if (steps_ % every_n_ != 0)
      return session_run_args{};
    return session_run_args{tensors_, {}};
  }
  status after_run(session_run_context&, const std::vector<tensor>& values) override {
    if (steps_++ % every_n_ == 0)
      log_(steps_, values);
    return {};
  }

private:
  std::vector<output> tensors_;
  std::int64_t every_n_;
  std::function<void(std::int64_t, const std::vector<tensor>&)> log_;
  std::int64_t steps_ = 0;
};

/// What summary_dir asks for (TF's SummarySaverHook and StepCounterHook in one): a metrics
/// row every `every` global steps, the graph once it was placed.
class summary final : public session_run_hook {
public:
  summary(const graph& g, output global_step, output loss, output accuracy, std::int64_t every,
          std::int64_t examples_per_step)
      : graph_(g), global_step_(global_step), loss_(loss), accuracy_(accuracy),
        every_(std::max<std::int64_t>(every, 1)), examples_per_step_(examples_per_step) {}
  /// The directory made, for after_create_session.
  status open(const std::string& directory) {
    std::error_code failed;
    std::filesystem::create_directories(directory, failed);
    if (failed)
      return make_error(errc::invalid_argument, "summary_dir '" + directory +
                                                  "' cannot be made: " + failed.message());
    path_ = (std::filesystem::path{directory} / "metrics.csv").string();
    return {};
  }
  /// The first session continues a metrics.csv there up to its global step (a restored run's
  /// rows beyond it are dropped), or starts one.
  status after_create_session(session& s) override {
    since_ = std::chrono::steady_clock::now();
    if (opened_)
      return {};
    auto at = s.run({global_step_});
    if (!at)
      return at.error();
    AF_RETURN_IF_ERROR(log_.resume(path_, step_of(at->at(0))));
    opened_ = true;
    return {};
  }
  result<session_run_args> before_run(session_run_context&) override {
    session_run_args args{{global_step_}, {}};
    for (auto& scalar : {loss_, accuracy_})
      if (scalar.valid())
        args.fetches.push_back(scalar);
    return args;
  }
  status after_run(session_run_context& context, const std::vector<tensor>& values) override {
    ++steps_since_;
    log_.add_graph(graph_);
    auto step = context.global_step() ? *context.global_step() : step_of(values.at(0));
    if (last_row_ && step < *last_row_ + every_)
      return {};
    auto now = std::chrono::steady_clock::now();
    auto seconds = std::chrono::duration<double>(now - since_).count();
    metrics_row row;
    row.step = step;
    std::size_t next = 1;
    row.loss = loss_.valid() ? values.at(next++).scalar_value<double>() : 0;
    row.accuracy = accuracy_.valid() ? values.at(next++).scalar_value<double>() : -1;
    if (seconds > 0) {
      row.examples_per_second =
        static_cast<double>(steps_since_ * examples_per_step_) / seconds;
      row.step_seconds = seconds / static_cast<double>(steps_since_);
    }
    log_.add(row);
    last_row_ = step;
    since_ = now;
    steps_since_ = 0;
    return {};
  }

private:
  const graph& graph_;
  output global_step_, loss_, accuracy_;
  std::int64_t every_, examples_per_step_;
  std::string path_;
  bool opened_ = false;
  metrics_log log_;
  std::optional<std::int64_t> last_row_;
  std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
  std::int64_t steps_since_ = 0;
};

/// Whether a failed step is worth a new session and one more try (TF's _RecoverableSession):
/// the cluster lost a task (unavailable, aborted: the master itself may have gone with it, so
/// no ps need be named) or a lost ps is told (session_manager::lost_ps).
bool preempted(const status& failure, const session_manager& manager) {
  if (manager.lost_ps(failure))
    return true;
  if (failure.code() == errc::unavailable || failure.code() == errc::aborted) {
    manager.warn(failure.message() + "; making the session ready again");
    return true;
  }
  return false;
}

} // namespace

std::unique_ptr<session_run_hook> stop_at_step_hook(output global_step, std::int64_t last_step) {
  return std::make_unique<stop_at_step>(global_step, last_step);
}

std::unique_ptr<session_run_hook> nan_loss_hook(output loss, output global_step) {
  return std::make_unique<nan_loss>(loss, global_step);
}

std::unique_ptr<session_run_hook>
logging_hook(std::vector<output> tensors, std::int64_t every_n,
             std::function<void(std::int64_t, const std::vector<tensor>&)> log) {
  return std::make_unique<logging>(std::move(tensors), every_n, std::move(log));
}

struct monitored_session::state {
  monitored_session_options options;
  std::unique_ptr<saver> checkpoint_saver;
  std::unique_ptr<session> s;
  checkpoint_files checkpoints;
  std::optional<session_manager> manager;
  std::int64_t last_saved = 0;
  std::chrono::steady_clock::time_point saved_at = std::chrono::steady_clock::now();
  /// Whether a hook counts the global step (session_run_context::set_global_step): then the
  /// variable is not read for it.
  bool hooks_count_steps = false;

  /// The chief's checkpoint at `step`, after the hooks' before_save.
  status save(std::int64_t step) {
    for (auto& hook : options.hooks)
      AF_RETURN_IF_ERROR(hook->before_save(*s, step));
    AF_RETURN_IF_ERROR(checkpoints.writer().save(*s, step));
    last_saved = step;
    saved_at = std::chrono::steady_clock::now();
    return {};
  }
};

monitored_session::monitored_session(std::unique_ptr<state> st) : state_(std::move(st)) {}

monitored_session::~monitored_session() = default;

session& monitored_session::raw_session() { return *state_->s; }

result<std::unique_ptr<monitored_session>> monitored_session::create(graph& g,
                                                                     monitored_session_options options) {
  if (!options.global_step.read.valid())
    return make_error(errc::invalid_argument, "monitored_session needs a global_step variable");
  if (!options.summary_dir.empty() && options.is_chief) {
    auto summaries = std::make_unique<summary>(g, options.global_step.read, options.summary_loss,
                                               options.summary_accuracy,
                                               options.save_summaries_steps,
                                               options.examples_per_step);
    AF_RETURN_IF_ERROR(summaries->open(options.summary_dir));
    options.hooks.push_back(std::move(summaries));
  }
  for (auto& hook : options.hooks)
    AF_RETURN_IF_ERROR(hook->begin(g));
  auto st = std::make_unique<state>();
  st->options = std::move(options);
  auto& o = st->options;
  // The saver adds its ops now: before the session first runs the graph.
  if (!o.checkpoint_dir.empty() && o.is_chief) {
    st->checkpoint_saver = o.sharded_checkpoints
                             ? std::make_unique<saver>(g, std::vector<variable>{}, o.checkpoint_dir)
                             : std::make_unique<saver>(g);
    AF_RETURN_IF_ERROR(st->checkpoint_saver->status());
  }
  session_manager_options ready;
  ready.global_step = o.global_step.read;
  ready.variables = variables_ready_of(g);
  ready.initializer = ops::global_variables_initializer(g);
  ready.init_timeout_seconds = o.init_timeout_seconds;
  ready.timeout_source = o.init_timeout_source;
  ready.ps_job = o.ps_job;
  if (o.cluster)
    ready.probe_ps = [cluster = o.cluster, job = o.ps_job] {
      return probe_job(*cluster, job, 2);
    };
  ready.say = o.say;
  ready.warn = o.warn ? o.warn : [](const std::string& line) {
    std::cerr << "monitored_session: " << line << '\n';
  };
  AF_RETURN_IF_ERROR(g.status());
  st->s = std::make_unique<session>(g, o.session);
  if (st->checkpoint_saver)
    st->checkpoints = checkpoint_files{o.checkpoint_dir, o.keep_checkpoints, *st->checkpoint_saver};
  ready.checkpoints = &st->checkpoints;
  st->manager.emplace(std::move(ready));
  auto step = o.is_chief ? st->manager->prepare_session(*st->s, {true, false})
                         : st->manager->wait_for_session(*st->s);
  if (!step)
    return step.error();
  st->last_saved = *step;
  st->saved_at = std::chrono::steady_clock::now();
  for (auto& hook : o.hooks)
    AF_RETURN_IF_ERROR(hook->after_create_session(*st->s));
  std::unique_ptr<monitored_session> out{new monitored_session{std::move(st)}};
  out->global_step_ = *step;
  return out;
}

result<std::vector<tensor>> monitored_session::run_with(const run_options& step,
                                                        const std::vector<output>& fetches,
                                                        const feed_list& feeds,
                                                        const std::vector<output>& targets) {
  auto& st = *state_;
  auto& o = st.options;
  // One try of the step with every hook around it: the caller's fetches, the global step,
  // then each hook's, in order.
  auto attempt = [&](session_run_context& context) -> result<std::vector<tensor>> {
    std::vector<output> all = fetches;
    all.push_back(o.global_step.read);
    feed_list all_feeds = feeds;
    std::vector<std::size_t> hook_fetches;
    for (auto& hook : o.hooks) {
      auto args = hook->before_run(context);
      if (!args)
        return args.error();
      hook_fetches.push_back(args->fetches.size());
      all.insert(all.end(), args->fetches.begin(), args->fetches.end());
      all_feeds.insert(all_feeds.end(), args->feeds.begin(), args->feeds.end());
    }
    auto values = st.s->run_with(step, all, all_feeds, targets);
    if (!values)
      return values.error();
    auto& got = *values;
    global_step_ = step_of(got.at(fetches.size()));
    auto next = got.begin() + static_cast<std::ptrdiff_t>(fetches.size() + 1);
    for (std::size_t i = 0; i < o.hooks.size(); ++i) {
      std::vector<tensor> mine(next, next + static_cast<std::ptrdiff_t>(hook_fetches[i]));
      next += static_cast<std::ptrdiff_t>(hook_fetches[i]);
      AF_RETURN_IF_ERROR(o.hooks[i]->after_run(context, mine));
    }
    got.resize(fetches.size());
    return values;
  };
  std::optional<session_run_context> context{std::in_place, fetches, *st.s};
  auto got = attempt(*context);
  // A lost task may fail the step or a hook (a sync push to a ps that went away). Training
  // outlives it, as TF's _RecoverableSession does: once the task is back, the variables are
  // kept, restored or initialised (said), and the whole step, hooks and all, runs again on the
  // cluster as it is now.
  if (!got && preempted(got.error(), *st.manager)) {
    st.s->reopen();
    auto back = st.manager->recover_session(*st.s, o.is_chief);
    if (!back)
      return back.error();
    st.last_saved = std::min(st.last_saved, *back);
    global_step_ = *back;
    for (auto& hook : o.hooks)
      AF_RETURN_IF_ERROR(hook->after_create_session(*st.s));
    context.emplace(fetches, *st.s);
    got = attempt(*context);
  }
  if (!got)
    return got.error();
  stop_ = stop_ || context->stop_requested();
  if (auto& counted = context->global_step()) {
    global_step_ = *counted;
    st.hooks_count_steps = true;
  }
  // The read may precede the step's own increment: the exact step only when one may be due.
  auto by_steps = o.save_checkpoint_steps > 0 &&
                  global_step_ + 1 >= st.last_saved + o.save_checkpoint_steps;
  auto by_time = o.save_checkpoint_secs > 0 &&
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - st.saved_at).count() >=
                   o.save_checkpoint_secs;
  if (st.checkpoints && (by_steps || by_time)) {
    if (!st.hooks_count_steps) {
      auto now = st.s->run({o.global_step.read});
      if (!now)
        return now.error();
      global_step_ = step_of(now->at(0));
    }
    auto steps_due = o.save_checkpoint_steps > 0 && global_step_ >= st.last_saved + o.save_checkpoint_steps;
    if (steps_due || (by_time && global_step_ != st.last_saved))
      AF_RETURN_IF_ERROR(st.save(global_step_));
  }
  return got;
}

status monitored_session::close() {
  auto& st = *state_;
  for (auto& hook : st.options.hooks)
    AF_RETURN_IF_ERROR(hook->end(*st.s));
  if (!st.hooks_count_steps) {
    auto now = st.s->run({st.options.global_step.read});
    if (!now)
      return now.error();
    global_step_ = step_of(now->at(0));
  }
  if (st.checkpoints && global_step_ != st.last_saved)
    AF_RETURN_IF_ERROR(st.save(global_step_));
  return st.checkpoints.written();
}

} // namespace actorflow::train

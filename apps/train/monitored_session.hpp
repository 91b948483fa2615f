#pragma once
/// A training session that looks after itself (TensorFlow's MonitoredTrainingSession): it makes
/// the variables ready (train::session_manager: the chief restores the latest checkpoint or
/// initialises, the others wait), runs the hooks around every step, saves checkpoints (the chief
/// only), and outlives a lost ps task: the step fails, the session waits for the ps to come
/// back, the chief restores or keeps its variables, and the step runs again.
///   train::monitored_session_options o;
///   o.global_step = global_step;                 // a variable counted by the train op
///   o.is_chief = task == 0;
///   o.checkpoint_dir = "/tmp/ckpt";
///   o.save_checkpoint_steps = 100;
///   o.hooks.push_back(train::stop_at_step_hook(o.global_step.read, 1000));
///   auto s = train::monitored_session::create(g, std::move(o));
///   while (!(*s)->should_stop())
///     AF_RETURN_IF_ERROR((*s)->run({loss}, {{x, batch}}, {train_op}).error());
/// No CAF here.

#include "actors/cluster_spec.hpp"
#include "actors/session.hpp"
#include "graph/graph.hpp"
#include "graph/status.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace actorflow::train {

/// What a hook adds to a step (TF's SessionRunArgs): more fetches and feeds.
struct session_run_args {
  std::vector<output> fetches;
  feed_list feeds;
};

/// The step a hook sees: what the caller asked for, and a way to end training after it.
class session_run_context {
public:
  session_run_context(const std::vector<output>& fetches, session& s) : fetches_(fetches), session_(s) {}
  const std::vector<output>& original_fetches() const { return fetches_; }
  /// For a hook that must read something after the step (the exact global step).
  session& raw_session() { return session_; }
  /// should_stop() is true once this step ends.
  void request_stop() { stop_ = true; }
  bool stop_requested() const { return stop_; }
  /// For a hook that knows the global step this step ended at when no graph op counts it (the
  /// synchronous rounds, applied on the shards): the hooks after it and the session take this
  /// instead of reading the variable.
  void set_global_step(std::int64_t step) { global_step_ = step; }
  const std::optional<std::int64_t>& global_step() const { return global_step_; }

private:
  const std::vector<output>& fetches_;
  session& session_;
  bool stop_ = false;
  std::optional<std::int64_t> global_step_;
};

/// TF's SessionRunHook. Every method may fail; its error ends the run (or creation) with it.
class session_run_hook {
public:
  virtual ~session_run_hook() = default;
  /// Before the session exists: the hook may add ops to the graph.
  virtual status begin(graph& g) {
    static_cast<void>(g);
    return {};
  }
  /// Once the variables are ready: after creation, and again after a lost task, once they are
  /// ready again in the reopened session (TF calls it for every session it creates).
  virtual status after_create_session(session& s) {
    static_cast<void>(s);
    return {};
  }
  /// Before each step: what to fetch and feed besides the caller's.
  virtual result<session_run_args> before_run(session_run_context& context) {
    static_cast<void>(context);
    return session_run_args{};
  }
  /// After each step: the values of this hook's fetches, in before_run's order.
  virtual status after_run(session_run_context& context, const std::vector<tensor>& values) {
    static_cast<void>(context);
    static_cast<void>(values);
    return {};
  }
  /// Just before the chief saves a checkpoint at `step` (TF's CheckpointSaverListener): a hook
  /// that counts the step itself writes it into the global step variable here.
  virtual status before_save(session& s, std::int64_t step) {
    static_cast<void>(s);
    static_cast<void>(step);
    return {};
  }
  /// When the session closes after training ended without an error.
  virtual status end(session& s) {
    static_cast<void>(s);
    return {};
  }
};

/// Requests a stop once `global_step` (an int64 read) reaches `last_step` (TF's StopAtStepHook).
std::unique_ptr<session_run_hook> stop_at_step_hook(output global_step, std::int64_t last_step);
/// Fails the step with an error naming it when `loss` is NaN or infinite (TF's NanTensorHook).
std::unique_ptr<session_run_hook> nan_loss_hook(output loss, output global_step);
/// Calls `log` with the values of `tensors` every `every_n` steps (TF's LoggingTensorHook).
std::unique_ptr<session_run_hook>
logging_hook(std::vector<output> tensors, std::int64_t every_n,
             std::function<void(std::int64_t step, const std::vector<tensor>&)> log);

struct monitored_session_options {
  /// Where the session runs (target, cluster, threads, timeouts): the session's own options.
  session_options session;
  /// The variable the train op counts steps in (it must be among the graph's variables).
  actorflow::variable global_step;
  bool is_chief = true;
  /// Checkpoints: the chief restores the latest at creation and saves every
  /// save_checkpoint_steps steps and every save_checkpoint_secs seconds (0: never, except at the
  /// end; TF's CheckpointSaverHook takes one or the other, here both may count) and when
  /// training ends. Empty: none.
  std::string checkpoint_dir;
  /// Each device holding variables (the ps tasks) writes and reads its own shard of every
  /// checkpoint in checkpoint_dir, on its own machine (TF's Saver(sharded=True)): no variable's
  /// value passes through the chief (actors/saver.hpp).
  bool sharded_checkpoints = false;
  std::int64_t save_checkpoint_steps = 0;
  double save_checkpoint_secs = 0;
  int keep_checkpoints = 5;
  /// Summaries (TF's summary_dir; the chief only): metrics.csv and TensorBoard event files
  /// there (train/metrics.hpp), a row every save_summaries_steps global steps with
  /// summary_loss and summary_accuracy (scalars, optional) and examples per second
  /// (examples_per_step of them per step), and the placed graph after the first step. Empty: none.
  std::string summary_dir;
  std::int64_t save_summaries_steps = 100;
  output summary_loss;
  output summary_accuracy;
  std::int64_t examples_per_step = 0;
  /// How long a worker waits for the chief and for a lost ps to come back, and what errors
  /// name as that bound (a program's flag).
  int init_timeout_seconds = 30;
  std::string init_timeout_source = "monitored_session_options::init_timeout_seconds";
  /// The ps job, and the cluster to probe it in when telling a lost ps (null: only the
  /// failure's origin tells).
  std::string ps_job = "ps";
  std::shared_ptr<const cluster_spec> cluster;
  /// Lines for the user (restored, recovered); standard output by default.
  std::function<void(const std::string&)> say;
  /// Warnings (a ps lost, a step run again, a damaged checkpoint skipped); standard error as
  /// "monitored_session: LINE" by default.
  std::function<void(const std::string&)> warn;
  std::vector<std::unique_ptr<session_run_hook>> hooks;
};

class monitored_session {
public:
  /// Runs the hooks' begin, opens the session, makes the variables ready, then
  /// after_create_session. Errors name what could not be made ready.
  static result<std::unique_ptr<monitored_session>> create(graph& g, monitored_session_options options);
  ~monitored_session();
  monitored_session(const monitored_session&) = delete;
  monitored_session& operator=(const monitored_session&) = delete;

  /// One step with every hook around it. A step failed by a lost task (unavailable, aborted,
  /// or a lost ps told by session_manager::lost_ps), in the session or in a hook, runs once
  /// more, hooks and all (before_run again), in a reopened session, once the variables are
  /// ready again (kept, restored or initialised, said) and the hooks saw after_create_session,
  /// as TF's MonitoredSession does. Checkpoints every save_checkpoint_steps steps of the
  /// global step.
  result<std::vector<tensor>> run(const std::vector<output>& fetches, const feed_list& feeds = {},
                                  const std::vector<output>& targets = {}) {
    return run_with({}, fetches, feeds, targets);
  }
  /// run() with per-step options (all_or_nothing, a fence), the retry's too.
  result<std::vector<tensor>> run_with(const run_options& step, const std::vector<output>& fetches,
                                       const feed_list& feeds = {},
                                       const std::vector<output>& targets = {});
  /// Whether a hook asked to stop.
  bool should_stop() const { return stop_; }
  /// The global step as the last step read it, which may be before that step's own increment
  /// (TF's run values: the read and the increment are not ordered); exact where the variables
  /// were made ready, after a checkpoint, after close(), and always when a hook counts the
  /// steps (session_run_context::set_global_step).
  std::int64_t global_step() const { return global_step_; }
  /// The hooks' end, a last checkpoint (chief), and waits for the checkpoint writes.
  status close();
  /// The session underneath, for what the hooks do not cover (evaluation).
  session& raw_session();

private:
  struct state;
  explicit monitored_session(std::unique_ptr<state> st);
  std::unique_ptr<state> state_;
  bool stop_ = false;
  std::int64_t global_step_ = 0;
};

} // namespace actorflow::train

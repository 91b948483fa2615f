#pragma once
/// What the modes of actorflow-train share (apps/train/modes.hpp): where a run trains, its data,
/// progress lines, results, checkpoints and the classifier replicas share. Internal to the app.

#include "actors/cluster_spec.hpp"
#include "actors/saver.hpp"
#include "actors/session.hpp"
#include "graph/optimizers.hpp"
#include "serialization/idx_reader.hpp"
#include "train/metrics.hpp"
#include "train/models.hpp"
#include "train/options.hpp"
#include "train/session_manager.hpp"
#include "train/trainer.hpp"

#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <unistd.h>

namespace actorflow::train_app {

using train::train_options;

using clock_type = std::chrono::steady_clock;

int fail(const status& s);

/// A warning of the library for the user, on standard error as "actorflow-train: LINE".
void warn(const std::string& line);

/// A usage error: the message, and exit code 2 (as for bad flags).
int usage_error(const status& s);

/// --graph-out: the picture of the graph as its sessions placed it (graph/graph_dot.hpp).
status write_graph_out(const train_options& o, const graph& g, const std::string& title);

/// Where the job runs: the session's options, and the ps and worker tasks unless it is local.
struct training_target {
  session_options options;
  std::optional<train::replica_layout> layout;
  std::string description;
};

result<training_target> resolve_target(const train_options& o);

/// One step on whatever session a mode has (a plain one, a monitored one): the values of
/// `fetches`, `targets` run too.
using run_step_fn = std::function<result<std::vector<tensor>>(const std::vector<output>& fetches,
                                                             const feed_list& feeds,
                                                             const std::vector<output>& targets)>;

/// A global step (an int64 variable, 0 at first) and the op counting one more update into it:
/// what a train op groups to count the updates of every replica (TF's minimize(global_step=)).
struct global_step_counter {
  actorflow::variable step;
  output count;
};
global_step_counter make_global_step(graph& g);

/// The steps of a plain session, as run_step_fn.
run_step_fn steps_on(session& s);

/// Prints progress: a live status line on a terminal, plain lines when piped.
class progress_printer {
public:
  explicit progress_printer(int log_every) : live_(::isatty(STDOUT_FILENO) == 1), every_(log_every) {}

  void update(std::int64_t step, int epoch, int epochs, double loss, double examples_per_second) {
    char line[160];
    std::snprintf(line, sizeof line, "step %lld  epoch %d/%d  loss %.4f  examples/s %.0f",
                  static_cast<long long>(step), epoch, epochs, loss, examples_per_second);
    if (live_) {
      // About ten redraws a second: enough to watch, cheap for the terminal.
      auto now = clock_type::now();
      if (now - last_redraw_ < std::chrono::milliseconds(100))
        return;
      last_redraw_ = now;
      std::printf("\r%-78s", line);
      std::fflush(stdout);
      dirty_ = true;
    } else if (step % every_ == 0) {
      std::printf("%s\n", line);
      std::fflush(stdout);
    }
  }

  void line(const std::string& text) {
    if (dirty_)
      std::printf("\n");
    dirty_ = false;
    std::printf("%s\n", text.c_str());
    std::fflush(stdout);
  }

private:
  bool live_;
  int every_;
  bool dirty_ = false;
  clock_type::time_point last_redraw_{};
};

/// "examples/s: N", the line every run ends its training with (tests and benchmarks read it).
void say_examples_per_second(progress_printer& progress, const train::throughput_meter& throughput);

/// The model actorflow-train runs (--model mlp or cnn): data parallel over worker towers on a
/// cluster, or a single tower when local.
result<train::data_parallel_mlp> build_model(graph& g, optimizer& opt, const training_target& where,
                                             train::classifier kind);

/// Splits a batch over the towers, as evenly as rows allow (the first get one more).
feed_list tower_feeds(const train::data_parallel_mlp& m, const tensor& images, const tensor& labels);

/// Test accuracy, from the first tower alone: evaluation needs no gradients to average.
result<double> evaluate(session& s, const train::data_parallel_mlp& m, const dataset& test);

/// The output and checkpoint directories, made writable (what the writer of metrics and
/// checkpoints needs first, so a bad directory fails before any training).
status prepare_output_directories(const train_options& o);

/// Fashion-MNIST's training and test sets from --data-dir.
struct fashion_mnist {
  dataset train;
  dataset test;
};

result<fashion_mnist> load_data(const train_options& o);

/// What one MLP step reports to the hooks, from its fetched (loss, correct).
train::step_report mlp_report(std::int64_t step, std::int64_t steps_per_epoch,
                              const std::vector<tensor>& loss_and_correct, const batch& b,
                              clock_type::time_point started);

/// The progress line after every step, and a metrics row every --log-every steps (and at the
/// first and last) when `metrics` is not null, which also gets the graph `g` after the first
/// step (placed by then).
std::unique_ptr<train::training_hook> progress_hook(const train_options& o, std::int64_t total_steps,
                                                    train::throughput_meter& throughput,
                                                    progress_printer& progress,
                                                    train::metrics_log* metrics, const graph& g);

/// The end of a run that reports results: the curve (and the graph's picture), then
/// "examples/s: N" and "test accuracy: X" as the last lines.
status report_results(const train_options& o, const graph& g, const train::metrics_log& metrics,
                      const std::string& title, const train::throughput_meter& throughput,
                      double accuracy, progress_printer& progress);

/// --checkpoint-dir's checkpoints; none without the flag, or for a process that writes none.
train::checkpoint_files checkpoints_of(const train_options& o, saver& from, bool writes = true);

/// --resume: the step of the latest checkpoint, restored into `s` and said on standard output;
/// 0 without the flag. Errors when there is none.
result<std::int64_t> resume(const train_options& o, train::checkpoint_files& checkpoints, session& s);

/// metrics.csv (and the event files) begun, or with --resume continued from `step`.
status begin_metrics(const train_options& o, std::int64_t step, train::metrics_log& metrics);

/// A run whose master is this process (local, in-process or on a cluster): the variables
/// initialised, or with --resume restored from the latest checkpoint; metrics.csv begun, or
/// continued up to that step (and so the curve). The step training starts at.
result<std::int64_t> begin_run(const train_options& o, graph& g, session& s, saver& from,
                               train::checkpoint_files& checkpoints, train::metrics_log& metrics);

/// "MLP", "CNN" or "RNN", for titles.
std::string model_title(const train_options& o);

/// This worker's share of the training set: rows [task * n / workers, (task + 1) * n /
/// workers), disjoint across workers and the same in every run.
result<dataset> shard_of(const dataset& all, int task, int workers);

/// The classifier of --model as replicas share it: its variables and a global step (how many
/// updates the model has had, whoever made them) on the ps tasks of `cluster`, round robin
/// (replica_device_setter), the rest on `worker_device` ("": wherever it runs). `train` also
/// counts the step; with `gradients`, the gradients are computed there too (synchronous rounds
/// push them to the shards instead of applying them).
struct shared_classifier {
  std::unique_ptr<optimizer> opt;
  train::classifier_model m;
  actorflow::variable global_step;
  output train;
  std::vector<gradient_and_variable> gradients;
  int ps_tasks = 0;
};

result<shared_classifier> build_shared_classifier(graph& g, const train_options& o,
                                                  const cluster_spec& cluster,
                                                  const std::string& worker_device,
                                                  bool with_gradients);

/// The variables of `g` made ready on the ps tasks of `cluster` (train::session_manager), from
/// `checkpoints`, said through `progress`.
train::session_manager variables_manager(const train_options& o, const cluster_spec& cluster,
                                         graph& g, const actorflow::variable& global_step,
                                         train::checkpoint_files& checkpoints,
                                         progress_printer& progress);

} // namespace actorflow::train_app

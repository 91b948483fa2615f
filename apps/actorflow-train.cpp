// actorflow-train: the main job. Trains the classic linear regression or a 784-256-128-10 ReLU
// MLP on Fashion-MNIST with actorflow sessions, shows progress, writes metrics.csv and
// curve.svg, and ends with "examples/s: N" and "test accuracy: X" (mlp). By default it trains
// on an in-process cluster (1 ps + 2 workers, data parallel); --target/--cluster train on a
// real cluster and --local in this process alone.
#include "actors/cluster_coordinator.hpp"
#include "actors/cluster_liveness.hpp"
#include "actors/cluster_spec.hpp"
#include "actors/protocols/ps.hpp"
#include "actors/saver.hpp"
#include "actors/session.hpp"
#include "actors/server.hpp"
#include "actors/session_actor.hpp"
#include "actors/task_client.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "graph/rendezvous_key.hpp"
#include "graph/replica_device_setter.hpp"
#include "serialization/checkpoint.hpp"
#include "serialization/file_io.hpp"
#include "serialization/graph_picture.hpp"
#include "serialization/idx_reader.hpp"
#include "support/metrics_http.hpp"
#include "train/metrics.hpp"
#include "train/models.hpp"
#include "train/options.hpp"
#include "train/trainer.hpp"

#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <deque>
#include <iostream>
#include <memory>
#include <optional>
#include <limits>
#include <map>
#include <random>
#include <thread>

#include <caf/all.hpp>

#include <unistd.h>

using namespace actorflow;
using train::train_options;

namespace {

using clock_type = std::chrono::steady_clock;

int fail(const status& s) {
  std::cerr << "actorflow-train: " << s.message() << '\n';
  return 1;
}

/// A usage error: the message, and exit code 2 (as for bad flags).
int usage_error(const status& s) {
  std::cerr << "actorflow-train: " << s.message() << '\n';
  return 2;
}

/// --graph-out: the picture of the graph as its sessions placed it (graph/graph_dot.hpp).
status write_graph_out(const train_options& o, const graph& g, const std::string& title) {
  if (o.graph_out.empty())
    return {};
  return write_graph_picture(g, o.graph_out, {title});
}

/// Where the job runs: the session's options, and the ps and worker tasks unless it is local.
struct training_target {
  session_options options;
  std::optional<train::replica_layout> layout;
  std::string description;
};

result<training_target> resolve_target(const train_options& o) {
  training_target t;
  t.options.inter_op_parallelism_threads = o.threads;
  t.options.intra_op_parallelism_threads = o.threads;
  t.options.log_device_placement = o.log_device_placement;
  t.options.mixed_precision = o.mixed_precision;
  t.options.connect_timeout_seconds = o.connect_timeout_seconds;
  if (o.local) {
    t.description = "this process (local devices)";
    return t;
  }
  if (o.gpus > 0) {
    // SPEC's several GPUs: a tower per GPU, the CPU holding the variables and averaging.
    train::replica_layout layout;
    auto type = o.tower_device_type == "GPU" ? std::string{"gpu"} : o.tower_device_type;
    for (int i = 0; i < o.gpus; ++i)
      layout.tower_devices.push_back("/device:" + type + ":" + std::to_string(i));
    layout.variable_device = "/cpu:0";
    layout.mirrored = o.all_reduce;
    t.options.allow_soft_placement = true;
    if (o.tower_device_type == "TEST")
      t.options.test_device_count = o.gpus;
    t.description = "this process: " + std::to_string(o.gpus) + " towers on " +
                    o.tower_device_type + " devices (soft placement), " +
                    (o.all_reduce ? "a copy of the variables on each, gradients all-reduced"
                                  : "variables on the CPU");
    t.layout = layout;
    return t;
  }
  if (!o.target.empty() && o.cluster.empty()) {
    // No cluster to lay out towers by: one model, placed by the master.
    t.options.target = o.target;
    t.options.timeout_seconds = o.step_timeout_seconds;
    t.description = "the master at " + o.target + " (one model on its default device)";
    return t;
  }
  train::replica_layout layout;
  layout.ps_job = o.ps_job;
  layout.worker_job = o.worker_job;
  if (o.ps_job == o.worker_job)
    return make_error(errc::invalid_argument,
                      "--ps-job and --worker-job are both '" + o.ps_job + "'");
  if (!o.cluster.empty()) {
    auto spec = cluster_spec::parse(o.cluster);
    if (!spec)
      return make_error(errc::invalid_argument, "--cluster: " + spec.error().message());
    for (auto& [flag, job] : {std::pair{"--ps-job", o.ps_job}, std::pair{"--worker-job", o.worker_job}})
      if (!spec->has_job(job))
        return make_error(errc::invalid_argument, std::string{"--cluster has no job '"} + job +
                                                    "' (name it with " + flag + ")");
    layout.ps_tasks = spec->num_tasks(o.ps_job);
    layout.worker_tasks = spec->num_tasks(o.worker_job);
    // Tasks in other processes can hang: their steps are bounded (in-process ones cannot).
    t.options.timeout_seconds = o.step_timeout_seconds;
    if (!o.target.empty()) {
      t.options.target = o.target;
      t.description = "the cluster of the master at " + o.target;
    } else {
      t.options.cluster = std::make_shared<const cluster_spec>(std::move(*spec));
      t.description = "the cluster " + o.cluster + " (this process is its master)";
    }
  } else {
    layout.ps_tasks = o.ps_tasks;
    layout.worker_tasks = o.worker_tasks;
    t.options.in_process_cluster = {{o.ps_job, o.ps_tasks}, {o.worker_job, o.worker_tasks}};
    t.description = "an in-process cluster of " + std::to_string(o.ps_tasks) + " " + o.ps_job +
                    " and " + std::to_string(o.worker_tasks) + " " + o.worker_job + " tasks";
  }
  t.options.default_task = "/job:" + o.worker_job + "/task:0";
  t.layout = layout;
  return t;
}

// --- mlp ------------------------------------------------------------------------------------

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

/// The model actorflow-train runs (--model mlp or cnn): data parallel over worker towers on a
/// cluster, or a single tower when local.
result<train::data_parallel_mlp> build_model(graph& g, optimizer& opt, const training_target& where,
                                             train::classifier kind) {
  if (where.layout)
    return train::build_data_parallel_mlp(g, opt, *where.layout, kind);
  auto single = train::build_classifier(g, opt, kind);
  train::data_parallel_mlp m;
  m.towers.push_back({single.images, single.labels, single.loss, single.correct});
  m.loss = single.loss;
  m.correct = single.correct;
  m.train = single.train;
  m.weights = single.weights;
  return m;
}

/// Splits a batch over the towers, as evenly as rows allow (the first get one more).
feed_list tower_feeds(const train::data_parallel_mlp& m, const tensor& images, const tensor& labels) {
  if (m.towers.size() == 1)
    return {{m.towers[0].images, images}, {m.towers[0].labels, labels}};
  feed_list feeds;
  auto rows = images.shape().dim(0);
  auto towers = static_cast<std::int64_t>(m.towers.size());
  std::int64_t begin = 0;
  for (std::int64_t t = 0; t < towers; ++t) {
    auto end = begin + rows / towers + (t < rows % towers ? 1 : 0);
    // Rows of a batch the tower placeholders accept: a slice cannot fail here.
    feeds.emplace_back(m.towers[t].images, *images.sliced(0, begin, end - begin));
    feeds.emplace_back(m.towers[t].labels, *labels.sliced(0, begin, end - begin));
    begin = end;
  }
  return feeds;
}

/// Test accuracy, from the first tower alone: evaluation needs no gradients to average.
result<double> evaluate(session& s, const train::data_parallel_mlp& m, const dataset& test) {
  batch_options in_order;
  in_order.batch_size = 1000;
  in_order.shuffle = false;
  auto batches = batch_iterator::create(test, in_order);
  if (!batches)
    return batches.error();
  double correct = 0;
  for (std::int64_t i = 0; i < batches->batches_per_epoch(); ++i) {
    auto& b = batches->next();
    auto& tower = m.towers[0];
    auto r = s.run({tower.correct}, {{tower.images, b.images}, {tower.labels, b.one_hot}});
    if (!r)
      return r.error();
    correct += r->at(0).scalar_value<double>();
  }
  return correct / static_cast<double>(test.size());
}

/// The output and checkpoint directories, made writable (what the writer of metrics and
/// checkpoints needs first, so a bad directory fails before any training).
status prepare_output_directories(const train_options& o) {
  AF_RETURN_IF_ERROR(file_io::ensure_writable_directory(o.output_dir));
  if (!o.checkpoint_dir.empty())
    AF_RETURN_IF_ERROR(file_io::ensure_writable_directory(o.checkpoint_dir));
  return {};
}

/// Fashion-MNIST's training and test sets from --data-dir.
struct fashion_mnist {
  dataset train;
  dataset test;
};

result<fashion_mnist> load_data(const train_options& o) {
  auto train_set = load_fashion_mnist(o.data_dir, "train");
  if (!train_set)
    return train_set.error();
  auto test_set = load_fashion_mnist(o.data_dir, "t10k");
  if (!test_set)
    return test_set.error();
  return fashion_mnist{std::move(*train_set), std::move(*test_set)};
}

/// What one MLP step reports to the hooks, from its fetched (loss, correct).
train::step_report mlp_report(std::int64_t step, std::int64_t steps_per_epoch,
                              const std::vector<tensor>& loss_and_correct, const batch& b,
                              clock_type::time_point started) {
  train::step_report report;
  report.step = step;
  report.epoch = static_cast<int>((step - 1) / steps_per_epoch) + 1;
  report.loss = loss_and_correct.at(0).scalar_value<double>();
  report.batch_accuracy =
    loss_and_correct.at(1).scalar_value<double>() / static_cast<double>(b.size);
  report.examples = b.size;
  report.seconds = std::chrono::duration<double>(clock_type::now() - started).count();
  return report;
}

/// The progress line after every step, and a metrics row every --log-every steps (and at the
/// first and last) when `metrics` is not null, which also gets the graph `g` after the first
/// step (placed by then).
std::unique_ptr<train::training_hook> progress_hook(const train_options& o, std::int64_t total_steps,
                                                    train::throughput_meter& throughput,
                                                    progress_printer& progress,
                                                    train::metrics_log* metrics, const graph& g) {
  return train::make_observer_hook([&o, total_steps, &throughput, &progress, metrics,
                                    &g](const train::step_report& r) {
    auto examples_per_second = throughput.add(r);
    if (metrics != nullptr && (r.step == 1 || r.step % o.log_every == 0 || r.step == total_steps)) {
      metrics->add_graph(g); // placed by now; written with the first row only
      metrics->add({r.step, r.epoch, r.loss, r.batch_accuracy, examples_per_second, r.seconds,
                    r.stale_gradients_dropped});
    }
    progress.update(r.step, r.epoch, o.epochs, r.loss, examples_per_second);
  });
}

/// The end of a run that reports results: the curve (and the graph's picture), then
/// "examples/s: N" and "test accuracy: X" as the last lines.
status report_results(const train_options& o, const graph& g, const train::metrics_log& metrics,
                      const std::string& title, const train::throughput_meter& throughput,
                      double accuracy, progress_printer& progress) {
  AF_RETURN_IF_ERROR(train::write_curve_svg(o.output_dir + "/curve.svg", metrics.rows(), title));
  AF_RETURN_IF_ERROR(write_graph_out(o, g, title));
  progress.line("metrics: " + o.output_dir + "/metrics.csv, curve: " + o.output_dir + "/curve.svg" +
                (o.graph_out.empty() ? "" : ", graph: " + o.graph_out));
  char line[64];
  std::snprintf(line, sizeof line, "examples/s: %.0f", throughput.overall());
  progress.line(line);
  std::snprintf(line, sizeof line, "test accuracy: %.4f", accuracy);
  progress.line(line);
  return {};
}

/// The checkpoint to restore: the newest in `checkpoints` that verifies, after a line on
/// standard error for each newer one that is damaged; nullopt when the directory has none. When
/// it has some and none verifies, the error says so and why the newest failed.
result<std::optional<std::string>> checkpoint_to_restore(const checkpoint_manager& checkpoints) {
  auto found = checkpoints.find_latest();
  for (auto& why : found.skipped)
    std::cerr << "actorflow-train: skipping a damaged checkpoint: " << why.message() << '\n';
  if (!found.path && !found.skipped.empty())
    return make_error(errc::data_loss, "every checkpoint in '" + checkpoints.directory() +
                                         "' is damaged (" + std::to_string(found.skipped.size()) +
                                         "); the newest: " + found.skipped.front().message());
  return found.path;
}

/// A checkpoint restored into a session's variables: where from, and its step.
struct restored_checkpoint {
  std::string path;
  std::int64_t step = 0;
};

/// Restores the latest usable checkpoint of `checkpoints` (checkpoint_to_restore) into `s`;
/// nothing when the directory has none.
result<std::optional<restored_checkpoint>> restore_latest(saver& from, session& s,
                                                          const checkpoint_manager& checkpoints) {
  auto latest = checkpoint_to_restore(checkpoints);
  if (!latest)
    return latest.error();
  if (!*latest)
    return std::optional<restored_checkpoint>{};
  auto data = read_checkpoint(**latest);
  if (!data)
    return data.error();
  AF_RETURN_IF_ERROR(from.restore(s, *data, **latest));
  return std::optional<restored_checkpoint>{restored_checkpoint{**latest, data->step}};
}

/// --checkpoint-dir: where checkpoints go, written on a thread of their own (training waits for
/// the snapshot only). Empty without the flag, or for a process that writes none.
struct checkpoint_files {
  std::unique_ptr<checkpoint_manager> manager;
  std::unique_ptr<background_saver> writer;

  checkpoint_files(const train_options& o, saver& from, bool writes = true) {
    if (!writes || o.checkpoint_dir.empty())
      return;
    manager = std::make_unique<checkpoint_manager>(o.checkpoint_dir, o.keep_checkpoints);
    writer = std::make_unique<background_saver>(from, *manager);
  }
  explicit operator bool() const { return manager != nullptr; }
  /// Waits for the write in progress: its error, or ok (also without checkpoints).
  status written() { return writer ? writer->wait() : status{}; }

  /// restore_latest, once a write still running is done (it would race the search); a write
  /// that failed is said on standard error, and an older checkpoint restored.
  result<std::optional<restored_checkpoint>> restore_latest(saver& from, session& s) {
    if (auto written = writer->wait(); !written.ok())
      std::cerr << "actorflow-train: " << written.message() << '\n';
    return ::restore_latest(from, s, *manager);
  }

  /// --resume: the step of the latest checkpoint, restored into `s` and said on standard
  /// output; 0 without the flag. Errors when there is none.
  result<std::int64_t> resume(const train_options& o, saver& from, session& s) {
    if (!o.resume)
      return std::int64_t{0};
    auto restored = restore_latest(from, s);
    if (!restored)
      return restored.error().with_context("--resume");
    if (!*restored)
      return make_error(errc::not_found, "--resume: no checkpoint in '" + o.checkpoint_dir + "'");
    std::cout << "resumed from " << (*restored)->path << " at step " << (*restored)->step << '\n';
    return (*restored)->step;
  }
};

/// metrics.csv (and the event files) begun, or with --resume continued from `step`.
status begin_metrics(const train_options& o, std::int64_t step, train::metrics_log& metrics) {
  auto path = o.output_dir + "/metrics.csv";
  return o.resume ? metrics.resume(path, step) : metrics.open(path);
}

/// A run whose master is this process (local, in-process or on a cluster): the variables
/// initialised, or with --resume restored from the latest checkpoint; metrics.csv begun, or
/// continued up to that step (and so the curve). The step training starts at.
result<std::int64_t> begin_run(const train_options& o, graph& g, session& s, saver& from,
                               checkpoint_files& checkpoints, train::metrics_log& metrics) {
  AF_RETURN_IF_ERROR(from.status());
  AF_RETURN_IF_ERROR(s.run_targets({ops::global_variables_initializer(g)}));
  auto step = checkpoints.resume(o, from, s);
  if (!step)
    return step.error();
  AF_RETURN_IF_ERROR(begin_metrics(o, *step, metrics));
  return *step;
}

// --- linreg ---------------------------------------------------------------------------------

int run_linreg(const train_options& o, const training_target& where) {
  if (auto st = prepare_output_directories(o); !st.ok())
    return fail(st);
  graph g;
  auto opt = train::make_optimizer(o.optimizer, o.learning_rate);
  std::optional<scope_guard> on_cluster;
  if (where.layout) {
    // Weights and biases on the parameter servers, the model and its updates' inputs on the
    // first worker.
    replica_device_setter_options placement;
    placement.ps_tasks = where.layout->ps_tasks;
    placement.ps_device = "/job:" + where.layout->ps_job;
    placement.worker_device = "/job:" + where.layout->worker_job + "/task:0";
    auto setter = replica_device_setter(placement);
    if (!setter)
      return fail(setter.error());
    on_cluster.emplace(g.device(*setter));
  }
  auto m = train::build_linreg(g, *opt, o.seed);
  on_cluster.reset();
  auto& w = m.weights;
  auto& b = m.biases;
  auto& train = m.train;
  if (!g.status().ok())
    return fail(g.status());
  saver checkpoints_saver{g};
  session s{g, where.options};
  // --checkpoint-dir: a checkpoint every 100 steps and at the end; --resume goes on from the
  // latest (the data are fixed, so a resumed run ends as an uninterrupted one does).
  // --output-dir: metrics.csv and curve.svg, as for the classifiers (stdout keeps its lines).
  checkpoint_files checkpoints{o, checkpoints_saver};
  train::metrics_log metrics;
  auto begun = begin_run(o, g, s, checkpoints_saver, checkpoints, metrics);
  if (!begun)
    return fail(begun.error());
  auto first_step = *begun;
  std::vector<std::unique_ptr<train::training_hook>> hooks;
  hooks.push_back(train::make_finite_loss_hook());
  hooks.push_back(train::make_observer_hook([&](const train::step_report& r) {
    if (r.step == 1 || r.step % o.log_every == 0 || r.step == o.steps) {
      metrics.add_graph(g); // placed by now; written with the first row only
      metrics.add({r.step, 1, r.loss, -1, 0}); // a regression has no accuracy
    }
  }));
  if (checkpoints)
    hooks.push_back(train::make_checkpoint_hook([&](std::int64_t at) -> status {
      return at % 100 == 0 || at == o.steps ? checkpoints.writer->save(s, at) : status{};
    }, 1));
  train::trainer loop{std::move(hooks)};
  auto trained = loop.run(first_step, o.steps, [&](std::int64_t step) -> result<train::step_report> {
    auto loss = s.run({m.loss}, {}, {train});
    if (!loss)
      return loss.error();
    // "step W b" lines count from 0, every 20 steps and the last.
    auto shown = step - 1;
    if (shown % 20 == 0 || step == o.steps) {
      auto values = s.run({w.read, b.read});
      if (!values)
        return values.error();
      std::printf("%lld %.6f %.6f\n", static_cast<long long>(shown),
                  values->at(0).scalar_value<double>(), values->at(1).scalar_value<double>());
      std::fflush(stdout);
    }
    train::step_report report;
    report.step = step;
    report.loss = loss->at(0).scalar_value<double>();
    return report;
  });
  if (!trained.ok())
    return fail(trained);
  if (auto written = checkpoints.written(); !written.ok())
    return fail(written);
  if (auto st = train::write_curve_svg(o.output_dir + "/curve.svg", metrics.rows(),
                                       "actorflow: linear regression");
      !st.ok())
    return fail(st);
  if (auto st = write_graph_out(o, g, "actorflow: linear regression"); !st.ok())
    return fail(st);
  return 0;
}

/// "MLP", "CNN" or "RNN", for titles.
std::string model_title(const train_options& o) {
  return o.model == "cnn" ? "CNN" : o.model == "rnn" ? "RNN" : "MLP";
}

int run_mlp(const train_options& o, const training_target& where) {
  if (auto st = prepare_output_directories(o); !st.ok())
    return fail(st);
  auto data = load_data(o);
  if (!data)
    return fail(data.error());
  auto* train_set = &data->train;
  auto* test_set = &data->test;

  graph g;
  g.seed = static_cast<std::int64_t>(o.seed);
  auto opt = train::make_optimizer(o.optimizer, o.learning_rate);
  auto kind = train::classifier_named(o.model);
  if (!kind)
    return fail(kind.error());
  auto built = build_model(g, *opt, where, *kind);
  if (!built)
    return fail(built.error());
  auto& m = *built;
  saver checkpoints_saver{g};
  if (!g.status().ok())
    return fail(g.status());
  session s{g, where.options};
  checkpoint_files checkpoints{o, checkpoints_saver};
  train::metrics_log metrics;
  auto begun = begin_run(o, g, s, checkpoints_saver, checkpoints, metrics);
  if (!begun)
    return fail(begun.error());
  auto step = *begun;
  batch_options shuffled;
  shuffled.batch_size = o.batch_size;
  shuffled.seed = o.seed;
  shuffled.drop_last = true;
  auto batches = batch_iterator::create(*train_set, shuffled);
  if (!batches)
    return fail(batches.error());
  auto steps_per_epoch = batches->batches_per_epoch();
  // The batch order is a function of the seed: replaying it puts a resumed run exactly where
  // the interrupted one stopped.
  batches->seek(step);
  progress_printer progress{o.log_every};
  progress.line("training on " + where.description);
  auto total_steps = steps_per_epoch * o.epochs;
  train::throughput_meter throughput;
  std::vector<std::unique_ptr<train::training_hook>> hooks;
  hooks.push_back(train::make_finite_loss_hook());
  hooks.push_back(progress_hook(o, total_steps, throughput, progress, &metrics, g));
  if (checkpoints)
    hooks.push_back(train::make_checkpoint_hook([&](std::int64_t at) { return checkpoints.writer->save(s, at); },
                                                steps_per_epoch));
  train::trainer loop{std::move(hooks)};
  auto trained = loop.run(step, total_steps, [&](std::int64_t next) -> result<train::step_report> {
    auto& batch = batches->next();
    auto started = clock_type::now();
    auto r = s.run({m.loss, m.correct}, tower_feeds(m, batch.images, batch.one_hot), {m.train});
    if (!r)
      return r.error();
    return mlp_report(next, steps_per_epoch, *r, batch, started);
  });
  if (!trained.ok())
    return fail(trained);
  if (auto written = checkpoints.written(); !written.ok())
    return fail(written);
  auto accuracy = evaluate(s, m, *test_set);
  if (!accuracy)
    return fail(accuracy.error());
  if (auto st = report_results(o, g, metrics, "actorflow: " + model_title(o) + " on Fashion-MNIST (" + o.optimizer + ")",
                               throughput, *accuracy, progress);
      !st.ok())
    return fail(st);
  return 0;
}

// --- between-graph ---------------------------------------------------------------------------

/// This worker's share of the training set: rows [task * n / workers, (task + 1) * n /
/// workers), disjoint across workers and the same in every run.
result<dataset> shard_of(const dataset& all, int task, int workers) {
  auto n = all.size();
  auto begin = n * task / workers;
  auto end = n * (task + 1) / workers;
  auto images = all.images.sliced(0, begin, end - begin);
  if (!images)
    return images.error();
  auto labels = all.labels.sliced(0, begin, end - begin);
  if (!labels)
    return labels.error();
  return dataset{std::move(*images), std::move(*labels)};
}

/// The values of `reads` once every one can be read (the chief initialised or restored them, a
/// ps came back), waited for up to --init-timeout; the error then names what is still
/// uninitialised or unreachable. With `uninitialised_ends`, a variable read as uninitialised
/// ends the wait at once, with no values (a ps that came back empty).
result<std::optional<std::vector<tensor>>> read_variables(session& s, const std::vector<output>& reads,
                                                          int timeout_seconds,
                                                          bool uninitialised_ends) {
  std::optional<std::vector<tensor>> values;
  train::readiness_wait wait;
  wait.check = [&]() -> status {
    auto read = s.run(reads);
    if (read)
      values = std::move(*read);
    else if (uninitialised_ends && read.error().code() == errc::failed_precondition)
      return {};
    return read.error();
  };
  wait.timeout = std::chrono::seconds(timeout_seconds);
  wait.waiting = [timeout_seconds](const status& why) {
    std::fprintf(stderr, "actorflow-train: waiting up to %d s (--init-timeout) until the "
                         "variables can be read: %s\n", timeout_seconds, why.message().c_str());
  };
  auto waited = train::wait_until_ready(wait);
  if (!waited)
    return waited.error();
  return values;
}

/// Waits until every variable in `reads` can be read (read_variables).
status wait_for_variables(session& s, const std::vector<output>& reads, int timeout_seconds) {
  auto read = read_variables(s, reads, timeout_seconds, false);
  return read ? status{} : read.error();
}

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
                                                  bool with_gradients) {
  shared_classifier out;
  g.seed = static_cast<std::int64_t>(o.seed);
  out.opt = train::make_optimizer(o.optimizer, o.learning_rate);
  replica_device_setter_options placement;
  placement.ps_tasks = cluster.num_tasks(o.ps_job);
  placement.ps_device = "/job:" + o.ps_job;
  placement.worker_device = worker_device;
  out.ps_tasks = placement.ps_tasks;
  auto setter = replica_device_setter(placement);
  if (!setter)
    return setter.error();
  auto kind = train::classifier_named(o.model);
  if (!kind)
    return kind.error();
  {
    auto on_cluster = g.device(*setter);
    out.m = train::build_classifier(g, *out.opt, *kind);
    if (with_gradients)
      out.gradients = out.opt->compute_gradients(out.m.loss, out.m.weights);
    out.global_step = ops::variable(g, ops::constant(g, std::int64_t{0}, "global_step/zero"), "global_step");
    auto count = ops::assign_add(out.global_step, ops::constant(g, std::int64_t{1}, "one_step"));
    out.train = ops::group(g, {out.m.train, count}, "train_and_count");
  }
  AF_RETURN_IF_ERROR(g.status());
  return out;
}

/// Whether `failure` is a lost ps task (which training outlives): a failure a lost connection or
/// a timeout causes, naming a ps task, or with a ps task that does not answer a probe now (a
/// shard push's failure names none). When it is, says so and what training waits for.
bool lost_ps_task(const train_options& o, const cluster_spec& cluster, const status& failure) {
  if (!connection_like(failure))
    return false;
  bool lost = failure.message().find("/job:" + o.ps_job + "/") != std::string::npos ||
              !probe_job(default_actor_system(), cluster, o.ps_job, 2).ok();
  if (lost)
    std::cerr << "actorflow-train: lost a " << o.ps_job << " task (" << failure.message()
              << "); waiting up to " << o.init_timeout_seconds
              << " s (--init-timeout) for it to come back\n";
  return lost;
}

/// After a failure judged a lost ps, once the ps tasks answer: the global step when they still
/// hold every variable of `g` (`global_step` included), which `progress` then says; nullopt
/// when one came back empty (a restarted ps). A ps that was only frozen or cut off keeps what
/// it had: restoring a checkpoint or initialising again would throw that training away. A ps
/// that does not answer is waited for (read_variables), never taken for empty.
result<std::optional<std::int64_t>> variables_kept(session& s, const graph& g,
                                                   const actorflow::variable& global_step,
                                                   const train_options& o,
                                                   progress_printer& progress) {
  std::vector<output> reads{global_step.read};
  for (auto& v : g.global_variables())
    reads.push_back(v.read);
  auto held = read_variables(s, reads, o.init_timeout_seconds, true);
  if (!held)
    return held.error();
  if (!*held)
    return std::optional<std::int64_t>{};
  auto step = (*held)->at(0).scalar_value<std::int64_t>();
  progress.line("the " + o.ps_job + " tasks still hold every variable: training goes on from "
                "global step " + std::to_string(step));
  return std::optional<std::int64_t>{step};
}

/// Between-graph replication, asynchronous: this process is one worker with a graph of its own.
int run_between_graph(const train_options& o, const cluster_spec& cluster, const std::string& job,
                      int task) {
  for (auto& [flag, name] : {std::pair{"--ps-job", o.ps_job}, std::pair{"--job", job}})
    if (!cluster.has_job(name))
      return usage_error(make_error(errc::invalid_argument, std::string{"the cluster has no job '"} +
                                                              name + "' (" + flag + ")"));
  auto workers = cluster.num_tasks(job);
  if (task >= workers)
    return usage_error(make_error(errc::invalid_argument, "job '" + job + "' has " +
                                                            std::to_string(workers) +
                                                            " tasks, not task " + std::to_string(task)));
  bool chief = task == 0;
  auto me = "/job:" + job + "/task:" + std::to_string(task);
  if (chief)
    if (auto st = prepare_output_directories(o); !st.ok())
      return fail(st);
  auto data = load_data(o);
  if (!data)
    return fail(data.error());
  auto* train_set = &data->train;
  auto* test_set = &data->test;
  // --data-order global (the default): the whole set, in the order every worker shares
  // (batch_options's replicas), so that sync rounds see one process's batches; shard: this
  // worker's contiguous share, in an order of its own.
  const bool global_order = o.data_order == "global";
  auto mine = global_order ? result<dataset>{*train_set} : shard_of(*train_set, task, workers);
  if (!mine)
    return fail(mine.error());

  auto replicas = o.replicas_to_aggregate > 0 ? o.replicas_to_aggregate : workers;
  if (o.sync && o.total_replicas > 0 && o.total_replicas != workers)
    return usage_error(make_error(errc::invalid_argument,
                                  "--total-replicas " + std::to_string(o.total_replicas) +
                                    " but job '" + job + "' has " + std::to_string(workers) +
                                    " tasks"));
  if (o.sync && replicas > workers)
    return usage_error(make_error(errc::invalid_argument,
                                  "--replicas-to-aggregate " + std::to_string(replicas) +
                                    " is more than the " + std::to_string(workers) + " workers"));
  graph g;
  auto model = build_shared_classifier(g, o, cluster, me, o.sync);
  if (!model)
    return fail(model.error());
  auto& m = model->m;
  auto& global_step = model->global_step;
  auto& train_op = model->train;
  auto& gradients = model->gradients;
  // Sync rounds do not run train_op: the chief writes the round into the global step before
  // each checkpoint, so that a restored ps (and every worker reading it) resumes at that round.
  output round_value, set_global_step;
  if (o.sync) {
    round_value = ops::placeholder(g, dtype::int64, tensor_shape{}, "global_step/round");
    set_global_step = ops::assign(global_step, round_value, "global_step/set");
  }
  std::vector<output> all_variables{global_step.read};
  for (auto& w : m.weights)
    all_variables.push_back(w.read);
  saver checkpoints_saver{g};
  if (!g.status().ok())
    return fail(g.status());

  // This worker is a task of the cluster too (TensorFlow's tf.train.Server beside the client):
  // its devices run the model, its master places the graph over them and the ps tasks only,
  // never waiting for the other workers, which may have finished already.
  server_options serving;
  serving.system = &default_actor_system();
  serving.threads = o.threads;
  serving.device_filters = {"/job:" + o.ps_job, me};
  serving.bind_host = o.bind;
  serving.connect_timeout_seconds = o.connect_timeout_seconds;
  auto served = server::start(std::make_shared<const cluster_spec>(cluster), job, task, serving);
  if (!served)
    return fail(served.error());
  session_options options;
  options.master = existing_master((*served)->master());
  options.timeout_seconds = o.step_timeout_seconds;
  options.inter_op_parallelism_threads = o.threads;
  options.intra_op_parallelism_threads = o.threads;
  options.log_device_placement = o.log_device_placement;
  progress_printer progress{o.log_every};
  // The chief alone writes checkpoints.
  checkpoint_files checkpoints{o, checkpoints_saver, chief};
  int exit_code = 0;
  {
    session s{g, options};
    // At the start, and again after a lost ps came back empty: the chief waits for the ps
    // tasks, then restores the latest checkpoint or initialises the variables; the others wait
    // until they can read them. The ps tasks then watch this worker: if every worker goes away
    // without finishing, they stop after their grace period instead of waiting forever.
    auto report_joined = [&] {
      if (auto joined = report_task_joined(default_actor_system(), cluster, o.ps_job, job, task,
                                           (*served)->task(), 10);
          !joined.ok())
        std::cerr << "actorflow-train: " << joined.message() << '\n';
    };
    auto make_variables_ready = [&](bool after_loss) -> status {
      if (!chief) {
        AF_RETURN_IF_ERROR(wait_for_variables(s, all_variables, o.init_timeout_seconds));
      } else {
        if (after_loss) {
          // Waits for the ps itself (up to --init-timeout).
          auto kept = variables_kept(s, g, global_step, o, progress);
          if (!kept)
            return kept.error();
          if (*kept) {
            report_joined();
            return {};
          }
        } else {
          AF_RETURN_IF_ERROR(wait_for_variables(s, {}, o.init_timeout_seconds));
        }
        std::optional<restored_checkpoint> restored;
        if (checkpoints) {
          auto found = checkpoints.restore_latest(checkpoints_saver, s);
          if (!found)
            return found.error();
          restored = *found;
        }
        if (restored) {
          progress.line("restored " + restored->path + ": training " +
                        (after_loss ? "returns to" : "goes on from") + " global step " +
                        std::to_string(restored->step) +
                        (after_loss ? "; the updates since are lost" : ""));
        } else {
          AF_RETURN_IF_ERROR(s.run_targets({ops::global_variables_initializer(g)}));
          if (after_loss)
            progress.line("no checkpoint to restore (--checkpoint-dir): the variables start "
                          "again from their initial values");
        }
      }
      report_joined();
      return {};
    };
    if (auto ready = make_variables_ready(false); !ready.ok())
      return fail(ready);
    train::metrics_log metrics;
    if (chief)
      if (auto st = metrics.open(o.output_dir + "/metrics.csv"); !st.ok())
        return fail(st);
    batch_options shuffled;
    shuffled.batch_size = o.batch_size;
    shuffled.seed = global_order ? o.seed : o.seed + static_cast<std::uint64_t>(task);
    shuffled.drop_last = true;
    if (global_order) {
      shuffled.replicas = workers;
      shuffled.replica = task;
    }
    auto batches = batch_iterator::create(*mine, shuffled);
    if (!batches)
      return fail(batches.error());
    auto steps_per_epoch = batches->batches_per_epoch();
    // Synchronous rounds: every worker takes part in the same number of rounds, that of the
    // smallest shard (a round would otherwise wait for a worker that has finished).
    if (o.sync && !global_order)
      steps_per_epoch = (train_set->size() / workers) / o.batch_size;
    auto total_steps = steps_per_epoch * o.epochs;
    std::map<std::string, shard_location> shards;
    shard_pusher pusher;
    // The global step the gradients of the next round are computed at (sync), and the rounds
    // that closed short of gradients (a worker lost), as the shards count them.
    std::int64_t round = 0;
    std::int64_t short_rounds = 0;
    std::int64_t stale_dropped = 0;
    // How many gradients the rounds this worker took part in averaged, fewest and most.
    std::int32_t fewest_gradients = std::numeric_limits<std::int32_t>::max();
    std::int32_t most_gradients = 0;
    // Sync: the shards of every variable, and the round to go on from, the global step's (0,
    // or the round a restored checkpoint holds). At the start, and after a lost ps came back.
    auto resume_rounds = [&]() -> status {
      auto found = find_shards(default_actor_system(), cluster, o.ps_job, 10);
      if (!found)
        return found.error();
      shards = std::move(*found);
      for (auto& [gradient, variable] : gradients)
        if (shards.count(variable.name()) == 0)
          return make_error(errc::not_found, "no ps task holds a shard of '" + variable.name() + "'");
      auto at = s.run({global_step.read});
      if (!at)
        return at.error();
      round = at->at(0).scalar_value<std::int64_t>();
      return {};
    };
    // Sync: the batch of round r is this worker's r-th (its share of global batch r), whatever
    // happened before: a run that goes on from round R (a checkpoint restored at the start or
    // after a lost ps) takes the batches an uninterrupted run takes from there, and a backup
    // worker whose gradient came late skips the rounds it missed.
    auto batch_of_round = [&]() -> const batch& {
      batches->seek(round);
      return batches->next();
    };
    if (o.sync)
      if (auto st = resume_rounds(); !st.ok())
        return fail(st);
    // This process's life: once it has a successor (restarted with the same --task), its
    // gradients no longer count, even if it resumes after being frozen.
    const std::uint64_t life = new_incarnation();
    progress.line("worker " + me + (chief ? " (chief)" : "") + ": training on " +
                  (global_order ? "its share (1 in " + std::to_string(workers) +
                                    ") of one shared order of " + std::to_string(mine->size())
                                : "its " + std::to_string(mine->size()) + " examples") +
                  " with the variables on the " +
                  std::to_string(model->ps_tasks) + " " + o.ps_job + " task(s)");
    train::throughput_meter throughput;
    std::vector<std::unique_ptr<train::training_hook>> hooks;
    hooks.push_back(train::make_finite_loss_hook());
    // The chief alone writes metrics.
    hooks.push_back(progress_hook(o, total_steps, throughput, progress, chief ? &metrics : nullptr, g));
    if (checkpoints)
      hooks.push_back(train::make_checkpoint_hook(
        [&](std::int64_t at) -> status {
          if (o.sync)
            AF_RETURN_IF_ERROR(s.run_targets({set_global_step},
                                             {{round_value, tensor::scalar(std::int64_t{at})}}));
          return checkpoints.writer->save(s, at);
        },
        steps_per_epoch));
    train::trainer loop{std::move(hooks)};
    /// One synchronous round: the gradients at `round`, pushed to every shard; answered once
    /// the round was applied everywhere (or at once where they came too late).
    auto sync_step = [&](const batch& b,
                         clock_type::time_point started) -> result<train::step_report> {
      std::vector<output> fetches{m.loss, m.correct};
      for (auto& [gradient, variable] : gradients)
        fetches.push_back(gradient);
      auto r = s.run(fetches, {{m.images, b.images}, {m.labels, b.one_hot}});
      if (!r)
        return r.error();
      // This batch's loss and accuracy go with its gradients (the round averages them).
      auto own = mlp_report(round + 1, steps_per_epoch, *r, b, started);
      // Every gradient goes out before any answer is awaited: a round closes only once every
      // worker's gradient for it arrived. Large ones travel over the bulk channel.
      std::vector<std::optional<protocol::bulk_tensor>> tickets;
      for (std::size_t i = 0; i < gradients.size(); ++i) {
        auto& variable = gradients[i].second.name();
        tickets.push_back(pusher.ship(shards.at(variable), variable, r->at(i + 2)));
      }
      AF_RETURN_IF_ERROR(pusher.flush());
      caf::scoped_actor self{default_actor_system()};
      // A shard whose ps dies would never answer: its down message ends the wait at once.
      for (auto& [variable, where] : shards)
        self->monitor(where.shard);
      for (std::size_t i = 0; i < gradients.size(); ++i) {
        auto& shard = shards.at(gradients[i].second.name()).shard;
        auto offer = protocol::make_sync_gradient(
          round, task, tensor{}, o.learning_rate, replicas,
          std::int64_t{o.round_timeout_seconds} * 1000, life, own.loss, own.batch_accuracy);
        if (tickets[i]) {
          self->send(shard, protocol::accumulate_atom::value, std::move(offer), *tickets[i]);
        } else {
          offer.gradient = r->at(i + 2);
          self->send(shard, protocol::accumulate_atom::value, std::move(offer));
        }
      }
      auto bound = std::chrono::seconds(std::max(60, o.init_timeout_seconds));
      std::int64_t reached = round;
      std::optional<protocol::sync_outcome> applied;
      status failure;
      for (std::size_t answered = 0; answered < gradients.size() && failure.ok(); ++answered)
        self->receive(
          [&](protocol::sync_outcome& outcome) {
            if (outcome.applied && !applied)
              applied = outcome;
            reached = std::max(reached, outcome.global_step);
            short_rounds = std::max(short_rounds, outcome.short_rounds);
            stale_dropped = std::max(stale_dropped, outcome.stale_dropped);
          },
          [&](caf::error& err) {
            failure = status_from_error(err).with_context("pushing a gradient to its shard");
          },
          [&](caf::down_msg& down) {
            failure = make_error(errc::unavailable,
                                 "a shard on a " + o.ps_job + " task went down (" +
                                   default_actor_system().render(down.reason) +
                                   ") during a synchronous round");
          },
          caf::after(bound) >> [&] {
            failure = make_error(errc::deadline_exceeded,
                                 "a synchronous round did not complete within " +
                                   std::to_string(bound.count()) + " s");
          });
      for (auto& [variable, where] : shards)
        self->demonitor(where.shard.address());
      AF_RETURN_IF_ERROR(failure);
      round = reached;
      // The step is the shared global step (the rounds applied so far); its loss and accuracy
      // are the round's, over every batch in it, when this worker's gradient was part of it.
      auto report = mlp_report(round, steps_per_epoch, *r, b, started);
      if (applied) {
        fewest_gradients = std::min(fewest_gradients, applied->round_gradients);
        most_gradients = std::max(most_gradients, applied->round_gradients);
        report.loss = applied->round_loss;
        report.batch_accuracy = applied->round_accuracy;
      }
      return report;
    };
    // Training outlives a lost ps task: every worker waits for it to come back (at its
    // address, restarted by a supervisor or by hand); the chief then restores the latest
    // checkpoint into it, saying which global step training returns to, and the others wait
    // for that. Sync rounds then go on from the restored global step, on the new shards.
    auto recover = [&]() -> status {
      s.reopen();
      AF_RETURN_IF_ERROR(make_variables_ready(true));
      if (o.sync) {
        AF_RETURN_IF_ERROR(resume_rounds());
        progress.line("synchronous rounds go on from round " + std::to_string(round));
      }
      return {};
    };
    auto trained = loop.run(0, o.sync ? std::numeric_limits<std::int64_t>::max() : total_steps,
                            [&](std::int64_t next) -> result<train::step_report> {
      auto started = clock_type::now();
      if (o.sync) {
        auto report = sync_step(batch_of_round(), started);
        if (!report && lost_ps_task(o, cluster, report.error())) {
          AF_RETURN_IF_ERROR(recover());
          report = sync_step(batch_of_round(), started);
        }
        if (!report)
          return report.error();
        report->last = round >= total_steps;
        report->stale_gradients_dropped = stale_dropped;
        return report;
      }
      auto& batch = batches->next();
      // A worker lost in the middle of a step leaves no variable half updated: the step's
      // gradients apply on every ps or on none.
      auto async_step = [&] {
        run_options whole;
        whole.all_or_nothing = true;
        return s.run_with(whole, {m.loss, m.correct},
                          {{m.images, batch.images}, {m.labels, batch.one_hot}}, {train_op});
      };
      auto r = async_step();
      if (!r && lost_ps_task(o, cluster, r.error())) {
        AF_RETURN_IF_ERROR(recover());
        r = async_step();
      }
      if (!r)
        return r.error();
      return mlp_report(next, steps_per_epoch, *r, batch, started);
    });
    if (!trained.ok()) {
      exit_code = fail(trained);
    } else {
      if (chief) {
        if (auto written = checkpoints.written(); !written.ok())
          return fail(written);
        // Sync: the rounds; async: every worker's steps, counted in the shared variable.
        std::int64_t global = round;
        if (!o.sync)
          if (auto counted = s.run({global_step.read}))
            global = counted->at(0).scalar_value<std::int64_t>();
        progress.line("global step: " + std::to_string(global));
        if (o.sync) {
          progress.line("short rounds: " + std::to_string(short_rounds) +
                        " (closed after --round-timeout without every worker's gradient)");
          if (most_gradients > 0)
            progress.line("gradients per round: " +
                          (fewest_gradients == most_gradients
                             ? std::to_string(most_gradients)
                             : std::to_string(fewest_gradients) + " to " + std::to_string(most_gradients)) +
                          " (each round this worker took part in averaged that many)");
        }
        train::data_parallel_mlp single;
        single.towers.push_back({m.images, m.labels, m.loss, m.correct});
        auto accuracy = evaluate(s, single, *test_set);
        if (!accuracy)
          return fail(accuracy.error());
        if (auto st = report_results(o, g, metrics,
                                     "actorflow: " + model_title(o) + " between-graph (" + o.optimizer + ")",
                                     throughput, *accuracy, progress);
            !st.ok())
          return fail(st);
      } else {
        char line[64];
        std::snprintf(line, sizeof line, "examples/s: %.0f", throughput.overall());
        progress.line(line);
      }
    }
  }
  // After the session closed: once every worker has said so, the ps tasks stop by themselves.
  if (auto told = report_task_done(default_actor_system(), cluster, o.ps_job, job, task, 10);
      !told.ok())
    std::cerr << "actorflow-train: " << told.message() << '\n';
  return exit_code;
}


// --- coordinated -----------------------------------------------------------------------------

/// What one coordinated closure gives back: the batch's loss and right answers, and its size.
struct closure_step {
  std::vector<tensor> loss_and_correct;
  std::int64_t examples = 0;
};

/// TF2's ParameterServerStrategy with a ClusterCoordinator: this process builds the model once
/// (variables on the ps tasks, the rest unpinned) and schedules one closure per batch; each
/// runs on whichever worker task is free, on that worker's shard of the training set. A worker
/// lost mid-closure costs that closure only: it runs again on another worker, and its update
/// counts once, so the global step ends at exactly the number of closures.
int run_coordinated(const train_options& o, const cluster_spec& cluster) {
  for (auto& [flag, name] : {std::pair{"--ps-job", o.ps_job}, std::pair{"--worker-job", o.worker_job}})
    if (!cluster.has_job(name))
      return usage_error(make_error(errc::invalid_argument, std::string{"the cluster has no job '"} +
                                                              name + "' (" + flag + ")"));
  if (auto st = prepare_output_directories(o); !st.ok())
    return fail(st);
  auto data = load_data(o);
  if (!data)
    return fail(data.error());

  graph g;
  // Nodes that are not the ps's name no task: they run on each closure's worker.
  auto model = build_shared_classifier(g, o, cluster, "", false);
  if (!model)
    return fail(model.error());
  auto& m = model->m;
  auto& global_step = model->global_step;
  auto& train_op = model->train;

  saver checkpoints_saver{g};
  if (!checkpoints_saver.status().ok())
    return fail(checkpoints_saver.status());

  // The variables are initialised, saved and restored from here, through the ps tasks alone.
  auto spec = std::make_shared<const cluster_spec>(cluster);
  session_options on_ps;
  on_ps.cluster = spec;
  on_ps.timeout_seconds = o.step_timeout_seconds;
  on_ps.device_filters = {"/job:" + o.ps_job};
  on_ps.default_task = "/job:" + o.ps_job + "/task:0";
  session ps_session{g, on_ps};
  checkpoint_files checkpoints{o, checkpoints_saver};
  progress_printer progress{o.log_every};
  // At the start (--resume restores), and after a lost ps came back empty (restores when there
  // are checkpoints): the global step training goes on from.
  auto make_variables_ready = [&](bool after_loss) -> result<std::int64_t> {
    if (after_loss) {
      // Waits for the ps itself (up to --init-timeout).
      auto kept = variables_kept(ps_session, g, global_step, o, progress);
      if (!kept)
        return kept.error();
      if (*kept)
        return **kept;
    } else {
      AF_RETURN_IF_ERROR(wait_for_variables(ps_session, {}, o.init_timeout_seconds));
    }
    if ((after_loss || o.resume) && checkpoints) {
      auto found = checkpoints.restore_latest(checkpoints_saver, ps_session);
      if (!found)
        return found.error();
      if (*found) {
        progress.line("restored " + (*found)->path + ": training " +
                      (after_loss ? "returns to" : "goes on from") + " global step " +
                      std::to_string((*found)->step));
        return (*found)->step;
      }
    }
    AF_RETURN_IF_ERROR(ps_session.run_targets({ops::global_variables_initializer(g)}));
    if (after_loss || o.resume)
      progress.line("no checkpoint to restore (--checkpoint-dir): the variables start again "
                    "from their initial values");
    return std::int64_t{0};
  };
  auto ready = make_variables_ready(false);
  if (!ready)
    return fail(ready.error());

  coordinator_options coordinating;
  coordinating.worker_job = o.worker_job;
  coordinating.session.timeout_seconds = o.step_timeout_seconds;
  coordinating.session.inter_op_parallelism_threads = o.threads;
  coordinating.session.intra_op_parallelism_threads = o.threads;
  coordinating.session.log_device_placement = o.log_device_placement;
  cluster_coordinator coordinator{cluster, coordinating};
  auto workers = coordinator.num_workers();
  // --data-order global (the default): closure s trains on batch s of one shuffled order of
  // the whole set, taken when it is scheduled, whichever worker runs it (and a closure run
  // again runs on the same batch), so a run's data do not depend on which worker was free;
  // after a restore to step S the batches from S are taken again. shard: each worker its own
  // share of the training set, shuffled by a seed of its own.
  const bool global_order = o.data_order == "global";
  std::vector<dataset> shards;
  for (int i = 0; i < workers && !global_order; ++i) {
    auto mine = shard_of(data->train, i, workers);
    if (!mine)
      return fail(mine.error());
    shards.push_back(std::move(*mine));
  }
  status bad_shard;
  auto batches = coordinator.create_per_worker([&](int i) -> std::unique_ptr<batch_iterator> {
    if (global_order)
      return nullptr;
    batch_options shuffled;
    shuffled.batch_size = o.batch_size;
    shuffled.seed = o.seed + static_cast<std::uint64_t>(i);
    shuffled.drop_last = true;
    auto made = batch_iterator::create(shards[static_cast<std::size_t>(i)], shuffled);
    if (!made) {
      bad_shard = made.error();
      return nullptr;
    }
    return std::make_unique<batch_iterator>(std::move(*made));
  });
  if (!bad_shard.ok())
    return fail(bad_shard);

  train::metrics_log metrics;
  if (auto st = begin_metrics(o, *ready, metrics); !st.ok())
    return fail(st);
  progress.line("coordinating " + std::to_string(workers) + " " + o.worker_job +
                " task(s), the variables on " + std::to_string(model->ps_tasks) + " " +
                o.ps_job + " task(s)");
  auto steps_per_epoch = static_cast<std::int64_t>(data->train.size()) / o.batch_size;
  auto total_steps = steps_per_epoch * o.epochs;
  auto train_on = [&](worker_context& w, const batch& b) -> result<closure_step> {
    auto r = w.run(g, {m.loss, m.correct}, {{m.images, b.images}, {m.labels, b.one_hot}}, {train_op});
    if (!r)
      return r.error();
    return closure_step{std::move(*r), b.size};
  };
  batch_options in_one_order;
  in_one_order.batch_size = o.batch_size;
  in_one_order.seed = o.seed;
  in_one_order.drop_last = true;
  auto ordered = batch_iterator::create(data->train, in_one_order);
  if (!ordered)
    return fail(ordered.error());
  auto batch_of_step = [&](std::int64_t step) {
    ordered->seek(step);
    return std::make_shared<const batch>(ordered->next());
  };
  train::throughput_meter throughput;
  auto hook = progress_hook(o, total_steps, throughput, progress, &metrics, g);
  auto finite = train::make_finite_loss_hook();
  auto schedule_step = [&](std::int64_t step) {
    if (!global_order)
      return coordinator.schedule(
        [&](worker_context& w) { return train_on(w, batches.on(w)->next()); });
    return coordinator.schedule(
      [&train_on, b = batch_of_step(step)](worker_context& w) { return train_on(w, *b); });
  };
  // Checkpoints are taken where a --log-every chunk from the start (or restore) crosses an
  // epoch, once every closure before it has finished and none after it has started: the global
  // step it holds counts exactly the closures whose updates it holds. `from`'s next one, or the
  // end of training (false: none there).
  auto next_checkpoint = [&](std::int64_t from) -> std::pair<std::int64_t, bool> {
    for (auto at = from; checkpoints && at < total_steps;) {
      auto next = std::min<std::int64_t>(at + o.log_every, total_steps);
      if (next / steps_per_epoch > at / steps_per_epoch)
        return {next, true};
      at = next;
    }
    return {total_steps, false};
  };
  // Closures in flight at most: every worker always finds one queued, and the batches they
  // hold stay bounded. A new one is scheduled as soon as any finishes, not after a whole chunk:
  // a closure held up (its worker frozen, until the step bound gives it up and it runs again
  // elsewhere) holds up only itself while the other workers' closures keep counting.
  const auto window = static_cast<std::size_t>(std::max<std::int64_t>(o.log_every, 2 * workers));
  // A lost ps: the closures that failed with it are given up; once it is back (restarted by
  // a supervisor or by hand), the latest checkpoint is restored into it and training goes on
  // from the global step it holds, losing the updates since.
  for (std::int64_t done = *ready; done < total_steps;) {
    auto [until, save_there] = next_checkpoint(done);
    std::deque<remote_value<closure_step>> in_flight;
    auto scheduled = done;
    auto since = clock_type::now();
    status failed;
    while (failed.ok() && done < until) {
      while (scheduled < until && in_flight.size() < window)
        in_flight.push_back(schedule_step(scheduled++));
      failed = coordinator.wait_until_open_at_most(in_flight.size() - 1);
      std::vector<closure_step> finished;
      for (auto v = in_flight.begin(); failed.ok() && v != in_flight.end();) {
        if (!v->ready()) {
          ++v;
          continue;
        }
        if (auto step = v->fetch())
          finished.push_back(std::move(*step));
        else
          failed = step.error();
        v = in_flight.erase(v);
      }
      if (!failed.ok())
        break;
      if (finished.empty())
        continue;
      auto now = clock_type::now();
      // The closures that finished since the last report ran side by side: each gets its share.
      auto seconds = std::chrono::duration<double>(now - since).count() /
                     static_cast<double>(finished.size());
      since = now;
      for (auto& step : finished) {
        train::step_report report;
        report.step = ++done;
        report.epoch = static_cast<int>((report.step - 1) / steps_per_epoch) + 1;
        report.loss = step.loss_and_correct.at(0).scalar_value<double>();
        report.batch_accuracy = step.loss_and_correct.at(1).scalar_value<double>() /
                                static_cast<double>(step.examples);
        report.examples = step.examples;
        report.seconds = seconds;
        if (auto st = finite->after_step(report); !st.ok())
          return fail(st);
        if (auto st = hook->after_step(report); !st.ok())
          return fail(st);
      }
    }
    if (!failed.ok()) {
      // Every closure in flight ends first (join), then the ps is taken back.
      auto joined = coordinator.join();
      if (joined.ok())
        joined = failed;
      if (!lost_ps_task(o, cluster, joined))
        return fail(joined);
      ps_session.reopen();
      auto back = make_variables_ready(true);
      if (!back)
        return fail(back.error());
      done = *back;
      continue;
    }
    if (save_there)
      if (auto st = checkpoints.writer->save(ps_session, done); !st.ok())
        return fail(st);
  }
  if (auto written = checkpoints.written(); !written.ok())
    return fail(written);
  auto stats = coordinator.stats();
  auto counted = ps_session.run({global_step.read});
  if (!counted)
    return fail(counted.error());
  auto global = counted->at(0).scalar_value<std::int64_t>();
  progress.line("global step: " + std::to_string(global) + " of " + std::to_string(total_steps) +
                " (" + std::to_string(stats.succeeded) + " closures done, " +
                std::to_string(stats.rescheduled) + " run again after " +
                std::to_string(stats.workers_lost) + " worker loss(es), " +
                std::to_string(stats.failed) + " given up)");
  // One increment per closure that succeeded since the last start or restore: anything else
  // is an update lost or counted twice.
  if (global != total_steps)
    return fail(make_error(errc::internal, "the global step is " + std::to_string(global) +
                                             ", not " + std::to_string(total_steps) +
                                             ": an update was lost or counted twice"));
  // Test accuracy, in closures of 1000 examples on whichever workers are free.
  batch_options in_order;
  in_order.batch_size = 1000;
  in_order.shuffle = false;
  auto test_batches = batch_iterator::create(data->test, in_order);
  if (!test_batches)
    return fail(test_batches.error());
  std::vector<remote_value<double>> corrects;
  for (std::int64_t i = 0; i < test_batches->batches_per_epoch(); ++i) {
    auto b = std::make_shared<batch>(test_batches->next());
    corrects.push_back(coordinator.schedule([&, b](worker_context& w) -> result<double> {
      auto r = w.run(g, {m.correct}, {{m.images, b->images}, {m.labels, b->one_hot}});
      if (!r)
        return r.error();
      return r->at(0).scalar_value<double>();
    }));
  }
  if (auto joined = coordinator.join(); !joined.ok())
    return fail(joined);
  double correct = 0;
  for (auto& c : corrects)
    correct += *c.fetch();
  auto accuracy = correct / static_cast<double>(data->test.size());
  if (auto st = report_results(o, g, metrics, "actorflow: " + model_title(o) + " coordinated (" + o.optimizer + ")",
                               throughput, accuracy, progress);
      !st.ok())
    return fail(st);
  return 0;
}
} // namespace

int run(int argc, char** argv) {
  auto parsed = train::parse_train_options(argc, argv);
  if (!parsed) {
    std::cerr << "actorflow-train: " << parsed.error().message() << '\n';
    return 2;
  }
  auto& o = *parsed;
  if (o.help) {
    std::cout << train::train_usage() << apps::security_flags_help;
    return 0;
  }
  if (auto s = apps::apply_security_flags(o.security); !s.ok())
    return usage_error(s);
  if (o.threads > 0)
    set_default_scheduler_threads(o.threads);
  // --metrics-port, once it is known where this process listens: where its task does (the host
  // of its spec address, or --bind), on loopback when it is no task of a cluster. With a cluster
  // known, the endpoint also says whether each of its tasks answers. An exit code on failure.
  std::unique_ptr<apps::metrics_endpoint> metrics_served;
  std::unique_ptr<cluster_liveness> liveness;
  auto start_metrics = [&](const std::string& task_host, const cluster_spec* cluster) -> std::optional<int> {
    auto served = apps::serve_metrics("actorflow-train", apps::metrics_host(o.bind, task_host),
                                      o.metrics_port, process_transport_security());
    if (!served) {
      std::cerr << "actorflow-train: " << served.error().message() << '\n';
      return apps::metrics_exit_code(served.error());
    }
    metrics_served = std::move(*served);
    if (metrics_served && cluster != nullptr)
      liveness = std::make_unique<cluster_liveness>(default_actor_system(), *cluster);
    return std::nullopt;
  };
  if (o.coordinator) {
    auto spec = cluster_spec::parse(o.cluster);
    if (!spec) {
      std::cerr << "actorflow-train: --cluster: " << spec.error().message() << '\n';
      return 2;
    }
    if (auto distinct = check_distinct_addresses(*spec); !distinct.ok()) {
      std::cerr << "actorflow-train: --cluster: " << distinct.message() << '\n';
      return 2;
    }
    if (auto failed = start_metrics("", &*spec))
      return *failed;
    return run_coordinated(o, *spec);
  }
  if (!o.job.empty() || (o.cluster.empty() && o.target.empty() && !o.local &&
                         std::getenv("TF_CONFIG") != nullptr)) {
    // Between-graph: --cluster/--job/--task, or TF_CONFIG (which --job/--task may override).
    if (o.model == "linreg") {
      std::cerr << "actorflow-train: between-graph training runs a classifier (--model mlp, cnn or rnn)\n";
      return 2;
    }
    cluster_spec cluster;
    auto job = o.job;
    auto task = o.task;
    if (!o.cluster.empty()) {
      auto spec = cluster_spec::parse(o.cluster);
      if (!spec) {
        std::cerr << "actorflow-train: --cluster: " << spec.error().message() << '\n';
        return 2;
      }
      cluster = std::move(*spec);
    } else {
      auto config = tf_config_from_environment();
      if (!config) {
        std::cerr << "actorflow-train: " << config.error().message() << '\n';
        return 2;
      }
      cluster = config->cluster;
      if (job.empty()) {
        job = config->job;
        task = config->task_index;
      }
    }
    if (job.empty()) {
      std::cerr << "actorflow-train: --job is required with --cluster for between-graph training\n";
      return 2;
    }
    if (auto distinct = check_distinct_addresses(cluster); !distinct.ok()) {
      std::cerr << "actorflow-train: " << distinct.message() << '\n';
      return 2;
    }
    // This worker's task listens on its spec address's host (an unknown task fails just after).
    std::string task_host;
    if (auto address = cluster.address(job, task))
      if (auto split = parse_host_port(*address))
        task_host = split->host;
    if (auto failed = start_metrics(task_host, &cluster))
      return *failed;
    return run_between_graph(o, cluster, job, task);
  }
  auto where = resolve_target(o);
  if (!where) {
    std::cerr << "actorflow-train: " << where.error().message() << '\n';
    return 2;
  }
  std::optional<cluster_spec> cluster;
  if (!o.cluster.empty())
    if (auto spec = cluster_spec::parse(o.cluster))
      cluster = std::move(*spec);
  if (auto failed = start_metrics("", cluster ? &*cluster : nullptr))
    return *failed;
  return o.model == "linreg" ? run_linreg(o, *where) : run_mlp(o, *where);
}

int main(int argc, char** argv) { return apps::run_main("actorflow-train", run, argc, argv); }

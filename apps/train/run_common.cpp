#include "train/run_common.hpp"
#include "actors/task_client.hpp"
#include "graph/ops.hpp"
#include "graph/replica_device_setter.hpp"
#include "serialization/file_io.hpp"
#include "serialization/graph_picture.hpp"

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
#include <unistd.h>

#include <cmath>
#include <limits>

namespace actorflow::train_app {


int fail(const status& s) {
  std::cerr << "actorflow-train: " << s.message() << '\n';
  return 1;
}

void warn(const std::string& line) { std::cerr << "actorflow-train: " << line << '\n'; }

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
  say_examples_per_second(progress, throughput);
  char line[64];
  std::snprintf(line, sizeof line, "test accuracy: %.4f", accuracy);
  progress.line(line);
  return {};
}

/// --checkpoint-dir's checkpoints; none without the flag, or for a process that writes none.
train::checkpoint_files checkpoints_of(const train_options& o, saver& from, bool writes) {
  if (!writes)
    return {};
  return train::checkpoint_files{o.checkpoint_dir, o.keep_checkpoints, from};
}

/// --resume: the step of the latest checkpoint, restored into `s` and said on standard output;
/// 0 without the flag. Errors when there is none.
result<std::int64_t> resume(const train_options& o, train::checkpoint_files& checkpoints, session& s) {
  if (!o.resume)
    return std::int64_t{0};
  if (!checkpoints)
    return make_error(errc::invalid_argument, "--resume needs --checkpoint-dir");
  auto restored = checkpoints.restore_latest(s, warn);
  if (!restored)
    return restored.error().with_context("--resume");
  if (!*restored)
    return make_error(errc::not_found, "--resume: no checkpoint in '" + o.checkpoint_dir + "'");
  std::cout << "resumed from " << (*restored)->path << " at step " << (*restored)->step << '\n';
  return (*restored)->step;
}

/// metrics.csv (and the event files) begun, or with --resume continued from `step`.
status begin_metrics(const train_options& o, std::int64_t step, train::metrics_log& metrics) {
  auto path = o.output_dir + "/metrics.csv";
  return o.resume ? metrics.resume(path, step) : metrics.open(path);
}

/// A run whose master is this process (local, in-process or on a cluster): the variables
/// initialised, or with --resume restored from the latest checkpoint; metrics.csv begun, or
/// continued up to that step (and so the curve). The step training starts at.
result<std::int64_t> begin_run(const train_options& o, graph& g, session& s, saver& from,
                               train::checkpoint_files& checkpoints, train::metrics_log& metrics) {
  AF_RETURN_IF_ERROR(from.status());
  AF_RETURN_IF_ERROR(s.run_targets({ops::global_variables_initializer(g)}));
  auto step = resume(o, checkpoints, s);
  if (!step)
    return step.error();
  AF_RETURN_IF_ERROR(begin_metrics(o, *step, metrics));
  return *step;
}

std::string model_title(const train_options& o) {
  return o.model == "cnn" ? "CNN" : o.model == "rnn" ? "RNN" : "MLP";
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
    auto counter = make_global_step(g);
    out.global_step = counter.step;
    out.train = ops::group(g, {out.m.train, counter.count}, "train_and_count");
  }
  AF_RETURN_IF_ERROR(g.status());
  return out;
}

/// The variables of `g` made ready on the ps tasks of `cluster` (train::session_manager), from
/// `checkpoints`, said through `progress`.
train::session_manager variables_manager(const train_options& o, const cluster_spec& cluster,
                                         graph& g, const actorflow::variable& global_step,
                                         train::checkpoint_files& checkpoints,
                                         progress_printer& progress) {
  train::session_manager_options ready;
  ready.global_step = global_step.read;
  ready.variables = train::variables_ready_of(g);
  ready.initializer = ops::global_variables_initializer(g);
  ready.checkpoints = &checkpoints;
  ready.init_timeout_seconds = o.init_timeout_seconds;
  ready.ps_job = o.ps_job;
  ready.probe_ps = [&cluster, job = o.ps_job] {
    return probe_job(cluster, job, 2);
  };
  ready.say = [&progress](const std::string& line) { progress.line(line); };
  ready.warn = warn;
  return train::session_manager{std::move(ready)};
}

void say_examples_per_second(progress_printer& progress, const train::throughput_meter& throughput) {
  char line[64];
  std::snprintf(line, sizeof line, "examples/s: %.0f", throughput.overall());
  progress.line(line);
}

global_step_counter make_global_step(graph& g) {
  global_step_counter out;
  out.step = ops::variable(g, ops::constant(g, std::int64_t{0}, "global_step/zero"), "global_step");
  out.count = ops::assign_add(out.step, ops::constant(g, std::int64_t{1}, "one_step"));
  return out;
}

run_step_fn steps_on(session& s) {
  return [&s](const std::vector<output>& fetches, const feed_list& feeds,
              const std::vector<output>& targets) { return s.run(fetches, feeds, targets); };
}

} // namespace actorflow::train_app

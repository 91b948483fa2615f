// actorflow-train, between-graph replication (async and --sync), on the training library: a
// train::monitored_session per worker, and for --sync a train::sync_replicas_optimizer.
#include "train/modes.hpp"
#include "train/between_graph_worker.hpp"
#include "actors/server.hpp"
#include "graph/ops.hpp"
#include "train/monitored_session.hpp"
#include "train/sync_replicas_optimizer.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>

namespace actorflow::train_app {

status check_worker_flags(const train_options& o, const cluster_spec& cluster,
                          const std::string& job, int task, int replicas) {
  for (auto& [flag, name] : {std::pair{"--ps-job", o.ps_job}, std::pair{"--job", job}})
    if (!cluster.has_job(name))
      return make_error(errc::invalid_argument,
                        std::string{"the cluster has no job '"} + name + "' (" + flag + ")");
  auto workers = cluster.num_tasks(job);
  auto tasks = [&](int n) { return std::to_string(n) + (n == 1 ? " task" : " tasks"); };
  if (task >= workers)
    return make_error(errc::invalid_argument, "job '" + job + "' has " + tasks(workers) +
                                                ", not task " + std::to_string(task));
  if (!o.sync)
    return {};
  if (o.total_replicas > 0 && o.total_replicas != workers)
    return make_error(errc::invalid_argument, "--total-replicas " +
                                                std::to_string(o.total_replicas) + " but job '" +
                                                job + "' has " + tasks(workers));
  if (replicas > workers)
    return make_error(errc::invalid_argument, "--replicas-to-aggregate " +
                                                std::to_string(replicas) + " is more than the " +
                                                std::to_string(workers) + " workers");
  return {};
}

namespace {

/// Whenever the variables are ready (at the start, and again after a lost ps came back), the
/// ps tasks learn this worker works with them: if every worker goes away without finishing,
/// they stop after their grace period instead of waiting forever. After a loss, sync rounds
/// go on from the restored global step, said.
class worker_joined_hook final : public train::session_run_hook {
public:
  worker_joined_hook(server& served, const std::string& ps_job,
                     const train::sync_replicas_hook* rounds, progress_printer& progress)
      : served_(served), ps_job_(ps_job), rounds_(rounds), progress_(progress) {}
  status after_create_session(session&) override {
    if (auto joined = served_.report_joined(ps_job_, 10); !joined.ok())
      std::cerr << "actorflow-train: " << joined.message() << '\n';
    if (rounds_ != nullptr && sessions_++ > 0)
      progress_.line("synchronous rounds go on from round " + std::to_string(rounds_->round()));
    return {};
  }

private:
  server& served_;
  std::string ps_job_;
  const train::sync_replicas_hook* rounds_;
  progress_printer& progress_;
  int sessions_ = 0;
};

/// What the rounds this worker took part in averaged, and what the shards counted.
struct round_counts {
  std::int64_t short_rounds = 0;
  std::int64_t stale_dropped = 0;
  std::int32_t fewest_gradients = std::numeric_limits<std::int32_t>::max();
  std::int32_t most_gradients = 0;

  void add(const train::sync_round_report& round) {
    short_rounds = std::max(short_rounds, round.short_rounds);
    stale_dropped = std::max(stale_dropped, round.stale_dropped);
    if (!round.applied)
      return;
    fewest_gradients = std::min(fewest_gradients, round.round_gradients);
    most_gradients = std::max(most_gradients, round.round_gradients);
  }

  void say(progress_printer& progress) const {
    progress.line("short rounds: " + std::to_string(short_rounds) +
                  " (closed after --round-timeout without every worker's gradient)");
    if (most_gradients == 0)
      return;
    auto range = fewest_gradients == most_gradients
                   ? std::to_string(most_gradients)
                   : std::to_string(fewest_gradients) + " to " + std::to_string(most_gradients);
    progress.line("gradients per round: " + range +
                  " (each round this worker took part in averaged that many)");
  }
};

/// This worker's data: the whole sets, the examples it trains on and their batches.
struct worker_data {
  fashion_mnist sets;
  dataset mine;
  std::optional<batch_iterator> batches;
  bool global_order = true;
  std::int64_t steps_per_epoch = 0;
};

result<worker_data> load_worker_data(const train_options& o, int task, int workers) {
  auto data = load_data(o);
  if (!data)
    return data.error();
  worker_data out;
  out.sets = std::move(*data);
  // --data-order global (the default): every worker walks one shared order and takes its share
  // of each global batch (batch_options's replicas), so that sync rounds see one process's
  // batches; shard: this worker's contiguous share, in an order of its own.
  out.global_order = o.data_order == "global";
  auto mine = out.global_order ? result<dataset>{out.sets.train} : shard_of(out.sets.train, task, workers);
  if (!mine)
    return mine.error();
  out.mine = std::move(*mine);
  batch_options shuffled;
  shuffled.batch_size = o.batch_size;
  shuffled.seed = out.global_order ? o.seed : o.seed + static_cast<std::uint64_t>(task);
  shuffled.drop_last = true;
  if (out.global_order) {
    shuffled.replicas = workers;
    shuffled.replica = task;
  }
  auto batches = batch_iterator::create(out.mine, shuffled);
  if (!batches)
    return batches.error();
  out.batches.emplace(std::move(*batches));
  out.steps_per_epoch = out.batches->batches_per_epoch();
  // Every worker takes part in the same number of rounds, that of the smallest shard (a round
  // would otherwise wait for a worker that has finished).
  if (o.sync && !out.global_order)
    out.steps_per_epoch = (out.sets.train.size() / workers) / o.batch_size;
  return out;
}

/// This worker is a task of the cluster too (TensorFlow's tf.train.Server beside the client):
/// its devices run the model, its master places the graph over them and the ps tasks only,
/// never waiting for the other workers, which may have finished already.
result<std::unique_ptr<server>> start_worker_server(const train_options& o,
                                                    std::shared_ptr<const cluster_spec> cluster,
                                                    const std::string& job, int task) {
  server_options serving;
  serving.in_default_system = true;
  serving.threads = o.threads;
  serving.device_filters = {"/job:" + o.ps_job, "/job:" + job + "/task:" + std::to_string(task)};
  serving.bind_host = o.bind;
  serving.connect_timeout_seconds = o.connect_timeout_seconds;
  return server::start(std::move(cluster), job, task, serving);
}

/// The worker's monitored session, on its own server's master, as the flags ask; no hooks yet.
train::monitored_session_options worker_session_options(const train_options& o, server& served,
                                                        const actorflow::variable& global_step,
                                                        bool chief, std::int64_t steps_per_epoch,
                                                        progress_printer& progress) {
  train::monitored_session_options monitored;
  monitored.session.master = served.local_master();
  monitored.session.timeout_seconds = o.step_timeout_seconds;
  monitored.session.inter_op_parallelism_threads = o.threads;
  monitored.session.intra_op_parallelism_threads = o.threads;
  monitored.session.log_device_placement = o.log_device_placement;
  monitored.session.mixed_precision = o.mixed_precision;
  monitored.global_step = global_step;
  monitored.is_chief = chief;
  // The chief alone writes checkpoints, one per epoch of global steps.
  if (chief)
    monitored.checkpoint_dir = o.checkpoint_dir;
  monitored.sharded_checkpoints = o.sharded_checkpoints;
  monitored.save_checkpoint_steps = steps_per_epoch;
  monitored.keep_checkpoints = o.keep_checkpoints;
  monitored.init_timeout_seconds = o.init_timeout_seconds;
  monitored.init_timeout_source = "--init-timeout";
  monitored.ps_job = o.ps_job;
  monitored.say = [&progress](const std::string& line) { progress.line(line); };
  monitored.warn = warn;
  return monitored;
}

} // namespace

replica_device_setter_options worker_placement(const train_options& o, const cluster_spec& cluster,
                                               const std::string& worker_device) {
  replica_device_setter_options placement;
  placement.ps_tasks = cluster.num_tasks(o.ps_job);
  placement.ps_device = "/job:" + o.ps_job;
  placement.worker_device = worker_device;
  return placement;
}

result<std::unique_ptr<between_graph_worker>> between_graph_worker::start(
  const train_options& o, const cluster_spec& cluster, const std::string& job, int task, graph& g,
  const actorflow::variable& global_step, progress_printer& progress) {
  std::unique_ptr<between_graph_worker> worker{new between_graph_worker};
  worker->chief_ = task == 0;
  worker->ps_job_ = o.ps_job;
  worker->ps_tasks_ = cluster.num_tasks(o.ps_job);
  auto shared_cluster = std::make_shared<const cluster_spec>(cluster);
  auto served = start_worker_server(o, shared_cluster, job, task);
  if (!served)
    return served.error();
  worker->served_ = std::move(*served);
  // Checkpoints (the chief's) every --steps steps of the global step, and at the end.
  auto monitored = worker_session_options(o, *worker->served_, global_step, worker->chief_,
                                          std::max(1, o.steps), progress);
  monitored.cluster = shared_cluster;
  monitored.hooks.push_back(
    std::make_unique<worker_joined_hook>(*worker->served_, o.ps_job, nullptr, progress));
  auto s = train::monitored_session::create(g, std::move(monitored));
  if (!s)
    return s.error();
  worker->session_ = std::move(*s);
  return worker;
}

run_step_fn between_graph_worker::steps() {
  auto* s = session_.get();
  return [s](const std::vector<output>& fetches, const feed_list& feeds,
             const std::vector<output>& targets) { return s->run(fetches, feeds, targets); };
}

int between_graph_worker::end(const std::function<status(const run_step_fn&)>& report,
                              const train::throughput_meter& throughput, progress_printer& progress) {
  progress.line("global step: " + std::to_string(session_->global_step()));
  if (chief_) {
    if (auto st = report(steps_on(session_->raw_session())); !st.ok())
      return fail(st);
  } else {
    say_examples_per_second(progress, throughput);
  }
  if (auto closed = finish(); !closed.ok())
    return fail(closed);
  return 0;
}

status between_graph_worker::finish() {
  finished_ = true;
  auto closed = session_->close();
  // After the session closed: once every worker has said so, the ps tasks stop by themselves.
  if (auto told = served_->report_done(ps_job_, 10); !told.ok())
    std::cerr << "actorflow-train: " << told.message() << '\n';
  return closed;
}

between_graph_worker::~between_graph_worker() {
  // A worker that failed still says so: the ps tasks do not wait for it past their grace.
  if (!finished_ && served_) {
    session_.reset();
    (void)served_->report_done(ps_job_, 10);
  }
}

int run_between_graph(const train_options& o, const cluster_spec& cluster, const std::string& job,
                      int task) {
  const int workers = cluster.has_job(job) ? cluster.num_tasks(job) : 0;
  const int replicas = o.replicas_to_aggregate > 0 ? o.replicas_to_aggregate : workers;
  if (auto flags = check_worker_flags(o, cluster, job, task, replicas); !flags.ok())
    return usage_error(flags);
  const bool chief = task == 0;
  const auto me = "/job:" + job + "/task:" + std::to_string(task);
  if (chief)
    if (auto st = prepare_output_directories(o); !st.ok())
      return fail(st);
  auto data = load_worker_data(o, task, workers);
  if (!data)
    return fail(data.error());
  auto& batches = *data->batches;
  const auto steps_per_epoch = data->steps_per_epoch;
  const auto total_steps = steps_per_epoch * o.epochs;

  graph g;
  auto model = build_shared_classifier(g, o, cluster, me, o.sync);
  if (!model)
    return fail(model.error());
  auto& m = model->m;
  auto train_op = model->train;
  std::optional<train::sync_replicas_optimizer> sync;
  output batch_accuracy;
  if (o.sync) {
    auto here = g.device(me);
    sync.emplace(*model->opt, model->global_step,
                 train::sync_replicas_settings{replicas, workers, static_cast<double>(o.round_timeout_seconds)});
    train_op = sync->apply_gradients(model->gradients);
    batch_accuracy = m.correct / static_cast<double>(o.batch_size);
  }
  if (!g.status().ok())
    return fail(g.status());

  auto shared_cluster = std::make_shared<const cluster_spec>(cluster);
  auto served = start_worker_server(o, shared_cluster, job, task);
  if (!served)
    return fail(served.error());
  progress_printer progress{o.log_every};
  auto monitored = worker_session_options(o, **served, model->global_step, chief, steps_per_epoch,
                                          progress);
  monitored.cluster = shared_cluster;
  train::sync_replicas_hook* rounds = nullptr;
  if (sync) {
    // First of the hooks: it counts the global step for the others.
    auto hook = sync->make_session_run_hook(
      chief, {shared_cluster, task, o.ps_job, m.loss, batch_accuracy,
              std::chrono::seconds(std::max(60, o.init_timeout_seconds))});
    rounds = hook.get();
    monitored.hooks.push_back(std::move(hook));
  }
  monitored.hooks.push_back(std::make_unique<worker_joined_hook>(**served, o.ps_job, rounds, progress));
  int exit_code = 0;
  {
    auto s = train::monitored_session::create(g, std::move(monitored));
    if (!s)
      return fail(s.error());
    train::metrics_log metrics;
    if (chief)
      if (auto st = metrics.open(o.output_dir + "/metrics.csv"); !st.ok())
        return fail(st);
    progress.line("worker " + me + (chief ? " (chief)" : "") + ": training on " +
                  (data->global_order ? "its share (1 in " + std::to_string(workers) +
                                    ") of one shared order of " + std::to_string(data->mine.size())
                                : "its " + std::to_string(data->mine.size()) + " examples") +
                  " with the variables on the " + std::to_string(model->ps_tasks) + " " +
                  o.ps_job + " task(s)");
    train::throughput_meter throughput;
    std::vector<std::unique_ptr<train::training_hook>> hooks;
    hooks.push_back(train::make_finite_loss_hook());
    // The chief alone writes metrics.
    hooks.push_back(progress_hook(o, total_steps, throughput, progress, chief ? &metrics : nullptr, g));
    train::trainer loop{std::move(hooks)};
    round_counts counted;
    auto feeds = [&](const batch& b) {
      return feed_list{{m.images, b.images}, {m.labels, b.one_hot}};
    };
    // A worker lost in the middle of an async step leaves no variable half updated: the step's
    // gradients apply on every ps or on none.
    run_options whole;
    whole.all_or_nothing = true;
    auto trained = loop.run(0, o.sync ? std::numeric_limits<std::int64_t>::max() : total_steps,
                            [&](std::int64_t next) -> result<train::step_report> {
      auto started = clock_type::now();
      if (!o.sync) {
        auto& b = batches.next();
        auto r = (*s)->run_with(whole, {m.loss, m.correct}, feeds(b), {train_op});
        if (!r)
          return r.error();
        return mlp_report(next, steps_per_epoch, *r, b, started);
      }
      for (;;) {
        // The batch of round r is this worker's r-th (its share of global batch r), whatever
        // happened before: a restored checkpoint, or a backup worker's late gradient.
        batches.seek((*s)->global_step());
        auto& b = batches.next();
        auto r = (*s)->run({m.loss, m.correct}, feeds(b), {train_op});
        if (!r)
          return r.error();
        auto& round = rounds->last_round();
        // A round lost with a ps is computed again on its own batch.
        if (round.skipped)
          continue;
        counted.add(round);
        // The step is the shared global step (the rounds applied so far); its loss and accuracy
        // are the round's, over every batch in it, when this worker's gradient was part of it.
        auto report = mlp_report((*s)->global_step(), steps_per_epoch, *r, b, started);
        if (round.applied) {
          report.loss = round.round_loss;
          report.batch_accuracy = round.round_accuracy;
        }
        report.last = (*s)->global_step() >= total_steps;
        report.stale_gradients_dropped = counted.stale_dropped;
        return report;
      }
    });
    if (trained.ok())
      trained = (*s)->close();
    if (!trained.ok()) {
      exit_code = fail(trained);
    } else if (chief) {
      progress.line("global step: " + std::to_string((*s)->global_step()));
      if (o.sync)
        counted.say(progress);
      train::data_parallel_mlp single;
      single.towers.push_back({m.images, m.labels, m.loss, m.correct});
      auto accuracy = evaluate((*s)->raw_session(), single, data->sets.test);
      if (!accuracy)
        exit_code = fail(accuracy.error());
      else if (auto st = report_results(o, g, metrics,
                                   "actorflow: " + model_title(o) + " between-graph (" + o.optimizer + ")",
                                   throughput, *accuracy, progress);
          !st.ok())
        exit_code = fail(st);
    } else {
      say_examples_per_second(progress, throughput);
    }
  }
  // After the session closed: once every worker has said so, the ps tasks stop by themselves.
  if (auto told = (*served)->report_done(o.ps_job, 10); !told.ok())
    std::cerr << "actorflow-train: " << told.message() << '\n';
  return exit_code;
}

} // namespace actorflow::train_app

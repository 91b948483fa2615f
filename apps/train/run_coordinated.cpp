// actorflow-train, coordinated training (--coordinator).
#include "train/modes.hpp"
#include "actors/cluster_coordinator.hpp"
#include "graph/ops.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <utility>

namespace actorflow::train_app {

/// What one coordinated closure gives back: the batch's loss and right answers, and its size.
struct closure_step {
  std::vector<tensor> loss_and_correct;
  std::int64_t examples = 0;
};

/// The session that initialises, saves and restores the variables, through the ps tasks alone.
session_options ps_session_options(const train_options& o, const cluster_spec& cluster) {
  session_options on_ps;
  on_ps.cluster = std::make_shared<const cluster_spec>(cluster);
  on_ps.timeout_seconds = o.step_timeout_seconds;
  on_ps.device_filters = {"/job:" + o.ps_job};
  on_ps.default_task = "/job:" + o.ps_job + "/task:0";
  return on_ps;
}

/// The coordinator of the --worker-job tasks, their sessions as the flags ask.
coordinator_options coordinated_options(const train_options& o) {
  coordinator_options coordinating;
  coordinating.worker_job = o.worker_job;
  coordinating.session.timeout_seconds = o.step_timeout_seconds;
  coordinating.session.inter_op_parallelism_threads = o.threads;
  coordinating.session.intra_op_parallelism_threads = o.threads;
  coordinating.session.log_device_placement = o.log_device_placement;
  coordinating.session.mixed_precision = o.mixed_precision;
  return coordinating;
}

/// Where closures take their batches. --data-order global (the default): closure s trains on
/// batch s of one shuffled order of the whole set, taken when it is scheduled, whichever worker
/// runs it (and a closure run again runs on the same batch), so a run's data do not depend on
/// which worker was free; after a restore to step S the batches from S are taken again. shard:
/// each worker its own share of the training set, shuffled by a seed of its own.
struct closure_batches {
  bool global_order = true;
  std::vector<dataset> shards;
  per_worker<std::unique_ptr<batch_iterator>> per_worker_batches;
  std::optional<batch_iterator> ordered;

  std::shared_ptr<const batch> of_step(std::int64_t step) {
    ordered->seek(step);
    return std::make_shared<const batch>(ordered->next());
  }
};

result<std::unique_ptr<closure_batches>> make_closure_batches(const train_options& o,
                                                              const dataset& train_set,
                                                              cluster_coordinator& coordinator) {
  auto out = std::make_unique<closure_batches>();
  out->global_order = o.data_order == "global";
  const int workers = coordinator.num_workers();
  for (int i = 0; i < workers && !out->global_order; ++i) {
    auto mine = shard_of(train_set, i, workers);
    if (!mine)
      return mine.error();
    out->shards.push_back(std::move(*mine));
  }
  status bad_shard;
  out->per_worker_batches =
    coordinator.create_per_worker([&](int i) -> std::unique_ptr<batch_iterator> {
      if (out->global_order)
        return nullptr;
      batch_options shuffled;
      shuffled.batch_size = o.batch_size;
      shuffled.seed = o.seed + static_cast<std::uint64_t>(i);
      shuffled.drop_last = true;
      auto made = batch_iterator::create(out->shards[static_cast<std::size_t>(i)], shuffled);
      if (!made) {
        bad_shard = made.error();
        return nullptr;
      }
      return std::make_unique<batch_iterator>(std::move(*made));
    });
  AF_RETURN_IF_ERROR(bad_shard);
  batch_options in_one_order;
  in_one_order.batch_size = o.batch_size;
  in_one_order.seed = o.seed;
  in_one_order.drop_last = true;
  auto ordered = batch_iterator::create(train_set, in_one_order);
  if (!ordered)
    return ordered.error();
  out->ordered.emplace(std::move(*ordered));
  return out;
}

/// Checkpoints are taken where a --log-every chunk from the start (or restore) crosses an
/// epoch, once every closure before it has finished and none after it has started: the global
/// step it holds counts exactly the closures whose updates it holds. `from`'s next one, or the
/// end of training (false: none there).
std::pair<std::int64_t, bool> next_checkpoint(const train_options& o, bool checkpoints,
                                              std::int64_t from, std::int64_t steps_per_epoch,
                                              std::int64_t total_steps) {
  for (auto at = from; checkpoints && at < total_steps;) {
    auto next = std::min<std::int64_t>(at + o.log_every, total_steps);
    if (next / steps_per_epoch > at / steps_per_epoch)
      return {next, true};
    at = next;
  }
  return {total_steps, false};
}

/// The report of closure number `step`, which took `seconds`.
train::step_report closure_report(const closure_step& closure, std::int64_t step,
                                  std::int64_t steps_per_epoch, double seconds) {
  train::step_report report;
  report.step = step;
  report.epoch = static_cast<int>((step - 1) / steps_per_epoch) + 1;
  report.loss = closure.loss_and_correct.at(0).scalar_value<double>();
  report.batch_accuracy = closure.loss_and_correct.at(1).scalar_value<double>() /
                          static_cast<double>(closure.examples);
  report.examples = closure.examples;
  report.seconds = seconds;
  return report;
}

/// "global step: N of M (...)", and an error unless it is M.
status say_global_step(session& ps_session, const output& global_step, std::int64_t total_steps,
                       const cluster_coordinator& coordinator, progress_printer& progress) {
  auto stats = coordinator.stats();
  auto counted = ps_session.run({global_step});
  if (!counted)
    return counted.error();
  auto global = counted->at(0).scalar_value<std::int64_t>();
  progress.line("global step: " + std::to_string(global) + " of " + std::to_string(total_steps) +
                " (" + std::to_string(stats.succeeded) + " closures done, " +
                std::to_string(stats.rescheduled) + " run again after " +
                std::to_string(stats.workers_lost) + " worker loss(es), " +
                std::to_string(stats.failed) + " given up)");
  if (global != total_steps)
    return make_error(errc::internal, "the global step is " + std::to_string(global) + ", not " +
                                        std::to_string(total_steps) +
                                        ": an update was lost or counted twice");
  return {};
}

/// Test accuracy, in closures of 1000 examples on whichever workers are free.
result<double> coordinated_accuracy(cluster_coordinator& coordinator, graph& g,
                                    const train::classifier_model& m, const dataset& test) {
  batch_options in_order;
  in_order.batch_size = 1000;
  in_order.shuffle = false;
  auto test_batches = batch_iterator::create(test, in_order);
  if (!test_batches)
    return test_batches.error();
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
  AF_RETURN_IF_ERROR(coordinator.join());
  double correct = 0;
  for (auto& c : corrects)
    correct += *c.fetch();
  return correct / static_cast<double>(test.size());
}

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
  session ps_session{g, ps_session_options(o, cluster)};
  auto checkpoints = checkpoints_of(o, checkpoints_saver);
  progress_printer progress{o.log_every};
  auto manager = variables_manager(o, cluster, g, global_step, checkpoints, progress);
  // --resume restores at the start; after a lost ps came back empty, the latest checkpoint is
  // restored when there is one.
  auto make_variables_ready = [&](bool after_loss) {
    return after_loss ? manager.recover_session(ps_session, true)
                      : manager.prepare_session(ps_session, {o.resume, o.resume});
  };
  auto ready = make_variables_ready(false);
  if (!ready)
    return fail(ready.error());
  cluster_coordinator coordinator{cluster, coordinated_options(o)};
  auto workers = coordinator.num_workers();
  auto sources = make_closure_batches(o, data->train, coordinator);
  if (!sources)
    return fail(sources.error());
  auto& batches = **sources;
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
  train::throughput_meter throughput;
  auto hook = progress_hook(o, total_steps, throughput, progress, &metrics, g);
  auto finite = train::make_finite_loss_hook();
  auto schedule_step = [&](std::int64_t step) {
    if (!batches.global_order)
      return coordinator.schedule([&](worker_context& w) {
        return train_on(w, batches.per_worker_batches.on(w)->next());
      });
    return coordinator.schedule(
      [&train_on, b = batches.of_step(step)](worker_context& w) { return train_on(w, *b); });
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
    auto [until, save_there] =
      next_checkpoint(o, static_cast<bool>(checkpoints), done, steps_per_epoch, total_steps);
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
        auto report = closure_report(step, ++done, steps_per_epoch, seconds);
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
      if (!manager.lost_ps(joined))
        return fail(joined);
      ps_session.reopen();
      auto back = make_variables_ready(true);
      if (!back)
        return fail(back.error());
      done = *back;
      continue;
    }
    if (save_there)
      if (auto st = checkpoints.writer().save(ps_session, done); !st.ok())
        return fail(st);
  }
  if (auto written = checkpoints.written(); !written.ok())
    return fail(written);
  // One increment per closure that succeeded since the last start or restore: anything else
  // is an update lost or counted twice.
  if (auto st = say_global_step(ps_session, global_step.read, total_steps, coordinator, progress);
      !st.ok())
    return fail(st);
  auto accuracy = coordinated_accuracy(coordinator, g, m, data->test);
  if (!accuracy)
    return fail(accuracy.error());
  if (auto st = report_results(o, g, metrics, "actorflow: " + model_title(o) + " coordinated (" + o.optimizer + ")",
                               throughput, *accuracy, progress);
      !st.ok())
    return fail(st);
  return 0;
}

} // namespace actorflow::train_app

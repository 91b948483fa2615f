// actorflow-train, between-graph replication (async and --sync).
#include "train/modes.hpp"
#include "actors/server.hpp"
#include "actors/session_actor.hpp"
#include "actors/sync_rounds.hpp"
#include "actors/task_client.hpp"
#include "graph/ops.hpp"
#include "graph/rendezvous_key.hpp"

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
#include <deque>
#include <limits>
#include <map>

namespace actorflow::train_app {

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
  options.mixed_precision = o.mixed_precision;
  progress_printer progress{o.log_every};
  // The chief alone writes checkpoints.
  auto checkpoints = checkpoints_of(o, checkpoints_saver, chief);
  auto manager = variables_manager(o, cluster, g, global_step, checkpoints, progress);
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
      auto step = after_loss ? manager.recover_session(s, chief)
                  : chief    ? manager.prepare_session(s, {true, false})
                             : manager.wait_for_session(s);
      if (!step)
        return step.error();
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
    // This process's life: once it has a successor (restarted with the same --task), its
    // gradients no longer count, even if it resumes after being frozen.
    const std::uint64_t life = new_incarnation();
    sync_round_settings round_settings;
    round_settings.worker_task = task;
    round_settings.incarnation = life;
    round_settings.learning_rate = o.learning_rate;
    round_settings.replicas_to_aggregate = replicas;
    round_settings.round_timeout_ms = std::int64_t{o.round_timeout_seconds} * 1000;
    round_settings.answer_bound = std::chrono::seconds(std::max(60, o.init_timeout_seconds));
    sync_round_client rounds{cluster, o.ps_job, round_settings};
    std::vector<std::string> variable_names;
    for (auto& [gradient, variable] : gradients)
      variable_names.push_back(variable.name());
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
      AF_RETURN_IF_ERROR(rounds.find_shards(variable_names));
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
          return checkpoints.writer().save(s, at);
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
      std::vector<std::pair<std::string, tensor>> pushed;
      for (std::size_t i = 0; i < gradients.size(); ++i)
        pushed.emplace_back(variable_names[i], r->at(i + 2));
      auto outcome = rounds.push(round, pushed, own.loss, own.batch_accuracy);
      if (!outcome)
        return outcome.error();
      auto& applied = *outcome;
      short_rounds = std::max(short_rounds, applied.short_rounds);
      stale_dropped = std::max(stale_dropped, applied.stale_dropped);
      round = applied.global_step;
      // The step is the shared global step (the rounds applied so far); its loss and accuracy
      // are the round's, over every batch in it, when this worker's gradient was part of it.
      auto report = mlp_report(round, steps_per_epoch, *r, b, started);
      if (applied.applied) {
        fewest_gradients = std::min(fewest_gradients, applied.round_gradients);
        most_gradients = std::max(most_gradients, applied.round_gradients);
        report.loss = applied.round_loss;
        report.batch_accuracy = applied.round_accuracy;
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
        if (!report && manager.lost_ps(report.error())) {
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
      if (!r && manager.lost_ps(r.error())) {
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

} // namespace actorflow::train_app

// actorflow-train, in one session: linreg and the classifiers, locally or on a cluster.
#include "train/modes.hpp"
#include "graph/ops.hpp"

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
  auto checkpoints = checkpoints_of(o, checkpoints_saver);
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
      return at % 100 == 0 || at == o.steps ? checkpoints.writer().save(s, at) : status{};
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
  auto checkpoints = checkpoints_of(o, checkpoints_saver);
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
  auto total_steps = train::classifier_steps(o, steps_per_epoch);
  train::throughput_meter throughput;
  std::vector<std::unique_ptr<train::training_hook>> hooks;
  hooks.push_back(train::make_finite_loss_hook());
  hooks.push_back(progress_hook(o, total_steps, throughput, progress, &metrics, g));
  if (checkpoints)
    hooks.push_back(train::make_checkpoint_hook([&](std::int64_t at) { return checkpoints.writer().save(s, at); },
                                                steps_per_epoch, total_steps));
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

} // namespace actorflow::train_app

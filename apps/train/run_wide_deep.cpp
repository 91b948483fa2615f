// actorflow-train --model wide-deep: click prediction (Cheng et al. 2016's Wide & Deep) on the
// synthetic click log of train/click_log.hpp, every table a hash embedding (no vocabulary,
// rows made as ids come): a wide linear part over the three fields' ids and the user x item
// cross trained by FTRL, and a deep part (the fields' embeddings, concatenated, through a ReLU
// layer) trained by Adagrad. It ends with the held-out AUC beside the true model's (the ceiling).
#include "train/modes.hpp"
#include "train/between_graph_worker.hpp"
#include "graph/hash_embedding.hpp"
#include "graph/ops.hpp"
#include "graph/replica_device_setter.hpp"
#include "graph/sampled_losses.hpp"
#include "train/click_log.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

namespace actorflow::train_app {

namespace {

constexpr std::int64_t hidden_units = 32;
constexpr std::int64_t evaluation_examples = 20000;

/// The model's inputs and outputs.
struct wide_deep_model {
  output user, item, context, cross, labels;
  output logits, loss, train;
  /// Between-graph: the updates every worker makes, counted by `train` (on the ps).
  std::optional<actorflow::variable> global_step;
};

/// With `placement`, table shards (one per ps task) and variables round robin over the ps tasks,
/// the rest on its worker device; `count_steps` adds the global step `train` counts.
result<wide_deep_model> build_wide_deep(graph& g, const train_options& o,
                                        const std::optional<replica_device_setter_options>& placement,
                                        bool count_steps) {
  wide_deep_model m;
  std::optional<scope_guard> placed;
  int shards = 1;
  if (placement) {
    auto fn = replica_device_setter(*placement);
    if (!fn)
      return fn.error();
    placed.emplace(g.device(*fn));
    shards = placement->ps_tasks;
  }
  auto ids = [&](const char* name) {
    return ops::placeholder(g, dtype::int64, tensor_shape{std::vector<std::int64_t>{-1}}, name);
  };
  m.user = ids("user");
  m.item = ids("item");
  m.context = ids("context");
  m.cross = ids("user_x_item");
  m.labels = ops::placeholder(g, dtype::float32, {-1, 1}, "labels");
  hash_embedding_options table_options;
  table_options.seed = o.seed;
  // Wide: one weight per id and per cross, starting at zero (FTRL's start).
  std::vector<variable> wide_vars, deep_vars;
  output wide;
  const std::vector<std::pair<const char*, output>> wide_inputs{
    {"wide_user", m.user}, {"wide_item", m.item}, {"wide_context", m.context}, {"wide_cross", m.cross}};
  for (auto& [name, in] : wide_inputs) {
    auto table = ops::hash_embedding(g, name, 1, hash_initializer::zeros(), shards, table_options);
    auto part = ops::hash_embedding_lookup(table, in);
    wide = wide.valid() ? ops::add(wide, part) : part;
    for (auto& v : table.variables())
      wide_vars.push_back(v);
  }
  // Deep: the fields' embeddings, concatenated, through one ReLU layer.
  const auto dim = static_cast<std::int64_t>(o.embedding_dim);
  std::vector<output> embedded;
  const std::vector<std::pair<const char*, output>> deep_inputs{
    {"deep_user", m.user}, {"deep_item", m.item}, {"deep_context", m.context}};
  for (auto& [name, in] : deep_inputs) {
    auto table = ops::hash_embedding(g, name, dim, hash_initializer::uniform(-0.05, 0.05), shards, table_options);
    embedded.push_back(ops::hash_embedding_lookup(table, in));
    for (auto& v : table.variables())
      deep_vars.push_back(v);
  }
  auto features = ops::concat(embedded, 1, "deep_features");
  auto w1 = ops::variable(g, ops::truncated_normal(g, {3 * dim, hidden_units}, 0.0, 1.0 / std::sqrt(3.0 * static_cast<double>(dim))), "deep/w1");
  auto b1 = ops::variable(g, ops::zeros(g, {hidden_units}), "deep/b1");
  auto w2 = ops::variable(g, ops::truncated_normal(g, {hidden_units, 1}, 0.0, 1.0 / std::sqrt(static_cast<double>(hidden_units))), "deep/w2");
  auto b2 = ops::variable(g, ops::zeros(g, {1}), "deep/b2");
  for (auto* v : {&w1, &b1, &w2, &b2})
    deep_vars.push_back(*v);
  auto hidden = ops::relu(ops::add(ops::matmul(features, w1.read), b1.read));
  auto deep = ops::add(ops::matmul(hidden, w2.read), b2.read);
  m.logits = ops::add(ops::reshape(wide, {-1, 1}, "wide_logit"), deep, "logits");
  m.loss = ops::reduce_mean(ops::sigmoid_cross_entropy_with_logits(m.logits, m.labels), {}, false, "loss");
  // One gradient pass, two optimizers (Wide & Deep's: FTRL with L1 for the wide part).
  std::vector<variable> all = wide_vars;
  all.insert(all.end(), deep_vars.begin(), deep_vars.end());
  ftrl_optimizer ftrl{o.learning_rate, -0.5, 0.1, 0.001, 0.001};
  adagrad_optimizer adagrad{o.learning_rate, 0.1};
  auto pairs = ftrl.compute_gradients(m.loss, all);
  std::vector<gradient_and_variable> wide_pairs, deep_pairs;
  for (auto& p : pairs)
    (p.second.ref.producer().name.rfind("wide_", 0) == 0 ? wide_pairs : deep_pairs).push_back(p);
  std::vector<output> updates{ftrl.apply_gradients(wide_pairs), adagrad.apply_gradients(deep_pairs)};
  if (count_steps) {
    auto counter = make_global_step(g);
    m.global_step = counter.step;
    updates.push_back(counter.count);
  }
  m.train = ops::group(g, updates, "train");
  if (!g.status().ok())
    return g.status();
  return m;
}

feed_list feeds_of(const wide_deep_model& m, const train::click_batch& b) {
  return {{m.user, b.user}, {m.item, b.item}, {m.context, b.context}, {m.cross, b.cross}, {m.labels, b.labels}};
}

/// --steps steps of `m` on batches of `log`, reported to the progress line and `metrics`.
status train_wide_deep(const train_options& o, const wide_deep_model& m, train::click_log& log,
                       const run_step_fn& run, const graph& g, progress_printer& progress,
                       train::metrics_log* metrics, train::throughput_meter& throughput) {
  char line[240];
  std::snprintf(line, sizeof line,
                "wide-deep: a synthetic click log of %lld ids per field (Zipf), batches of %d, "
                "%lld steps",
                static_cast<long long>(o.ids_per_field), o.batch_size, static_cast<long long>(o.steps));
  progress.line(line);
  std::vector<std::unique_ptr<train::training_hook>> hooks;
  hooks.push_back(train::make_finite_loss_hook());
  auto shown = o;
  shown.epochs = 1;
  hooks.push_back(progress_hook(shown, o.steps, throughput, progress, metrics, g));
  train::trainer loop{std::move(hooks)};
  return loop.run(0, o.steps, [&](std::int64_t step) -> result<train::step_report> {
    auto started = clock_type::now();
    auto b = log.next(o.batch_size);
    auto r = run({m.loss}, feeds_of(m, b), {m.train});
    if (!r)
      return r.error();
    train::step_report report;
    report.step = step;
    report.epoch = 1;
    report.loss = r->at(0).scalar_value<double>();
    report.examples = o.batch_size;
    report.seconds = std::chrono::duration<double>(clock_type::now() - started).count();
    return report;
  });
}

/// The held-out AUC and the true model's, in batches (lookups of unseen ids make rows: the wide
/// part's are zeros), said as the last lines after "examples/s: N".
status report_wide_deep(const train_options& o, const wide_deep_model& m, const train::click_log& log,
                        const run_step_fn& run, const train::throughput_meter& throughput,
                        progress_printer& progress) {
  std::vector<double> scores;
  std::vector<float> labels;
  auto held_out = log.evaluation(evaluation_examples);
  for (std::int64_t at = 0; at < evaluation_examples; at += o.batch_size) {
    auto n = std::min<std::int64_t>(o.batch_size, evaluation_examples - at);
    auto slice = [&](const tensor& t) {
      std::vector<std::int64_t> v(t.data<std::int64_t>() + at, t.data<std::int64_t>() + at + n);
      return tensor::from_vector<std::int64_t>(v, tensor_shape{std::vector<std::int64_t>{n}});
    };
    std::vector<float> l(held_out.label_values.begin() + at, held_out.label_values.begin() + at + n);
    auto r = run({m.logits}, {{m.user, slice(held_out.user)}, {m.item, slice(held_out.item)},
                              {m.context, slice(held_out.context)}, {m.cross, slice(held_out.cross)}},
                 {});
    if (!r)
      return r.error();
    for (std::int64_t i = 0; i < n; ++i)
      scores.push_back(r->at(0).data<float>()[i]);
    labels.insert(labels.end(), l.begin(), l.end());
  }
  auto model_auc = train::auc(scores, labels);
  auto ceiling = train::auc(held_out.true_logits, held_out.label_values);
  say_examples_per_second(progress, throughput);
  char line[240];
  std::snprintf(line, sizeof line,
                "auc: %.4f (ceiling, the true model's: %.4f; %lld held-out examples)", model_auc,
                ceiling, static_cast<long long>(evaluation_examples));
  progress.line(line);
  return {};
}

} // namespace

int run_wide_deep(const train_options& o, const training_target& where) {
  if (auto st = prepare_output_directories(o); !st.ok())
    return fail(st);
  progress_printer progress{o.log_every};
  graph g;
  g.seed = static_cast<std::int64_t>(o.seed);
  std::optional<replica_device_setter_options> placement;
  if (where.layout) {
    // In-graph: the tables on the ps tasks, the rest on the first worker.
    placement.emplace();
    placement->ps_tasks = where.layout->ps_tasks;
    placement->ps_device = "/job:" + where.layout->ps_job;
    placement->worker_device = "/job:" + where.layout->worker_job + "/task:0";
  }
  auto m = build_wide_deep(g, o, placement, false);
  if (!m)
    return fail(m.error());
  session s{g, where.options};
  if (auto init = s.run_targets({ops::global_variables_initializer(g)}); !init.ok())
    return fail(init);
  train::click_log log{{o.ids_per_field, o.seed}};
  train::metrics_log metrics;
  if (auto st = metrics.open(o.output_dir + "/metrics.csv"); !st.ok())
    return fail(st);
  train::throughput_meter throughput;
  auto run = steps_on(s);
  if (auto trained = train_wide_deep(o, *m, log, run, g, progress, &metrics, throughput); !trained.ok())
    return fail(trained);
  if (auto st = train::write_curve_svg(o.output_dir + "/curve.svg", metrics.rows(), "actorflow: wide-deep");
      !st.ok())
    return fail(st);
  if (auto st = report_wide_deep(o, *m, log, run, throughput, progress); !st.ok())
    return fail(st);
  return 0;
}

int run_wide_deep_worker(const train_options& o, const cluster_spec& cluster, const std::string& job,
                         int task) {
  if (auto flags = check_worker_flags(o, cluster, job, task, 0); !flags.ok())
    return usage_error(flags);
  const bool chief = task == 0;
  if (chief)
    if (auto st = prepare_output_directories(o); !st.ok())
      return fail(st);
  progress_printer progress{o.log_every};
  graph g;
  g.seed = static_cast<std::int64_t>(o.seed);
  const auto me = "/job:" + job + "/task:" + std::to_string(task);
  // Every worker declares the same tables (names, seed: the same rows for an id) and variables
  // on the ps tasks, which hold one copy of each.
  auto m = build_wide_deep(g, o, worker_placement(o, cluster, me), true);
  if (!m)
    return fail(m.error());
  auto worker = between_graph_worker::start(o, cluster, job, task, g, *m->global_step, progress);
  if (!worker)
    return fail(worker.error());
  // One click log (one true model), each worker on a stretch of its own.
  train::click_log log{{o.ids_per_field, o.seed, static_cast<std::uint64_t>(task) << 40}};
  train::metrics_log metrics;
  if (chief)
    if (auto st = metrics.open(o.output_dir + "/metrics.csv"); !st.ok())
      return fail(st);
  progress.line("worker " + me + (chief ? " (chief)" : "") +
                ": wide-deep with its tables and variables on the " +
                std::to_string((*worker)->ps_tasks()) + " " + o.ps_job + " task(s)");
  train::throughput_meter throughput;
  auto trained = train_wide_deep(o, *m, log, (*worker)->steps(), g, progress,
                                 chief ? &metrics : nullptr, throughput);
  if (!trained.ok())
    return fail(trained);
  return (*worker)->end(
    [&](const run_step_fn& run) { return report_wide_deep(o, *m, log, run, throughput, progress); },
    throughput, progress);
}

} // namespace actorflow::train_app

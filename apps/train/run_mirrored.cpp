// actorflow-train --strategy mirrored: MultiWorkerMirroredStrategy without parameter servers.
// Every worker process serves its own task, builds the whole model there and keeps its own copy
// of the variables; the chief's initial values are broadcast to all; each step every worker
// computes the gradients of its share of the global batch, and the graph all-reduces their
// mean in buckets (graph/collective_ops.hpp: a bucket goes as soon as the backward pass made
// its gradients, while the pass goes on) and applies it to its copy, so the copies stay equal
// (--check-replicas compares them). The chief evaluates and writes metrics and, with
// --checkpoint-dir, a checkpoint each epoch, from which --resume starts every worker.
#include "train/modes.hpp"
#include "actors/collective.hpp"
#include "actors/server.hpp"
#include "graph/collective_ops.hpp"
#include "graph/ops.hpp"

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>

namespace actorflow::train_app {

namespace {

/// Restarts after lost workers before a run gives up (each also bounded by --init-timeout).
constexpr int max_restarts = 5;

/// The name under which each worker offers its group to its graph's CollectiveReduce nodes.
constexpr const char* gradient_group = "mirrored_gradients";

/// FNV-1a over a tensor's bytes: equal replicas hash alike.
std::int64_t hash_of(const tensor& t) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(t.raw_data());
  for (std::size_t i = 0; i < t.bytes(); ++i)
    h = (h ^ p[i]) * 1099511628211ull;
  return static_cast<std::int64_t>(h);
}

/// The values of `vars`, read in one run of `s`.
result<std::vector<tensor>> values_of(session& s, const std::vector<variable>& vars) {
  std::vector<output> reads;
  for (auto& v : vars)
    reads.push_back(v.read);
  return s.run(reads);
}

/// Compares a hash of every variable across the workers; an error naming the first variable
/// (and worker) that differs from the chief's.
status check_replicas(session& s, collective_group& group, const std::vector<variable>& vars,
                      std::int64_t step) {
  auto values = values_of(s, vars);
  if (!values)
    return values.error();
  tensor hashes{dtype::int64, tensor_shape{static_cast<std::int64_t>(vars.size())}};
  for (std::size_t i = 0; i < vars.size(); ++i)
    hashes.data<std::int64_t>()[i] = hash_of(values->at(i));
  auto all = group.all_gather(hashes);
  if (!all)
    return all.error().with_context("comparing the replicas at step " + std::to_string(step));
  auto n = static_cast<std::int64_t>(vars.size());
  for (std::size_t i = 0; i < vars.size(); ++i)
    for (int w = 1; w < group.size(); ++w)
      if (all->data<std::int64_t>()[w * n + static_cast<std::int64_t>(i)] !=
          all->data<std::int64_t>()[i])
        return make_error(errc::data_loss, "the replicas differ at step " + std::to_string(step) +
                                             ": variable '" + vars[i].name() + "' of worker " +
                                             std::to_string(w) + " is not the chief's");
  return {};
}

/// Every replica takes the chief's values (`vars`, the optimizer's slots among them) through
/// `value_feeds` and `assigns`, and its step (`chiefs_step` on the chief): the step they all go
/// on from.
result<std::int64_t> take_chiefs_state(session& s, collective_group& group,
                                       const std::vector<variable>& vars,
                                       const std::vector<output>& value_feeds,
                                       const std::vector<output>& assigns, std::int64_t chiefs_step) {
  auto values = values_of(s, vars);
  if (!values)
    return values.error();
  feed_list feeds;
  for (std::size_t i = 0; i < values->size(); ++i) {
    auto chiefs = group.broadcast(values->at(i), 0);
    if (!chiefs)
      return chiefs.error().with_context("broadcasting the chief's values");
    feeds.emplace_back(value_feeds[i], std::move(*chiefs));
  }
  AF_RETURN_IF_ERROR(s.run_targets(assigns, feeds));
  auto step = group.broadcast(tensor::from_vector<std::int64_t>({chiefs_step}, {1}), 0);
  if (!step)
    return step.error().with_context("broadcasting the chief's step");
  return step->data<std::int64_t>()[0];
}

} // namespace

int run_mirrored(const train_options& o, const cluster_spec& cluster, const std::string& job,
                 int task) {
  if (!cluster.has_job(job))
    return usage_error(make_error(errc::invalid_argument, "the cluster has no job '" + job + "' (--job)"));
  const int workers = cluster.num_tasks(job);
  if (task < 0 || task >= workers)
    return usage_error(make_error(errc::invalid_argument, "job '" + job + "' has " +
                                                            std::to_string(workers) +
                                                            " tasks, not task " + std::to_string(task)));
  const bool chief = task == 0;
  const auto me = "/job:" + job + "/task:" + std::to_string(task);
  if (chief)
    if (auto st = prepare_output_directories(o); !st.ok())
      return fail(st);
  auto data = load_data(o);
  if (!data)
    return fail(data.error());
  // One shared order of the training set; worker k takes positions k, k + N, ... of each global
  // batch of N x --batch-size, as --data-order global's between-graph workers do.
  batch_options shuffled;
  shuffled.batch_size = o.batch_size;
  shuffled.seed = o.seed;
  shuffled.drop_last = true;
  shuffled.replicas = workers;
  shuffled.replica = task;
  auto batches = batch_iterator::create(data->train, shuffled);
  if (!batches)
    return fail(batches.error());
  const auto steps_per_epoch = batches->batches_per_epoch();
  const auto total_steps = train::classifier_steps(o, steps_per_epoch);

  graph g;
  g.seed = static_cast<std::int64_t>(o.seed);
  auto opt = train::make_optimizer(o.optimizer, o.learning_rate);
  auto kind = train::classifier_named(o.model);
  if (!kind)
    return fail(kind.error());
  std::optional<train::classifier_model> model;
  std::vector<output> value_feeds, assigns;
  output apply;
  int buckets = 0;
  {
    auto here = g.device(me);
    // Its own train op is never run: the step applies the all-reduced gradients instead.
    model = train::build_classifier(g, *opt, *kind);
    std::vector<output> gradients;
    std::vector<variable> variables;
    for (auto& [gradient, var] : opt->compute_gradients(model->loss, model->weights)) {
      gradients.push_back(gradient);
      variables.push_back(var);
    }
    ops::bucket_options bucketing;
    bucketing.bytes = static_cast<std::uint64_t>(o.bucket_mb * (1 << 20));
    bucketing.first_bytes = std::min<std::uint64_t>(bucketing.bytes, std::uint64_t{1} << 20);
    bucketing.reduction = "mean";
    auto reduced = ops::all_reduce_in_buckets(gradients, gradient_group, bucketing, &buckets);
    std::vector<gradient_and_variable> averaged;
    for (std::size_t i = 0; i < reduced.size(); ++i)
      averaged.emplace_back(reduced[i], variables[i]);
    apply = opt->apply_gradients(averaged, "mirrored_apply");
  }
  // Every variable, the optimizer's slots too: what the chief checkpoints and broadcasts.
  saver checkpoints_saver{g};
  auto& replicated = checkpoints_saver.variables();
  {
    auto here = g.device(me);
    for (auto& var : replicated) {
      value_feeds.push_back(ops::placeholder(g, var.read.type()));
      assigns.push_back(ops::assign(var, value_feeds.back()));
    }
  }
  if (!g.status().ok())
    return fail(g.status());
  if (!checkpoints_saver.status().ok())
    return fail(checkpoints_saver.status());
  auto& m = *model;

  server_options serving;
  serving.in_default_system = true;
  serving.threads = o.threads;
  serving.device_filters = {me}; // no ps: the graph is this task's alone
  serving.bind_host = o.bind;
  serving.connect_timeout_seconds = o.connect_timeout_seconds;
  auto served = server::start(std::make_shared<const cluster_spec>(cluster), job, task, serving);
  if (!served)
    return fail(served.error());
  session_options options;
  options.master = (*served)->local_master();
  options.timeout_seconds = o.step_timeout_seconds;
  options.inter_op_parallelism_threads = o.threads;
  options.intra_op_parallelism_threads = o.threads;
  options.log_device_placement = o.log_device_placement;
  options.mixed_precision = o.mixed_precision;
  session s{g, options};
  if (auto init = s.run_targets({ops::global_variables_initializer(g)}); !init.ok())
    return fail(init);
  // The chief alone writes checkpoints (every replica holds the same values) and, with
  // --resume, restores the latest; the others get its values and step below.
  auto checkpoints = checkpoints_of(o, checkpoints_saver, chief);
  auto resumed = chief ? resume(o, checkpoints, s) : result<std::int64_t>{std::int64_t{0}};
  if (!resumed)
    return fail(resumed.error());
  progress_printer progress{o.log_every};
  // The group, every replica on the chief's values and step, and the batches from there: at
  // the start, and again after a lost worker came back. Each group's key is its members'
  // incarnations', so a group formed again shares nothing with the broken one.
  std::optional<collective_group> group;
  task_collective_registry::offer offered;
  std::int64_t step = 0;
  // The task's CPU, where the model's nodes (and so its CollectiveReduce nodes) are placed.
  device_name cpu;
  cpu.job = job;
  cpu.replica = 0;
  cpu.task = task;
  cpu.type = "CPU";
  cpu.id = 0;
  const auto device = cpu.to_string();
  auto form_group = [&](std::int64_t chiefs_step) -> status {
    offered.reset();
    auto joined = collective_group::join(**served, cluster, job, task, 1, o.init_timeout_seconds, true);
    if (!joined)
      return joined.error();
    group.emplace(std::move(*joined));
    offered = group->offer_to_graph(gradient_group, device);
    auto taken = take_chiefs_state(s, *group, replicated, value_feeds, assigns, chiefs_step);
    if (!taken)
      return taken.error();
    step = *taken;
    // The batch order is a function of the seed: going on from a step takes its batches.
    batches->seek(step);
    return {};
  };
  if (auto formed = form_group(*resumed); !formed.ok())
    return fail(formed);
  if (!chief && step > 0)
    progress.line("going on from the chief's step " + std::to_string(step));
  progress.line("worker " + me + (chief ? " (chief)" : "") + ": mirrored over " +
                std::to_string(workers) + " workers (rank " + std::to_string(group->rank()) +
                "), its share (1 in " + std::to_string(workers) + ") of one shared order of " +
                std::to_string(data->train.size()) + ", gradients in " + std::to_string(buckets) +
                (buckets == 1 ? " bucket" : " buckets"));
  train::metrics_log metrics;
  if (chief)
    if (auto st = begin_metrics(o, step, metrics); !st.ok())
      return fail(st);
  train::throughput_meter throughput;
  auto make_loop = [&] {
    std::vector<std::unique_ptr<train::training_hook>> hooks;
    hooks.push_back(train::make_finite_loss_hook());
    hooks.push_back(progress_hook(o, total_steps, throughput, progress, chief ? &metrics : nullptr, g));
    if (checkpoints)
      hooks.push_back(train::make_checkpoint_hook(
        [&](std::int64_t at) { return checkpoints.writer().save(s, at); }, steps_per_epoch,
        total_steps));
    return train::trainer{std::move(hooks)};
  };
  auto one_step = [&](std::int64_t next) -> result<train::step_report> {
    auto started = clock_type::now();
    auto& b = batches->next();
    auto r = s.run({m.loss, m.correct}, {{m.images, b.images}, {m.labels, b.one_hot}}, {apply});
    if (!r)
      return r.error().with_context("step " + std::to_string(next));
    if (o.check_replicas > 0 && next % o.check_replicas == 0)
      if (auto st = check_replicas(s, *group, m.weights, next); !st.ok())
        return st;
    return mlp_report(next, steps_per_epoch, *r, b, started);
  };
  auto trained = make_loop().run(step, total_steps, one_step);
  // A lost worker: as TF's MWMS with a checkpoint, every worker goes on from the chief's latest
  // once the lost one is back (within --init-timeout), each restart said.
  for (int restarts = 0; !trained.ok() && trained.code() == errc::unavailable &&
                         !o.checkpoint_dir.empty() && restarts < max_restarts;
       ++restarts) {
    progress.line("a worker was lost (" + trained.message() + "): waiting up to " +
                  std::to_string(o.init_timeout_seconds) +
                  " s for every worker, then going on from the chief's latest checkpoint");
    std::int64_t chiefs_step = 0;
    if (chief) {
      auto restored = checkpoints.restore_latest(s, warn);
      if (!restored) {
        trained = restored.error();
        break;
      }
      if (*restored)
        chiefs_step = (*restored)->step;
      else if (auto init = s.run_targets({ops::global_variables_initializer(g)}); !init.ok()) {
        trained = init;
        break;
      }
    }
    if (auto formed = form_group(chiefs_step); !formed.ok()) {
      trained = formed;
      break;
    }
    // The steps after the restored one run again: their first rows go.
    if (chief)
      if (auto st = metrics.rewind(step); !st.ok()) {
        trained = st;
        break;
      }
    progress.line("going on from step " + std::to_string(step));
    trained = make_loop().run(step, total_steps, one_step);
  }
  if (!trained.ok()) {
    // Out of restarts, or none possible: the workers can be run again with --resume.
    if (trained.code() == errc::unavailable && !o.checkpoint_dir.empty())
      std::cerr << "actorflow-train: run every worker again with --resume: they go on from "
                   "the chief's latest checkpoint in " << o.checkpoint_dir << '\n';
    return fail(trained);
  }
  if (auto written = checkpoints.written(); !written.ok())
    return fail(written);
  if (o.check_replicas > 0) {
    if (auto st = check_replicas(s, *group, m.weights, total_steps); !st.ok())
      return fail(st);
    progress.line("replicas equal after " + std::to_string(total_steps) + " steps");
  }
  if (!chief) {
    say_examples_per_second(progress, throughput);
    return 0;
  }
  train::data_parallel_mlp single;
  single.towers.push_back({m.images, m.labels, m.loss, m.correct});
  auto accuracy = evaluate(s, single, data->test);
  if (!accuracy)
    return fail(accuracy.error());
  if (auto st = report_results(o, g, metrics,
                               "actorflow: " + model_title(o) + " mirrored (" + o.optimizer + ")",
                               throughput, *accuracy, progress);
      !st.ok())
    return fail(st);
  return 0;
}

} // namespace actorflow::train_app

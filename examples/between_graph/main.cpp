// One worker of a between-graph job: its own graph (a linear model of 8 features), the variables
// round robin on the ps tasks, a monitored_session that makes them ready (the chief initialises
// or restores from --checkpoint-dir, the others wait), checkpoints, stops at --steps global steps
// and outlives a lost ps; asynchronous, or with --sync in rounds of every worker's gradient
// (sync_replicas_optimizer). Start the ps tasks with actorflow-worker, then one per worker:
//   between_graph --cluster '{"ps": [...], "worker": [...]}' --task N [--checkpoint-dir D] [--sync]
#include "actors/server.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "train/monitored_session.hpp"
#include "train/sync_replicas_optimizer.hpp"

#include <cstdio>
#include <optional>
#include <random>
#include <string>

using namespace actorflow;

constexpr int features = 8;

int main(int argc, char** argv) {
  std::string spec, checkpoint_dir;
  int task = 0, steps = 400;
  bool sync = false;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value = i + 1 < argc ? argv[i + 1] : "";
    if (flag == "--sync") { sync = true; continue; }
    ++i;
    if (flag == "--cluster") spec = value;
    else if (flag == "--task") task = std::stoi(value);
    else if (flag == "--steps") steps = std::stoi(value);
    else if (flag == "--checkpoint-dir") checkpoint_dir = value;
  }
  auto cluster = cluster_spec::parse(spec);
  if (!cluster)
    return std::fprintf(stderr, "--cluster: %s\n", cluster.error().message().c_str()), 2;
  auto shared = std::make_shared<const cluster_spec>(*cluster);
  auto me = "/job:worker/task:" + std::to_string(task);

  // This worker is a task of the cluster too; its master places over the ps tasks and itself.
  server_options serving;
  serving.device_filters = {"/job:ps", me};
  auto served = server::start(shared, "worker", task, serving);
  if (!served)
    return std::fprintf(stderr, "%s\n", served.error().message().c_str()), 1;

  graph g;
  output x, y, loss, train;
  actorflow::variable global_step;
  gradient_descent_optimizer sgd{0.1};
  std::optional<train::sync_replicas_optimizer> rounds;
  {
    replica_device_setter_options placement_options;
    placement_options.worker_device = me;
    auto placement = replica_device_setter_for(*cluster, placement_options);
    if (!placement)
      return std::fprintf(stderr, "%s\n", placement.error().message().c_str()), 1;
    auto on_cluster = g.device(*placement);
    x = ops::placeholder(g, dtype::float32, {-1, features}, "x");
    y = ops::placeholder(g, dtype::float32, {-1, 1}, "y");
    auto w = ops::variable(g, ops::zeros(g, {features, 1}), "w");
    auto b = ops::variable(g, ops::zeros(g, {1}), "b");
    global_step = ops::variable(g, ops::constant(g, std::int64_t{0}), "global_step");
    loss = ops::reduce_mean(ops::square(ops::sub(ops::add(ops::matmul(x, w), b), y)), {}, false, "loss");
    if (sync) {
      // Every round averages both workers' gradients; the rounds are the global step.
      rounds.emplace(sgd, global_step, train::sync_replicas_settings{2, 2});
      train = rounds->minimize(loss, {w, b});
    } else {
      train = ops::group(g, {sgd.minimize(loss, {w, b}),
                             ops::assign_add(global_step, ops::constant(g, std::int64_t{1}))}, "train");
    }
  }

  train::monitored_session_options o;
  o.session.target = (*served)->target();
  o.global_step = global_step;
  o.is_chief = task == 0;
  o.checkpoint_dir = checkpoint_dir;
  o.save_checkpoint_steps = 100;
  o.cluster = shared;
  if (rounds)
    o.hooks.push_back(rounds->make_session_run_hook(task == 0, {shared, task}));  // first
  o.hooks.push_back(train::stop_at_step_hook(global_step.read, steps));
  o.hooks.push_back(train::nan_loss_hook(loss, global_step.read));
  auto session = train::monitored_session::create(g, std::move(o));
  if (!session)
    return std::fprintf(stderr, "%s\n", session.error().message().c_str()), 1;

  // This worker's data: y = x . (1, 2, ..., 8) / 8 + 0.5, x uniform in [-1, 1], its own seed.
  std::mt19937 random{static_cast<unsigned>(17 + task)};
  std::uniform_real_distribution<float> uniform{-1.f, 1.f};
  auto batch = [&] {
    std::vector<float> xs(32 * features), ys(32, 0.5f);
    for (int r = 0; r < 32; ++r)
      for (int c = 0; c < features; ++c) {
        xs[r * features + c] = uniform(random);
        ys[r] += xs[r * features + c] * static_cast<float>(c + 1) / features;
      }
    return feed_list{{x, tensor::from_vector<float>(xs, {32, features})},
                     {y, tensor::from_vector<float>(ys, {32, 1})}};
  };
  double last = 0;
  while (!(*session)->should_stop()) {
    auto r = (*session)->run({loss}, batch(), {train});
    if (!r)
      return std::fprintf(stderr, "%s\n", r.error().message().c_str()), 1;
    last = r->at(0).scalar_value<double>();
  }
  if (auto closed = (*session)->close(); !closed.ok())
    return std::fprintf(stderr, "%s\n", closed.message().c_str()), 1;
  std::printf("worker %d: global step %lld, last loss %.6f\n", task,
              static_cast<long long>((*session)->global_step()), last);
  return 0;
}

// SPEC's classic in-graph replication example on a real cluster:
//   in_graph_linreg --cluster '{"canshu": ["127.0.0.1:2221", "127.0.0.1:2222"],
//                               "gongzuo": ["127.0.0.1:2223", "127.0.0.1:2224"]}'
// with one actorflow-worker per task already running. Weights live on /job:canshu/task:0,
// biases on /job:canshu/task:1, the model and loss on /job:gongzuo/task:0 and the optimizer on
// /job:gongzuo/task:1. Prints "step W b" every 20 steps like actorflow-train --model linreg.
// For now this client is its own master: it places and partitions the graph and talks to the
// tasks' device actors directly (a separate master service comes later).
#include "actors/cluster_spec.hpp"
#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"

#include <cstdio>
#include <iostream>
#include <memory>
#include <random>
#include <string>

using namespace actorflow;

int main(int argc, char** argv) {
  std::string cluster_text;
  int steps = 1000;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--cluster" && i + 1 < argc)
      cluster_text = argv[++i];
    else if (arg == "--steps" && i + 1 < argc)
      steps = std::atoi(argv[++i]);
    else if (arg == "--target" && i + 1 < argc)
      ++i; // accepted for compatibility with TensorFlow's examples; the client is the master
    else {
      std::cerr << "usage: in_graph_linreg --cluster SPEC [--steps N]\n";
      return 2;
    }
  }
  if (cluster_text.empty()) {
    std::cerr << "in_graph_linreg: --cluster is required\n";
    return 2;
  }
  auto spec = cluster_spec::parse(cluster_text);
  if (!spec) {
    std::cerr << "in_graph_linreg: " << spec.error().message() << '\n';
    return 2;
  }

  std::mt19937_64 rng{1};
  std::uniform_real_distribution<float> uniform{0.f, 1.f};
  std::vector<float> x_data(100), y_data(100);
  for (std::size_t i = 0; i < x_data.size(); ++i) {
    x_data[i] = uniform(rng);
    y_data[i] = x_data[i] * 0.1f + 0.3f;
  }
  graph g;
  g.seed = 1;
  actorflow::variable w, b;
  {
    auto d = g.device("/job:canshu/task:0");
    w = ops::variable(g, ops::random_uniform(g, {1}, -1.0, 1.0), "Weights");
  }
  {
    auto d = g.device("/job:canshu/task:1");
    b = ops::variable(g, ops::zeros(g, {1}), "biases");
  }
  output loss;
  {
    auto d = g.device("/job:gongzuo/task:0");
    auto y = w * ops::constant(g, x_data, {100}) + b;
    loss = ops::reduce_mean(ops::square(y - ops::constant(g, y_data, {100})));
  }
  output train;
  {
    auto d = g.device("/job:gongzuo/task:1");
    gradient_descent_optimizer sgd{0.5};
    train = sgd.minimize(loss);
  }
  if (!g.status().ok()) {
    std::cerr << "in_graph_linreg: " << g.status().message() << '\n';
    return 1;
  }
  session_options options;
  options.cluster = std::make_shared<cluster_spec>(*spec);
  session s{g, options};
  if (auto st = s.run_targets({ops::global_variables_initializer(g)}); !st.ok()) {
    std::cerr << "in_graph_linreg: " << st.message() << '\n';
    return 1;
  }
  for (int step = 0; step < steps; ++step) {
    if (auto st = s.run_targets({train}); !st.ok()) {
      std::cerr << "in_graph_linreg: " << st.message() << '\n';
      return 1;
    }
    if (step % 20 == 0 || step == steps - 1) {
      auto values = s.run({w.read, b.read});
      if (!values) {
        std::cerr << "in_graph_linreg: " << values.error().message() << '\n';
        return 1;
      }
      std::printf("%d %.6f %.6f\n", step, values->at(0).scalar_value<double>(),
                  values->at(1).scalar_value<double>());
      std::fflush(stdout);
    }
  }
  return 0;
}

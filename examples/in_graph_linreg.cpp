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
#include "train/models.hpp"

#include <cstdio>
#include <iostream>
#include <memory>
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

  graph g;
  gradient_descent_optimizer sgd{0.5};
  auto m = train::build_linreg(g, sgd, 1, train::classic_in_graph_devices());
  auto& w = m.weights;
  auto& b = m.biases;
  auto& train = m.train;
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

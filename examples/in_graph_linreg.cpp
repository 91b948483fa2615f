// SPEC's classic in-graph replication example on a real cluster:
//   in_graph_linreg --cluster '{"canshu": ["127.0.0.1:2221", "127.0.0.1:2222"],
//                               "gongzuo": ["127.0.0.1:2223", "127.0.0.1:2224"]}'
// with one actorflow-worker per task already running. Weights live on /job:canshu/task:0,
// biases on /job:canshu/task:1, the model and loss on /job:gongzuo/task:0 and the optimizer on
// /job:gongzuo/task:1. Prints "step W b" every 20 steps like actorflow-train --model linreg.
// With --target caf://HOST:PORT the session runs on that master (a worker started with
// --master, or actorflow-master); without, this client is the cluster's master itself.
#include "actors/cluster_spec.hpp"
#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "support/flags.hpp"
#include "train/models.hpp"

#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

using namespace actorflow;

int main(int argc, char** argv) {
  // A peer or pipe reader that goes away fails a write (EPIPE) instead of killing the program.
  std::signal(SIGPIPE, SIG_IGN);
  std::string cluster_text, target;
  int steps = 1000;
  bool log_device_placement = false;
  apps::flag_set flags;
  flags.values = {
    {"--cluster", [&](const std::string& v) { cluster_text = v; return status{}; }},
    {"--target", [&](const std::string& v) { target = v; return status{}; }},
    {"--steps", [&](const std::string& v) { return apps::parse_int_flag("--steps", v, 1, steps); }},
  };
  flags.switches = {{"--log-device-placement", &log_device_placement}};
  if (auto bad = apps::parse_flags(argc, argv, flags); !bad.ok()) {
    std::cerr << "in_graph_linreg: " << bad.message()
              << "\nusage: in_graph_linreg [--target caf://HOST:PORT] --cluster SPEC [--steps N] "
                 "[--log-device-placement]\n";
    return 2;
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
  options.log_device_placement = log_device_placement;
  if (!target.empty())
    options.target = target;
  else
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

// Distributed step rate of SPEC's classic example (examples/in_graph_linreg.cpp): Weights on
// /job:canshu/task:0, biases on /job:canshu/task:1, the model and loss on /job:gongzuo/task:0,
// the SGD update (0.5) on /job:gongzuo/task:1; steps/s of the training op
//   (a) in one process: an in-process cluster with the same jobs and tasks (the same four
//       partitions through the same master and task actors, local messages), and
//   (b) on four actorflow-worker processes on free loopback ports, this process the client:
//       once as its own master, once on the master of /job:gongzuo/task:0, and once more as
//       its own master with colocate_gradients_with_ops (the gradients beside the model),
// beside PyTorch 1.13's torch.distributed.rpc doing the same parameter-server layout
// (bench/torch_rpc_ps.py: 2 ps processes holding W and b, one trainer) in the same run.
#include "support/processes.hpp"
#include "bench_util.hpp"
#include "train/models.hpp"

#include "actors/cluster_spec.hpp"
#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#ifndef ACTORFLOW_BENCH_SOURCE_DIR
#define ACTORFLOW_BENCH_SOURCE_DIR "bench"
#endif

using namespace actorflow;

namespace {

constexpr int warmup_steps = 30;
constexpr int timed_steps = 1500;

struct classic_graph {
  graph g;
  actorflow::variable w, b;
  output train;
  /// pins[i]: where the example's /job:canshu/task:0, /job:canshu/task:1, /job:gongzuo/task:0
  /// and /job:gongzuo/task:1 go.
  classic_graph(const std::vector<std::string>& pins, const gradient_options& gradients) {
    gradient_descent_optimizer sgd{0.5};
    auto m = train::build_linreg(g, sgd, 1, {pins[0], pins[1], pins[2], pins[3]}, gradients);
    w = m.weights;
    b = m.biases;
    train = m.train;
  }
};

/// Steps/s of the training op on a session with `options`; checks that W and b converged.
result<double> step_rate(const std::vector<std::string>& pins, const session_options& options,
                         const char* label, const gradient_options& gradients = {}) {
  classic_graph m{pins, gradients};
  AF_RETURN_IF_ERROR(m.g.status());
  session s{m.g, options};
  AF_RETURN_IF_ERROR(s.run_targets({ops::global_variables_initializer(m.g)}));
  for (int i = 0; i < warmup_steps; ++i)
    AF_RETURN_IF_ERROR(s.run_targets({m.train}));
  status failure;
  auto seconds = bench::time_seconds([&] {
    for (int i = 0; i < timed_steps && failure.ok(); ++i)
      failure = s.run_targets({m.train});
  });
  AF_RETURN_IF_ERROR(failure);
  auto values = s.run({m.w.read, m.b.read});
  if (!values)
    return values.error();
  double w = values->at(0).scalar_value<double>(), b = values->at(1).scalar_value<double>();
  std::fprintf(stderr, "%s: %d steps in %.3f s; W = %.6f, b = %.6f\n", label, timed_steps, seconds,
               w, b);
  if (std::abs(w - 0.1) > 1e-3 || std::abs(b - 0.3) > 1e-3)
    std::fprintf(stderr, "warning: %s did not converge to W = 0.1, b = 0.3\n", label);
  return timed_steps / seconds;
}

} // namespace

int main() {
  const std::vector<std::string> pins{"/job:canshu/task:0", "/job:canshu/task:1",
                                      "/job:gongzuo/task:0", "/job:gongzuo/task:1"};
  // (a) one process: an in-process cluster of the same four tasks.
  session_options local;
  local.in_process_cluster = {{"canshu", 2}, {"gongzuo", 2}};
  auto in_process = step_rate(pins, local, "in-process");
  if (!in_process) {
    std::fprintf(stderr, "error: in-process: %s\n", in_process.error().to_string().c_str());
    return 1;
  }
  bench::emit({"cluster_steps_per_s_in_process", *in_process, "steps/s", std::nullopt, std::nullopt,
               "classic example, in-process cluster of the same 4 tasks"});

  // (b) four worker processes on loopback; /job:gongzuo/task:0 also serves as master.
  result<double> four_processes = status{errc::internal, "no cluster"};
  result<double> on_remote_master = status{errc::internal, "no cluster"};
  result<double> colocated = status{errc::internal, "no cluster"};
  {
    actorflow::testing::cluster_processes cluster{
      ACTORFLOW_WORKER_BINARY, {{"canshu", 2}, {"gongzuo", 2}}, 1,
      [](const std::string& job, int task) {
        return job == "gongzuo" && task == 0 ? std::vector<std::string>{"--master"}
                                             : std::vector<std::string>{};
      }};
    if (!cluster.ready())
      return 1;
    auto spec = cluster_spec::parse(cluster.spec_json());
    if (!spec) {
      std::fprintf(stderr, "error: %s\n", spec.error().to_string().c_str());
      return 1;
    }
    session_options remote;
    remote.cluster = std::make_shared<cluster_spec>(*spec);
    remote.timeout_seconds = 30;
    four_processes = step_rate(pins, remote, "4 processes, client as master");
    // The gradients beside their forward ops (as actorflow placed them before following TF1's
    // rule): gongzuo:1 then computes nothing, and a step crosses fewer task boundaries.
    gradient_options beside_ops;
    beside_ops.colocate_gradients_with_ops = true;
    colocated = step_rate(pins, remote, "4 processes, gradients colocated with ops", beside_ops);
    session_options target;
    target.target = "caf://" + cluster.address(2);
    target.timeout_seconds = 30;
    on_remote_master = step_rate(pins, target, "4 processes, master on gongzuo:0");
  }
  for (auto* r : {&four_processes, &on_remote_master, &colocated})
    if (!*r) {
      std::fprintf(stderr, "error: 4 processes: %s\n", r->error().to_string().c_str());
      return 1;
    }

  auto torch = bench::python_json_number(
    ACTORFLOW_BENCH_SOURCE_DIR, "torch_rpc_ps.py",
    "--steps " + std::to_string(timed_steps) + " --warmup " + std::to_string(warmup_steps),
    "steps_per_second");
  bench::figure f{"cluster_steps_per_s_4_processes", *four_processes, "steps/s"};
  f.note = "classic example, 4 actorflow-worker processes on loopback";
  if (torch) {
    f.baseline = *torch;
    f.ratio = *four_processes / *torch;
    f.note += "; baseline: torch.distributed.rpc, 2 ps + 1 trainer processes";
  }
  bench::emit(f);
  bench::figure g{"cluster_steps_per_s_4_processes_remote_master", *on_remote_master, "steps/s"};
  g.note = "classic example, 4 actorflow-worker processes, session on the master of gongzuo:0";
  if (torch) {
    g.baseline = *torch;
    g.ratio = *on_remote_master / *torch;
  }
  bench::emit(g);
  bench::figure c{"cluster_steps_per_s_4_processes_tf1_vs_colocated_gradients", *four_processes,
                  "steps/s"};
  c.baseline = *colocated;
  c.ratio = *four_processes / *colocated;
  c.note = "TF1's gradient placement (on gongzuo:1, where minimize is called) against "
           "colocate_gradients_with_ops, same run";
  bench::emit(c);
  return 0;
}

// Per-node cost of the executor: a chain of 10,000 scalar float32 adds run as one session
// step on one inter-op and one intra-op thread, so the time is almost all scheduling and
// bookkeeping rather than arithmetic. Baseline: PyTorch eager doing the same adds in a Python
// loop (bench/torch_scalar_adds.py under /usr/bin/python3), measured in the same run.
//   bench_executor_overhead [adds] [steps]
#include "bench_util.hpp"

#include "actors/session.hpp"
#include "graph/ops.hpp"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <sys/wait.h>
#include <vector>

#ifndef ACTORFLOW_BENCH_SOURCE_DIR
#define ACTORFLOW_BENCH_SOURCE_DIR "bench"
#endif

namespace {

using namespace actorflow;

constexpr int warmup_steps = 3;

/// PyTorch's microseconds per eager scalar add, when Python and torch are there.
std::optional<double> torch_us_per_op(int adds, int steps) {
  return bench::python_json_number(ACTORFLOW_BENCH_SOURCE_DIR, "torch_scalar_adds.py",
                                   "--adds " + std::to_string(adds) + " --steps " +
                                     std::to_string(steps),
                                   "us_per_op");
}

} // namespace

int main(int argc, char** argv) {
  const int adds = bench::positive_arg(argc, argv, 1, 10000);
  const int steps = bench::positive_arg(argc, argv, 2, 30);

  graph g;
  auto x = ops::constant(g, 0.0f, "x0");
  auto c = ops::constant(g, 1.0f, "c");
  for (int i = 0; i < adds; ++i)
    x = ops::add(x, c, "add");
  if (!g.status().ok()) {
    std::cerr << "building the graph failed: " << g.status().to_string() << '\n';
    return 1;
  }

  session_options options;
  options.inter_op_parallelism_threads = 1;
  options.intra_op_parallelism_threads = 1;
  options.use_per_session_threads = true;
  session s{g, options};

  auto run_step = [&]() -> bool {
    auto fetched = s.run({x});
    if (!fetched) {
      std::cerr << "step failed: " << fetched.error().to_string() << '\n';
      return false;
    }
    float got = fetched->at(0).scalar_value<float>();
    if (got != static_cast<float>(adds)) {
      std::cerr << "wrong result: " << got << ", expected " << adds << '\n';
      return false;
    }
    return true;
  };

  // The first step builds the plan (placement, partitioning, kernels); report it separately.
  bool ok = true;
  double first = bench::time_seconds([&] { ok = run_step(); });
  if (!ok)
    return 1;
  for (int i = 1; i < warmup_steps; ++i)
    if (!run_step())
      return 1;
  auto measured = bench::step_seconds(steps, run_step);
  if (!measured)
    return 1;
  auto& times = *measured;
  double us_per_node = bench::median(times) / adds * 1e6;
  std::cerr << "executor_overhead: " << adds << " adds, first step " << first * 1e3
            << " ms, median step " << bench::median(times) * 1e3 << " ms over " << steps
            << " steps (min " << *std::min_element(times.begin(), times.end()) * 1e3
            << " ms)\n";

  bench::figure f{"executor_overhead_us_per_node", us_per_node, "us/node", {}, {}, {}};
  if (auto torch = torch_us_per_op(adds, steps)) {
    std::cerr << "executor_overhead: PyTorch eager " << *torch << " us/add\n";
    f.baseline = *torch;
    f.ratio = *torch / us_per_node;
    f.note = "lower is better; ratio = baseline / value (PyTorch 1.13 eager us per scalar add, "
             "one thread), so ratio > 1 means actorflow is faster";
  } else {
    f.note = "lower is better; no PyTorch baseline in this run";
  }
  bench::emit(f);
  return 0;
}

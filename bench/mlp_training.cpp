// MLP training throughput: actorflow-train's 784-256-128-10 network with SGD at 0.1, batch 128,
// on Fashion-MNIST, at 1 and 2 threads, beside PyTorch 1.13 training the same model on the same
// data in the same run (bench/torch_mlp.py). Also the time per step split into graph execution
// (the device running its partition) and framework overhead (everything else in session::run).
#include "bench_util.hpp"

#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "serialization/idx_reader.hpp"
#include "train/models.hpp"

#include <cstdio>
#include <string>

#ifndef ACTORFLOW_BENCH_SOURCE_DIR
#define ACTORFLOW_BENCH_SOURCE_DIR "bench"
#endif

using namespace actorflow;

namespace {

constexpr int batch_size = 128;
constexpr int warmup_steps = 20;
constexpr int timed_steps = 300;

struct measured {
  double examples_per_second = 0;
  double execution_ms = 0;
  double overhead_ms = 0;
};

result<measured> train_actorflow(const dataset& data, int threads) {
  graph g;
  g.seed = 1;
  auto opt = train::make_optimizer("sgd", 0.1);
  auto m = train::build_mlp(g, *opt);
  AF_RETURN_IF_ERROR(g.status());
  session_options options;
  options.inter_op_parallelism_threads = threads;
  options.intra_op_parallelism_threads = threads;
  options.use_per_session_threads = true;
  session s{g, options};
  AF_RETURN_IF_ERROR(s.run_targets({ops::global_variables_initializer(g)}));
  batch_options shuffled;
  shuffled.batch_size = batch_size;
  shuffled.seed = 1;
  shuffled.drop_last = true;
  auto batches = batch_iterator::create(data, shuffled);
  if (!batches)
    return batches.error();
  auto step = [&](step_stats* stats) -> status {
    auto& b = batches->next();
    auto r = s.run({}, {{m.images, b.images}, {m.labels, b.one_hot}}, {m.train}, stats);
    return r ? status{} : r.error();
  };
  for (int i = 0; i < warmup_steps; ++i)
    AF_RETURN_IF_ERROR(step(nullptr));
  double execution = 0, total_in_run = 0;
  status failure;
  auto seconds = bench::time_seconds([&] {
    for (int i = 0; i < timed_steps && failure.ok(); ++i) {
      step_stats stats;
      failure = step(&stats);
      execution += stats.execution_seconds;
      total_in_run += stats.total_seconds;
    }
  });
  AF_RETURN_IF_ERROR(failure);
  measured out;
  out.examples_per_second = timed_steps * batch_size / seconds;
  out.execution_ms = 1e3 * execution / timed_steps;
  out.overhead_ms = 1e3 * (total_in_run - execution) / timed_steps;
  return out;
}

} // namespace

int main() {
  auto data = load_fashion_mnist(fashion_mnist_default_dir, "train");
  if (!data) {
    std::fprintf(stderr, "mlp_training: %s\n", data.error().to_string().c_str());
    return 1;
  }
  for (int threads : {1, 2}) {
    // PyTorch first: OpenBLAS worker threads of ours spin for a while after our last matmul and
    // would otherwise steal cores from the baseline.
    auto torch = bench::python_json_number(
      ACTORFLOW_BENCH_SOURCE_DIR, "torch_mlp.py",
      "--threads " + std::to_string(threads) + " --batch " + std::to_string(batch_size) +
        " --steps " + std::to_string(timed_steps) + " --warmup " + std::to_string(warmup_steps),
      "examples_per_second");
    auto ours = train_actorflow(*data, threads);
    if (!ours) {
      std::fprintf(stderr, "mlp_training: %s\n", ours.error().to_string().c_str());
      return 1;
    }
    auto suffix = "_t" + std::to_string(threads);
    bench::figure f{"mlp_train_examples_per_s" + suffix, ours->examples_per_second, "examples/s",
                    torch, std::nullopt,
                    "784-256-128-10 MLP, SGD 0.1, batch 128, Fashion-MNIST; baseline PyTorch 1.13 CPU"};
    if (torch)
      f.ratio = ours->examples_per_second / *torch;
    bench::emit(f);
    bench::emit({"mlp_step_execution_ms" + suffix, ours->execution_ms, "ms/step", std::nullopt,
                 std::nullopt, "device executing its partition"});
    bench::emit({"mlp_step_overhead_ms" + suffix, ours->overhead_ms, "ms/step", std::nullopt,
                 std::nullopt, "session::run minus execution: messages, feeds, fetches"});
  }
  return 0;
}

// Between-graph training with real processes on loopback (actorflow-worker ps tasks,
// actorflow-train workers), the MLP on Fashion-MNIST over half the data per worker:
//   between_graph_async_examples_per_s: 1 ps + 2 async workers, the workers' examples/s added
//     up (each prints its own), with the chief's test accuracy in the note; baseline: PyTorch's
//     torch.distributed.rpc with the same layout, data and model, run just before
//     (bench/torch_rpc_mlp.py), its accuracy in the note too;
//   between_graph_sync_ms_per_round_{2,4}_workers: --sync with 2 and 4 workers, one epoch, the chief's
//     wall time per round (global step), beside the async per-step time of the same run.
#include "bench_training.hpp"
#include "bench_util.hpp"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace {

/// 1 ps and `workers` workers for `epochs` with `extra` flags.
std::optional<bench::training_processes_run> run(int workers, int epochs,
                                                 const std::vector<std::string>& extra) {
  return bench::train_processes(1, workers, epochs, extra, "/tmp/af-bench-between-graph");
}

} // namespace

int main() {
  // Three epochs, actorflow-train's default: one epoch's accuracy varies by about 0.01 with the
  // seed alone, in either framework, which would drown the comparison.
  constexpr int async_epochs = 3;
  auto torch_output = bench::python_output(ACTORFLOW_BENCH_SOURCE_DIR, "torch_rpc_mlp.py",
                                           "--epochs " + std::to_string(async_epochs));
  std::optional<double> torch_examples, torch_accuracy;
  if (torch_output) {
    torch_examples = bench::json_field(*torch_output, "examples_per_second");
    torch_accuracy = bench::json_field(*torch_output, "accuracy");
  }
  auto async = run(2, async_epochs, {});
  if (!async) {
    std::fprintf(stderr, "error: the async run failed\n");
    return 1;
  }
  double total = 0;
  for (auto& r : async->workers)
    total += r.examples_per_second;
  auto& chief = async->workers.front();
  char note[320];
  std::snprintf(note, sizeof note,
                "1 ps + 2 async worker processes, one thread each, three epochs over half the data "
                "each; test accuracy %.4f; baseline: torch.distributed.rpc, same layout, %s",
                chief.accuracy.value_or(0),
                torch_accuracy ? ("test accuracy " + std::to_string(*torch_accuracy)).c_str()
                               : "not measured (torch unusable)");
  bench::figure f{"between_graph_async_examples_per_s", total, "examples/s"};
  f.baseline = torch_examples;
  if (torch_examples)
    f.ratio = total / *torch_examples;
  f.note = note;
  bench::emit(f);
  auto async_ms_per_step = 1000.0 * async->seconds / static_cast<double>(chief.global_step.value_or(1)) * 2;

  for (int workers : {2, 4}) {
    auto sync = run(workers, 1, {"--sync"});
    if (!sync) {
      std::fprintf(stderr, "error: the sync run with %d workers failed\n", workers);
      return 1;
    }
    auto rounds = sync->workers.front().global_step.value_or(1);
    bench::figure f{"between_graph_sync_ms_per_round_" + std::to_string(workers) + "_workers",
                    1000.0 * sync->seconds / static_cast<double>(rounds), "ms/round"};
    f.baseline = async_ms_per_step;
    f.ratio = f.value / async_ms_per_step;
    f.note = "wall time of the whole run over its rounds; baseline: an async worker's wall time "
             "per own step with 2 workers, same run";
    bench::emit(f);
  }
  return 0;
}

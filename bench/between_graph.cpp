// Between-graph training with real processes on loopback (actorflow-worker ps tasks,
// actorflow-train workers), the MLP on Fashion-MNIST over half the data per worker:
//   between_graph_async_examples_per_s: 1 ps + 2 async workers, the workers' examples/s added
//     up (each prints its own), with the chief's test accuracy in the note; baseline: PyTorch's
//     torch.distributed.rpc with the same layout, data and model, run just before
//     (bench/torch_rpc_mlp.py), its accuracy in the note too;
//   between_graph_sync_ms_per_round_{2,4}_workers: --sync with 2 and 4 workers, one epoch, the chief's
//     wall time per round (global step), beside the async per-step time of the same run.
#include "support/processes.hpp"
#include "bench_util.hpp"

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using actorflow::testing::child_process;
using actorflow::testing::free_loopback_port;

namespace {

struct worker_result {
  double examples_per_second = 0;
  std::optional<double> accuracy;
  std::optional<long long> global_step;
  bool ok = false;
};

std::string address() { return "127.0.0.1:" + std::to_string(free_loopback_port()); }

worker_result collect(child_process& worker) {
  worker_result r;
  while (auto line = worker.wait_for_line("", 600s)) {
    if (line->rfind("examples/s: ", 0) == 0)
      r.examples_per_second = std::stod(line->substr(12));
    else if (line->rfind("test accuracy: ", 0) == 0)
      r.accuracy = std::stod(line->substr(15));
    else if (line->rfind("global step: ", 0) == 0)
      r.global_step = std::stoll(line->substr(13));
  }
  r.ok = worker.wait_exit(60s) == 0;
  if (!r.ok)
    std::fprintf(stderr, "a worker failed: %s\n", worker.stderr_text().c_str());
  return r;
}

/// Runs 1 ps and `workers` workers for `epochs` with `extra` flags; the chief's wall seconds and
/// results.
std::optional<std::pair<double, std::vector<worker_result>>> run(int workers, int epochs,
                                                                 std::vector<std::string> extra) {
  auto ps_address = address();
  std::string spec = "ps=" + ps_address + ";worker=";
  for (int k = 0; k < workers; ++k)
    spec += (k == 0 ? "" : ",") + address();
  child_process ps{ACTORFLOW_WORKER_BINARY, {"--cluster", spec, "--job", "ps", "--threads", "1"}};
  if (!ps.wait_for_line("serving on", 20s))
    return std::nullopt;
  std::vector<std::unique_ptr<child_process>> started;
  auto started_at = std::chrono::steady_clock::now();
  for (int k = workers - 1; k >= 0; --k) {
    std::vector<std::string> args{"--cluster", spec, "--job", "worker", "--task", std::to_string(k),
                                  "--epochs", std::to_string(epochs), "--threads", "1", "--log-every", "100000",
                                  "--output-dir", "/tmp/af-bench-between-graph"};
    args.insert(args.end(), extra.begin(), extra.end());
    started.push_back(std::make_unique<child_process>(ACTORFLOW_TRAIN_BINARY, args));
  }
  std::vector<worker_result> results;
  for (auto& w : started)
    results.push_back(collect(*w));
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_at).count();
  for (auto& r : results)
    if (!r.ok)
      return std::nullopt;
  if (ps.wait_exit(30s) != 0)
    return std::nullopt;
  // Collected in reverse start order: the chief (task 0) is last.
  return std::make_pair(seconds, results);
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
  for (auto& r : async->second)
    total += r.examples_per_second;
  auto& chief = async->second.back();
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
  auto async_ms_per_step = 1000.0 * async->first / static_cast<double>(chief.global_step.value_or(1)) * 2;

  for (int workers : {2, 4}) {
    auto sync = run(workers, 1, {"--sync"});
    if (!sync) {
      std::fprintf(stderr, "error: the sync run with %d workers failed\n", workers);
      return 1;
    }
    auto rounds = sync->second.back().global_step.value_or(1);
    bench::figure f{"between_graph_sync_ms_per_round_" + std::to_string(workers) + "_workers",
                    1000.0 * sync->first / static_cast<double>(rounds), "ms/round"};
    f.baseline = async_ms_per_step;
    f.ratio = f.value / async_ms_per_step;
    f.note = "wall time of the whole run over its rounds; baseline: an async worker's wall time "
             "per own step with 2 workers, same run";
    bench::emit(f);
  }
  return 0;
}

// Mirrored training (MultiWorkerMirroredStrategy) with real processes on loopback: actorflow-train
// --strategy mirrored on 2 worker processes, the MLP on Fashion-MNIST (784-256-128-10 ReLU, SGD
// 0.1, 128 examples per worker and step: a global batch of 256 in one shared order), one thread
// each, one epoch; then, in the same run, the same training by PyTorch's DistributedDataParallel
// over gloo (bench/torch_ddp_mlp.py) and by actorflow's between-graph async (1 ps + 2 workers,
// the same flags). Every rate is the two workers' examples/s added up, each worker's examples
// over its training steps' time (start-up excluded).
//   mirrored_mlp_examples_per_s_2_workers: baseline DDP's, ratio actorflow / DDP;
//   mirrored_mlp_examples_per_s_2_workers_vs_between_graph_async: the same rate, baseline the
//     between-graph async run's, ratio mirrored / async;
//   mirrored_mlp_test_accuracy_2_workers: the chief's test accuracy, baseline DDP rank 0's,
//     ratio actorflow / DDP (the async run's in the note). After one epoch it moves by about
//     0.03 with --seed alone in either framework (actorflow-train --local --batch-size 256:
//     0.7732, 0.8190, 0.8112 for seeds 1-3; PyTorch 0.8126, 0.8042, 0.7813): a few epochs
//     (bench_mirrored 3) compare them better.
// Without a usable torch (or gloo) the DDP baselines are left out, said on stderr.
//   bench_mirrored            # one epoch
//   bench_mirrored 3          # three
#include "bench_training.hpp"
#include "bench_util.hpp"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace {

constexpr int workers = 2;
// actorflow-train --model mlp's defaults, given explicitly so that both frameworks get the same.
constexpr int batch_per_worker = 128;
const std::string learning_rate = "0.1";

/// The workers' examples/s added up.
double total_examples_per_second(const bench::training_processes_run& run) {
  double total = 0;
  for (auto& w : run.workers)
    total += w.examples_per_second;
  return total;
}

std::string accuracy_text(std::optional<double> accuracy) {
  if (!accuracy)
    return "not measured";
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", *accuracy);
  return text;
}

} // namespace

int main(int argc, char** argv) {
  const int epochs = bench::positive_arg(argc, argv, 1, 1);
  const std::vector<std::string> same_training{"--batch-size", std::to_string(batch_per_worker),
                                               "--learning-rate", learning_rate};
  std::vector<std::string> mirrored_flags{"--strategy", "mirrored"};
  mirrored_flags.insert(mirrored_flags.end(), same_training.begin(), same_training.end());
  auto mirrored = bench::train_processes(0, workers, epochs, mirrored_flags, "/tmp/af-bench-mirrored");
  if (!mirrored) {
    std::fprintf(stderr, "error: the mirrored run failed\n");
    return 1;
  }
  double ours = total_examples_per_second(*mirrored);
  auto our_accuracy = mirrored->workers.front().accuracy;
  std::fprintf(stderr, "mirrored: %.0f + %.0f examples/s, test accuracy %s, %.1f s in all\n",
               mirrored->workers[0].examples_per_second, mirrored->workers[1].examples_per_second,
               accuracy_text(our_accuracy).c_str(), mirrored->seconds);

  auto ddp_output = bench::python_output(
    ACTORFLOW_BENCH_SOURCE_DIR, "torch_ddp_mlp.py",
    "--workers " + std::to_string(workers) + " --epochs " + std::to_string(epochs) + " --batch " +
      std::to_string(batch_per_worker) + " --learning-rate " + learning_rate);
  std::optional<double> ddp_examples, ddp_accuracy;
  if (ddp_output) {
    ddp_examples = bench::json_field(*ddp_output, "examples_per_second");
    ddp_accuracy = bench::json_field(*ddp_output, "accuracy");
    std::fprintf(stderr, "DDP: %s", ddp_output->c_str());
  }

  auto async = bench::train_processes(1, workers, epochs, same_training, "/tmp/af-bench-mirrored-async");
  if (!async) {
    std::fprintf(stderr, "error: the between-graph async run failed\n");
    return 1;
  }
  double async_examples = total_examples_per_second(*async);
  auto async_accuracy = async->workers.front().accuracy;
  std::fprintf(stderr, "between-graph async: %.0f + %.0f examples/s, test accuracy %s\n",
               async->workers[0].examples_per_second, async->workers[1].examples_per_second,
               accuracy_text(async_accuracy).c_str());

  const std::string epochs_text = std::to_string(epochs) + (epochs == 1 ? " epoch" : " epochs");
  const std::string training = "2 worker processes on loopback, one thread each, MLP, SGD " +
                               learning_rate + ", " + std::to_string(batch_per_worker) +
                               " examples per worker and step, " + epochs_text;
  const std::string rates = "the 2 workers' examples/s added up (each its examples over its "
                            "training steps' time)";
  const std::string accuracies = "test accuracy: mirrored " + accuracy_text(our_accuracy) +
                                 ", DDP " + accuracy_text(ddp_accuracy) + ", between-graph async " +
                                 accuracy_text(async_accuracy);

  bench::figure vs_ddp{"mirrored_mlp_examples_per_s_2_workers", ours, "examples/s"};
  vs_ddp.baseline = ddp_examples;
  if (ddp_examples)
    vs_ddp.ratio = ours / *ddp_examples;
  vs_ddp.note = "actorflow-train --strategy mirrored, " + training + "; " + rates +
                "; baseline: PyTorch DistributedDataParallel over gloo, same model, data, batches "
                "and learning rate, same run" +
                (ddp_examples ? "" : " (not measured: torch or gloo unusable)") +
                "; ratio: actorflow / DDP; " + accuracies;
  bench::emit(vs_ddp);

  bench::figure vs_async{"mirrored_mlp_examples_per_s_2_workers_vs_between_graph_async", ours,
                         "examples/s", async_examples, ours / async_examples};
  vs_async.note = "actorflow-train --strategy mirrored, " + training + "; " + rates +
                  "; baseline: actorflow between-graph async, 1 ps + the 2 workers, same flags, "
                  "same run; ratio: mirrored / async; " + accuracies;
  bench::emit(vs_async);

  if (our_accuracy) {
    bench::figure accuracy{"mirrored_mlp_test_accuracy_2_workers", *our_accuracy, "accuracy"};
    accuracy.baseline = ddp_accuracy;
    if (ddp_accuracy)
      accuracy.ratio = *our_accuracy / *ddp_accuracy;
    accuracy.note = "the chief's, on the 10000 test images after " + epochs_text + " of " +
                    "mirrored training (" + training + "); baseline: DDP rank 0's, same run" +
                    (ddp_accuracy ? "" : " (not measured)") +
                    "; ratio: actorflow / DDP; between-graph async's: " + accuracy_text(async_accuracy) +
                    (epochs == 1 ? "; one epoch's accuracy moves by about 0.03 with the seed alone, "
                                   "in either framework"
                                 : "");
    bench::emit(accuracy);
  }
  return 0;
}

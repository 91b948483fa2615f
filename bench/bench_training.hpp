#pragma once
/// Training throughput through a session, shared by bench_mlp_training (the CPU) and bench_gpu
/// (a GPU, or the test device), bench_control_flow: actorflow-train's MLP, CNN or RNN on
/// Fashion-MNIST batches.
///   auto r = bench::train_actorflow(data, 1, {train::classifier::cnn, 32, 300});
///   bench::model_run on_gpu; on_gpu.device = "/device:GPU:0";
/// And actorflow-train's worker processes on loopback, shared by bench_between_graph and
/// bench_mirrored: each worker's examples/s and the chief's test accuracy.
///   auto run = bench::train_processes(1, 2, 1, {"--sync"}, "/tmp/out");   // 1 ps, 2 workers
///   run->workers[0].accuracy;                                             // the chief's
#include "bench_util.hpp"
#include "support/processes.hpp"

#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "serialization/idx_reader.hpp"
#include "train/models.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace bench {

inline constexpr int default_batch_size = 128;
inline constexpr int default_warmup_steps = 20;
inline constexpr int default_timed_steps = 300;

struct measured {
  double examples_per_second = 0;
  double execution_ms = 0;
  double overhead_ms = 0;
};

/// The run of one model: MLP (SGD 0.1, batch 128), CNN (Adam 0.001, batch 32) or RNN (Adam
/// 0.001, batch 128), as actorflow-train's defaults.
struct model_run {
  actorflow::train::classifier kind = actorflow::train::classifier::mlp;
  int batch = default_batch_size;
  int steps = default_timed_steps;
  /// Nodes run on the device actor's thread instead of the inter-op pool (session_options::
  /// run_inline): what the pool's thread handoffs cost.
  bool inline_nodes = false;
  /// The whole model under this device scope ("/device:GPU:0"), with soft placement; empty:
  /// the placer's default.
  std::string device;
  /// Test devices the session makes (session_options::test_device_count).
  int test_devices = -1;
  /// The fusion pass (session_options::fuse_ops): off to measure what it gains.
  bool fuse_ops = true;
  /// session_options::mixed_precision: "bfloat16" for bf16 MatMuls and convolutions.
  std::string mixed_precision;
};

/// Fashion-MNIST's training split, every pixel read once (and checked to lie in [0, 1]) after
/// loading. On these VMs the first reads of freshly written pages are slow: without that pass,
/// the first model a bench trained spent 0.85 ms of each 2.6 ms step copying its batch's rows
/// (0.08 ms once read), so it was timed against colder memory than the models after it.
inline actorflow::result<actorflow::dataset> load_training_data() {
  using namespace actorflow;
  auto data = load_fashion_mnist(fashion_mnist_default_dir, "train");
  if (!data)
    return data;
  const auto* values = data->images.data<float>();
  for (std::int64_t i = 0; i < data->images.num_elements(); ++i)
    if (!(values[i] >= 0.f && values[i] <= 1.f))
      return make_error(errc::data_loss, "Fashion-MNIST pixel " + std::to_string(i) + " is " +
                                           std::to_string(values[i]) + ", outside [0, 1]");
  return data;
}

inline actorflow::result<measured> train_actorflow(const actorflow::dataset& data, int threads,
                                                   model_run run = {}) {
  using namespace actorflow;
  graph g;
  g.seed = 1;
  auto adam = run.kind != train::classifier::mlp;
  auto opt = adam ? train::make_optimizer("adam", 0.001) : train::make_optimizer("sgd", 0.1);
  std::optional<scope_guard> on_device;
  if (!run.device.empty())
    on_device.emplace(g.device(run.device));
  auto m = train::build_classifier(g, *opt, run.kind);
  on_device.reset();
  AF_RETURN_IF_ERROR(g.status());
  session_options options;
  options.inter_op_parallelism_threads = threads;
  options.intra_op_parallelism_threads = threads;
  options.use_per_session_threads = true;
  options.run_inline = run.inline_nodes;
  options.allow_soft_placement = !run.device.empty();
  options.test_device_count = run.test_devices;
  options.fuse_ops = run.fuse_ops;
  options.mixed_precision = run.mixed_precision;
  session s{g, options};
  AF_RETURN_IF_ERROR(s.run_targets({ops::global_variables_initializer(g)}));
  batch_options shuffled;
  shuffled.batch_size = run.batch;
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
  for (int i = 0; i < default_warmup_steps; ++i)
    AF_RETURN_IF_ERROR(step(nullptr));
  double execution = 0, total_in_run = 0;
  status failure;
  auto seconds = time_seconds([&] {
    for (int i = 0; i < run.steps && failure.ok(); ++i) {
      step_stats stats;
      failure = step(&stats);
      execution += stats.execution_seconds;
      total_in_run += stats.total_seconds;
    }
  });
  AF_RETURN_IF_ERROR(failure);
  measured out;
  out.examples_per_second = run.steps * run.batch / seconds;
  out.execution_ms = 1e3 * execution / run.steps;
  out.overhead_ms = 1e3 * (total_in_run - execution) / run.steps;
  return out;
}

/// What one actorflow-train worker process said at the end of its run.
struct trainer_result {
  /// Its own "examples/s: N" (examples of its steps over their time).
  double examples_per_second = 0;
  /// "test accuracy: X" and "global step: N", which the chief alone prints.
  std::optional<double> accuracy;
  std::optional<long long> global_step;
  bool ok = false;
};

/// Reads `trainer`'s stdout until it closes it (at most 600 s a line), then waits for its exit;
/// its stderr on this process's when it failed.
inline trainer_result collect_trainer(actorflow::testing::child_process& trainer) {
  using namespace std::chrono_literals;
  trainer_result r;
  while (auto line = trainer.wait_for_line("", 600s)) {
    if (line->rfind("examples/s: ", 0) == 0)
      r.examples_per_second = std::stod(line->substr(12));
    else if (line->rfind("test accuracy: ", 0) == 0)
      r.accuracy = std::stod(line->substr(15));
    else if (line->rfind("global step: ", 0) == 0)
      r.global_step = std::stoll(line->substr(13));
  }
  r.ok = trainer.wait_exit(60s) == 0;
  if (!r.ok)
    std::fprintf(stderr, "a worker failed: %s\n", trainer.stderr_text().c_str());
  return r;
}

/// A run of actorflow-train worker processes: the wall seconds from the first start to the last
/// exit, and each worker's results in task order (the chief first).
struct training_processes_run {
  double seconds = 0;
  std::vector<trainer_result> workers;
};

/// Trains with `ps_tasks` ps tasks (actorflow-worker, one thread each; none for --strategy
/// mirrored) and `workers` actorflow-train workers on free loopback ports, each worker with
/// --epochs `epochs`, --threads 1, no progress lines and `extra` flags, the chief writing into
/// `output_dir`. Nothing, said on stderr, when a process failed.
inline std::optional<training_processes_run> train_processes(int ps_tasks, int workers, int epochs,
                                                             const std::vector<std::string>& extra,
                                                             const std::string& output_dir) {
  using namespace std::chrono_literals;
  using actorflow::testing::child_process;
  auto ports = actorflow::testing::free_loopback_ports(static_cast<std::size_t>(ps_tasks + workers));
  if (ports.empty()) {
    std::fprintf(stderr, "no free loopback ports\n");
    return std::nullopt;
  }
  auto addresses = [&](int first, int count) {
    std::string list;
    for (int i = first; i < first + count; ++i)
      list += (i > first ? "," : "") + ("127.0.0.1:" + std::to_string(ports[static_cast<std::size_t>(i)]));
    return list;
  };
  std::string spec = "worker=" + addresses(ps_tasks, workers);
  if (ps_tasks > 0)
    spec = "ps=" + addresses(0, ps_tasks) + ";" + spec;
  std::vector<std::unique_ptr<child_process>> ps;
  for (int t = 0; t < ps_tasks; ++t) {
    ps.push_back(std::make_unique<child_process>(
      ACTORFLOW_WORKER_BINARY, std::vector<std::string>{"--cluster", spec, "--job", "ps", "--task",
                                                        std::to_string(t), "--threads", "1"}));
    if (!ps.back()->wait_for_line("serving on", 20s)) {
      std::fprintf(stderr, "ps task %d did not start\n", t);
      return std::nullopt;
    }
  }
  // The chief last: the others are waiting for it by then, as a cluster started by hand is.
  std::vector<std::unique_ptr<child_process>> started(static_cast<std::size_t>(workers));
  auto started_at = std::chrono::steady_clock::now();
  for (int k = workers - 1; k >= 0; --k) {
    std::vector<std::string> args{"--cluster", spec, "--job", "worker", "--task", std::to_string(k),
                                  "--epochs", std::to_string(epochs), "--threads", "1",
                                  "--log-every", "100000", "--output-dir", output_dir};
    args.insert(args.end(), extra.begin(), extra.end());
    started[static_cast<std::size_t>(k)] = std::make_unique<child_process>(ACTORFLOW_TRAIN_BINARY, args);
  }
  training_processes_run run;
  for (auto& w : started)
    run.workers.push_back(collect_trainer(*w));
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_at).count();
  for (auto& r : run.workers)
    if (!r.ok)
      return std::nullopt;
  for (auto& p : ps)
    if (p->wait_exit(30s) != 0) {
      std::fprintf(stderr, "a ps task did not exit by itself once training was done\n");
      return std::nullopt;
    }
  return run;
}

} // namespace bench

#pragma once
/// Training throughput through a session, shared by bench_mlp_training (the CPU) and bench_gpu
/// (a GPU, or the test device), bench_control_flow: actorflow-train's MLP, CNN or RNN on
/// Fashion-MNIST batches.
///   auto r = bench::train_actorflow(data, 1, {train::classifier::cnn, 32, 300});
///   bench::model_run on_gpu; on_gpu.device = "/device:GPU:0";
#include "bench_util.hpp"

#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "serialization/idx_reader.hpp"
#include "train/models.hpp"

#include <optional>
#include <string>

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

} // namespace bench

// GPU figures, each beside PyTorch CUDA in the same run (bench/torch_gpu.py, torch_mlp.py):
//   gpu_matmul_8192_f32   an 8192x8192 float32 MatMul through a session, GFLOP/s, against
//                         torch.mm (cuBLAS called straight from PyTorch, TF32 off on both sides)
//   gpu_add_chain         a chain of 10,000 small adds on the device in one step, us per node,
//                         against PyTorch eager CUDA adds
//   gpu_mlp, gpu_cnn      actorflow-train's MLP (batch 128) and CNN (batch 32) training
//                         examples/s on the device, against PyTorch training the same model on
//                         the same data and batch, batches copied from the host each step
//   bench_gpu [TYPE]      TYPE: GPU (default) or TEST (the test device: checks this program on
//                         machines without a GPU; its figures mean nothing there)
// Without a device of that type it says why on stderr and exits 0: `make bench` runs it
// everywhere.
#include "bench_training.hpp"
#include "bench_util.hpp"

#include "actors/session.hpp"
#include "devices/device_factory.hpp"
#include "graph/ops.hpp"

#include <cstdio>
#include <string>

#ifndef ACTORFLOW_BENCH_SOURCE_DIR
#define ACTORFLOW_BENCH_SOURCE_DIR "bench"
#endif

using namespace actorflow;

namespace {

session_options on_device_options(const std::string& type) {
  session_options options;
  options.inter_op_parallelism_threads = 1;
  options.intra_op_parallelism_threads = 1;
  options.use_per_session_threads = true;
  options.test_device_count = type == "TEST" ? 1 : 0;
  return options;
}

/// GFLOP/s of an n x n x n float32 MatMul whose operands live on the device (variables), run
/// as a target so that nothing but the product is timed.
result<double> matmul_gflops(const std::string& type, int n, int runs) {
  graph g;
  g.seed = 1;
  auto scope = g.device("/device:" + type + ":0");
  auto a = ops::variable(g, ops::random_uniform(g, {n, n}), "a");
  auto b = ops::variable(g, ops::random_uniform(g, {n, n}), "b");
  auto product = ops::matmul(a, b, false, false, "product");
  AF_RETURN_IF_ERROR(g.status());
  session s{g, on_device_options(type)};
  AF_RETURN_IF_ERROR(s.run_targets({ops::global_variables_initializer(g)}));
  AF_RETURN_IF_ERROR(s.run_targets({product}));
  std::vector<double> seconds;
  for (int i = 0; i < runs; ++i) {
    status st;
    seconds.push_back(bench::time_seconds([&] { st = s.run_targets({product}); }));
    AF_RETURN_IF_ERROR(st);
  }
  return 2.0 * n * n * static_cast<double>(n) / bench::median(seconds) / 1e9;
}

/// Microseconds per node of a chain of `adds` float32 scalar adds on the device, one step.
result<double> add_chain_us(const std::string& type, int adds, int runs) {
  graph g;
  auto scope = g.device("/device:" + type + ":0");
  auto one = ops::constant(g, 1.f, "one");
  auto x = ops::constant(g, 0.f, "zero");
  for (int i = 0; i < adds; ++i)
    x = x + one;
  AF_RETURN_IF_ERROR(g.status());
  session s{g, on_device_options(type)};
  if (auto warm = s.run({x}); !warm)
    return warm.error();
  std::vector<double> seconds;
  for (int i = 0; i < runs; ++i) {
    result<std::vector<tensor>> r = std::vector<tensor>{};
    seconds.push_back(bench::time_seconds([&] { r = s.run({x}); }));
    if (!r)
      return r.error();
    if (r->at(0).scalar_value<float>() != static_cast<float>(adds))
      return make_error(errc::internal, "the add chain summed to " + r->at(0).debug_string());
  }
  return bench::median(seconds) / adds * 1e6;
}

void emit_against(const std::string& name, double ours, const char* unit,
                  std::optional<double> torch, bool higher_is_better, const std::string& note) {
  bench::figure f{name, ours, unit, torch, std::nullopt, note};
  if (torch)
    f.ratio = higher_is_better ? ours / *torch : *torch / ours;
  bench::emit(f);
}

} // namespace

int main(int argc, char** argv) {
  std::string type = argc > 1 ? argv[1] : "GPU";
  device_factory_options probe;
  probe.test_device_count = type == "TEST" ? 1 : 0;
  if (auto why = why_no_device(type, probe); !why.empty()) {
    std::fprintf(stderr, "bench_gpu: skipped, no %s device: %s\n", type.c_str(), why.c_str());
    return 0;
  }
  bool real_gpu = type == "GPU";
  // The test device runs the CPU's kernels: small sizes, only to check this program.
  int n = real_gpu ? 8192 : 256;
  int adds = real_gpu ? 10000 : 1000;
  int steps = real_gpu ? 300 : 20;
  std::string torch_device = real_gpu ? "cuda" : "cpu";

  auto torch_mm = bench::python_json_number(
    ACTORFLOW_BENCH_SOURCE_DIR, "torch_gpu.py",
    "--op matmul --n " + std::to_string(n) + " --device " + torch_device, "gflops");
  auto mm = matmul_gflops(type, n, real_gpu ? 20 : 3);
  if (!mm) {
    std::fprintf(stderr, "bench_gpu: matmul: %s\n", mm.error().to_string().c_str());
    return 1;
  }
  emit_against("gpu_matmul_" + std::to_string(n) + "_f32", *mm, "GFLOP/s", torch_mm, true,
               type + ": MatMul through a session, operands in variables; baseline torch.mm "
                      "(cuBLAS) with TF32 off, same run");

  auto torch_adds = bench::python_json_number(
    ACTORFLOW_BENCH_SOURCE_DIR, "torch_gpu.py",
    "--op adds --adds " + std::to_string(adds) + " --device " + torch_device, "us_per_op");
  auto chain = add_chain_us(type, adds, real_gpu ? 10 : 3);
  if (!chain) {
    std::fprintf(stderr, "bench_gpu: add chain: %s\n", chain.error().to_string().c_str());
    return 1;
  }
  emit_against("gpu_add_chain_us_per_node", *chain, "us/node", torch_adds, false,
               type + ": " + std::to_string(adds) +
                 " chained scalar adds in one step; baseline PyTorch eager adds, same run; "
                 "ratio: PyTorch's time over ours");

  auto data = bench::load_training_data();
  if (!data) {
    std::fprintf(stderr, "bench_gpu: %s\n", data.error().to_string().c_str());
    return 1;
  }
  for (auto kind : {train::classifier::mlp, train::classifier::cnn}) {
    bool cnn = kind == train::classifier::cnn;
    bench::model_run run{kind, cnn ? 32 : 128, steps};
    run.device = "/device:" + type + ":0";
    run.test_devices = type == "TEST" ? 1 : 0;
    auto torch_rate = bench::python_json_number(
      ACTORFLOW_BENCH_SOURCE_DIR, "torch_mlp.py",
      std::string{"--model "} + (cnn ? "cnn" : "mlp") + " --batch " + std::to_string(run.batch) +
        " --steps " + std::to_string(steps) + " --device " + torch_device,
      "examples_per_second");
    auto ours = bench::train_actorflow(*data, 1, run);
    if (!ours) {
      std::fprintf(stderr, "bench_gpu: %s: %s\n", cnn ? "cnn" : "mlp",
                   ours.error().to_string().c_str());
      return 1;
    }
    emit_against(std::string{"gpu_"} + (cnn ? "cnn" : "mlp") + "_train_examples_per_s",
                 ours->examples_per_second, "examples/s", torch_rate, true,
                 type + ": actorflow-train's " + (cnn ? "CNN, Adam 0.001, batch 32" : "MLP, SGD 0.1, batch 128") +
                   "; baseline PyTorch on " + torch_device + ", same model, data and batch, same run");
  }
  return 0;
}

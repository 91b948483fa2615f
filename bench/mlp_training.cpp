// MLP training throughput: actorflow-train's 784-256-128-10 network with SGD at 0.1, batch 128,
// on Fashion-MNIST, at 1 and 2 threads, beside PyTorch 1.13 training the same model on the same
// data in the same run (bench/torch_mlp.py). Also the time per step split into graph execution
// (the device running its partition) and framework overhead (everything else in session::run),
// and the bound the step's GEMMs alone set: mlp_gemm_bound_examples_per_s times the step's eight
// matrix products (forward, and the backward products the gradients build, with the same
// transposes) through cblas_sgemm in the same run; the ratio is the share of that bound reached;
// and the MLP with its nodes run inline on the device actor (no inter-op pool) beside the pool.
// The 1-thread MLP and CNN figures again (suffix _openblas_prescott) from a child process under
// OPENBLAS_CORETYPE=Prescott, PyTorch under the same setting: the slow path OpenBLAS's own
// detection takes on CPUs newer than its release, which actorflow's kernel choice overrides.
#include "bench_training.hpp"
#include "bench_util.hpp"

#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "serialization/idx_reader.hpp"
#include "train/models.hpp"

#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#ifndef ACTORFLOW_BENCH_SOURCE_DIR
#define ACTORFLOW_BENCH_SOURCE_DIR "bench"
#endif

using namespace actorflow;

namespace {

using bench::measured;
using bench::model_run;
using bench::train_actorflow;

constexpr int batch_size = bench::default_batch_size;
constexpr int warmup_steps = bench::default_warmup_steps;
constexpr int timed_steps = bench::default_timed_steps;

/// One product of the step: C[m,n] = op(A) op(B).
struct gemm_shape {
  bool transpose_a, transpose_b;
  int m, n, k;
};

/// Examples/s if a step cost only its GEMMs: the MLP's three forward products, and for each
/// layer the products gradients() builds for c = a b: da = dc b^T and db = a^T dc (none for
/// the images).
double gemm_bound(int threads) {
  openblas_set_num_threads(threads);
  const int b = batch_size;
  std::vector<gemm_shape> shapes{
    {false, false, b, 256, 784}, {false, false, b, 128, 256}, {false, false, b, 10, 128}, // forward
    {true, false, 784, 256, b},                                                          // dW1
    {false, true, b, 256, 128}, {true, false, 256, 128, b},                              // dH1, dW2
    {false, true, b, 128, 10}, {true, false, 128, 10, b}};                               // dH2, dW3
  std::vector<std::vector<float>> a, bm, c;
  for (auto& s : shapes) {
    a.emplace_back(static_cast<std::size_t>(s.m) * s.k, 0.01f);
    bm.emplace_back(static_cast<std::size_t>(s.k) * s.n, 0.01f);
    c.emplace_back(static_cast<std::size_t>(s.m) * s.n, 0.f);
  }
  auto step = [&] {
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      auto& s = shapes[i];
      cblas_sgemm(CblasRowMajor, s.transpose_a ? CblasTrans : CblasNoTrans,
                  s.transpose_b ? CblasTrans : CblasNoTrans, s.m, s.n, s.k, 1.f, a[i].data(),
                  s.transpose_a ? s.m : s.k, bm[i].data(), s.transpose_b ? s.k : s.n, 0.f,
                  c[i].data(), s.n);
    }
  };
  for (int i = 0; i < warmup_steps; ++i)
    step();
  auto seconds = bench::time_seconds([&] {
    for (int i = 0; i < timed_steps; ++i)
      step();
  });
  return timed_steps * batch_size / seconds;
}

/// The fusion pass on and off side by side at 1 thread (graph/fusion.hpp), `runs` alternating
/// runs of each; emits the medians, on over off, with every run in the note.
void compare_fusion(const dataset& data, model_run run, const std::string& name, int runs) {
  std::vector<double> on, off;
  std::string each;
  for (int i = 0; i < runs; ++i)
    for (bool fuse : {false, true}) {
      run.fuse_ops = fuse;
      auto r = train_actorflow(data, 1, run);
      if (!r) {
        std::fprintf(stderr, "mlp_training: %s: %s\n", name.c_str(), r.error().to_string().c_str());
        return;
      }
      (fuse ? on : off).push_back(r->examples_per_second);
      each += std::string{each.empty() ? "" : ", "} + (fuse ? "on " : "off ") +
              bench::json_number(r->examples_per_second);
    }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  bench::figure f{name + "_fused_examples_per_s_t1", median(on), "examples/s", median(off)};
  f.ratio = median(on) / median(off);
  f.note = "fusion on (median of " + std::to_string(runs) + "); baseline: fusion off, same run, "
           "alternating; runs: " + each;
  bench::emit(f);
}

/// Mixed precision (graph/mixed_precision.hpp) against float32 at 1 thread, `runs` alternating
/// runs of each: `name`_train_examples_per_s_bf16_t1, the bf16 median over the float32 one.
void compare_mixed_precision(const dataset& data, model_run run, const std::string& name,
                             int runs) {
  std::vector<double> bf16, f32;
  std::string each;
  for (int i = 0; i < runs; ++i)
    for (std::string policy : {"float32", "bfloat16"}) {
      run.mixed_precision = policy;
      auto r = train_actorflow(data, 1, run);
      if (!r) {
        std::fprintf(stderr, "mlp_training: %s %s: %s\n", name.c_str(), policy.c_str(),
                     r.error().to_string().c_str());
        return;
      }
      (policy == "bfloat16" ? bf16 : f32).push_back(r->examples_per_second);
      each += (each.empty() ? "" : ", ") + policy + " " + bench::json_number(r->examples_per_second);
    }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  bench::figure f{name + "_train_examples_per_s_bf16_t1", median(bf16), "examples/s", median(f32)};
  f.ratio = median(bf16) / median(f32);
  f.note = "mixed precision bfloat16 (bf16 operands on oneDNN, AMX where present; median of " +
           std::to_string(runs) + "); baseline: float32, same run, alternating; runs: " + each;
  bench::emit(f);
}

/// The MLP at `threads` beside PyTorch, its GEMM bound, inline nodes and the step's split;
/// `suffix` ends every name (after the thread count). False when actorflow's run failed.
bool mlp_figures(const dataset& data, int threads, const std::string& suffix_after) {
  // PyTorch first: OpenBLAS worker threads of ours spin for a while after our last matmul and
  // would otherwise steal cores from the baseline.
  auto torch = bench::python_json_number(
    ACTORFLOW_BENCH_SOURCE_DIR, "torch_mlp.py",
    "--threads " + std::to_string(threads) + " --batch " + std::to_string(batch_size) +
      " --steps " + std::to_string(timed_steps) + " --warmup " + std::to_string(warmup_steps),
    "examples_per_second");
  auto ours = train_actorflow(data, threads);
  if (!ours) {
    std::fprintf(stderr, "mlp_training: %s\n", ours.error().to_string().c_str());
    return false;
  }
  auto suffix = "_t" + std::to_string(threads) + suffix_after;
  bench::figure f{"mlp_train_examples_per_s" + suffix, ours->examples_per_second, "examples/s",
                  torch, std::nullopt,
                  "784-256-128-10 MLP, SGD 0.1, batch 128, Fashion-MNIST; baseline PyTorch 1.13 CPU"};
  if (torch)
    f.ratio = ours->examples_per_second / *torch;
  bench::emit(f);
  auto bound = gemm_bound(threads);
  bench::figure b{"mlp_gemm_bound_examples_per_s" + suffix, bound, "examples/s"};
  b.baseline = ours->examples_per_second;
  b.ratio = ours->examples_per_second / bound;
  b.note = "the step's 8 GEMMs alone through cblas_sgemm, same run; ratio: actorflow's rate over this bound";
  bench::emit(b);
  model_run inline_run;
  inline_run.inline_nodes = true;
  if (auto in_line = train_actorflow(data, threads, inline_run)) {
    bench::figure i{"mlp_train_examples_per_s_inline" + suffix, in_line->examples_per_second,
                    "examples/s"};
    i.baseline = ours->examples_per_second;
    i.ratio = in_line->examples_per_second / ours->examples_per_second;
    i.note = "the same with every node run on the device actor's thread (run_inline), no "
             "inter-op pool; baseline: with the pool, same run";
    bench::emit(i);
  }
  bench::emit({"mlp_step_execution_ms" + suffix, ours->execution_ms, "ms/step", std::nullopt,
               std::nullopt, "device executing its partition"});
  bench::emit({"mlp_step_overhead_ms" + suffix, ours->overhead_ms, "ms/step", std::nullopt,
               std::nullopt, "session::run minus execution: messages, feeds, fetches"});
  return true;
}

/// The CNN at one thread (its small GEMMs gain nothing from more BLAS threads) beside PyTorch;
/// `suffix` ends the name. False when actorflow's run failed.
bool cnn_figure(const dataset& data, const std::string& suffix) {
  model_run cnn{train::classifier::cnn, 32, 300};
  auto torch_cnn = bench::python_json_number(
    ACTORFLOW_BENCH_SOURCE_DIR, "torch_mlp.py",
    "--model cnn --threads 1 --batch 32 --steps 300 --warmup " + std::to_string(warmup_steps),
    "examples_per_second");
  auto ours_cnn = train_actorflow(data, 1, cnn);
  if (!ours_cnn) {
    std::fprintf(stderr, "mlp_training: cnn: %s\n", ours_cnn.error().to_string().c_str());
    return false;
  }
  bench::figure c{"cnn_train_examples_per_s_t1" + suffix, ours_cnn->examples_per_second,
                  "examples/s", torch_cnn, std::nullopt,
                  "actorflow-train's CNN (5x5x16, 5x5x32, 512-128-10), Adam 0.001, batch 32, 1 thread; "
                  "baseline PyTorch 1.13 CPU, same model, data, batch"};
  if (torch_cnn)
    c.ratio = ours_cnn->examples_per_second / *torch_cnn;
  bench::emit(c);
  return true;
}

} // namespace

int main(int argc, char** argv) {
  auto data = bench::load_training_data();
  if (!data) {
    std::fprintf(stderr, "mlp_training: %s\n", data.error().to_string().c_str());
    return 1;
  }
  // `bench_mlp_training --mlp-only THREADS STEPS`: actorflow's MLP alone, for a profiler.
  if (argc == 4 && std::string{argv[1]} == "--mlp-only") {
    model_run run;
    run.steps = std::stoi(argv[3]);
    auto r = train_actorflow(*data, std::stoi(argv[2]), run);
    if (!r) {
      std::fprintf(stderr, "mlp_training: %s\n", r.error().to_string().c_str());
      return 1;
    }
    bench::emit({"mlp_train_examples_per_s_t" + std::string{argv[2]}, r->examples_per_second,
                 "examples/s"});
    return 0;
  }
  // `bench_mlp_training --openblas-prescott`: the MLP and CNN figures alone, run by the full
  // benchmark under OPENBLAS_CORETYPE=Prescott (the library's detection made wrong, as it is
  // on CPUs newer than its release), PyTorch beside them under the same setting.
  if (argc == 2 && std::string{argv[1]} == "--openblas-prescott") {
    const std::string suffix = "_openblas_prescott";
    return mlp_figures(*data, 1, suffix) && cnn_figure(*data, suffix) ? 0 : 1;
  }
  for (int threads : {1, 2})
    if (!mlp_figures(*data, threads, ""))
      return 1;
  if (!cnn_figure(*data, ""))
    return 1;
  std::fflush(stdout);
  // OpenBLAS reads OPENBLAS_CORETYPE when it loads: only a new process can have it.
  // Read here: in the shell std::system starts, /proc/self/exe is the shell.
  auto self = std::filesystem::read_symlink("/proc/self/exe").string();
  if (std::system(("OPENBLAS_CORETYPE=Prescott '" + self + "' --openblas-prescott").c_str()) != 0)
    std::fprintf(stderr, "mlp_training: the run under OPENBLAS_CORETYPE=Prescott failed\n");
  model_run cnn{train::classifier::cnn, 32, 300};
  compare_fusion(*data, {}, "mlp", 3);
  compare_fusion(*data, cnn, "cnn", 3);
  compare_mixed_precision(*data, {}, "mlp", 3);
  compare_mixed_precision(*data, cnn, "cnn", 3);
  return 0;
}

// 1024x1024 float32 MatMul through a session at 1 and 2 threads against the CPU's FMA peak at
// as many threads (fma_peak_gflops_t1/_t2: an FMA loop at the widest vector width the CPU has,
// measured in the same run), and beside cblas_sgemm called directly on the same operands
// (matmul_N_f32_direct_tK). The session's runs and the direct calls alternate so that load from
// other processes hits both alike.
//   bench_matmul [size] [runs]
#include "bench_util.hpp"

#include "actors/session.hpp"
#include "devices/cpu/cpu_features.hpp"
#include "graph/ops.hpp"

#include <cblas.h>
#include <immintrin.h>

#include <thread>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace actorflow;

constexpr int warmup_runs = 3;

std::vector<float> random_matrix(int n, unsigned seed) {
  std::mt19937 engine{seed};
  std::uniform_real_distribution<float> uniform{-1.0f, 1.0f};
  std::vector<float> values(static_cast<std::size_t>(n) * n);
  for (auto& v : values)
    v = uniform(engine);
  return values;
}

/// Largest relative difference between the two products, as a sanity check.
double max_relative_difference(const float* a, const float* b, std::size_t count) {
  double worst = 0.0;
  for (std::size_t i = 0; i < count; ++i) {
    double scale = std::max(1.0, std::abs(static_cast<double>(b[i])));
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]) / scale);
  }
  return worst;
}

/// Independent accumulators per thread: enough to cover the FMA latency (4 cycles) on two ports.
constexpr int chains = 12;

/// `iterations` rounds of `chains` FMAs on vectors of 16 floats; the sum keeps them alive.
__attribute__((target("avx512f"))) float fma_loop_avx512(long iterations) {
  __m512 acc[chains];
  for (int k = 0; k < chains; ++k)
    acc[k] = _mm512_set1_ps(1.0f + 0.001f * static_cast<float>(k));
  const __m512 scale = _mm512_set1_ps(0.999999f), shift = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < iterations; ++i)
    for (int k = 0; k < chains; ++k)
      acc[k] = _mm512_fmadd_ps(acc[k], scale, shift);
  __m512 sum = acc[0];
  for (int k = 1; k < chains; ++k)
    sum = _mm512_add_ps(sum, acc[k]);
  return _mm512_reduce_add_ps(sum);
}

__attribute__((target("avx2,fma"))) float fma_loop_avx2(long iterations) {
  __m256 acc[chains];
  for (int k = 0; k < chains; ++k)
    acc[k] = _mm256_set1_ps(1.0f + 0.001f * static_cast<float>(k));
  const __m256 scale = _mm256_set1_ps(0.999999f), shift = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < iterations; ++i)
    for (int k = 0; k < chains; ++k)
      acc[k] = _mm256_fmadd_ps(acc[k], scale, shift);
  __m256 sum = acc[0];
  for (int k = 1; k < chains; ++k)
    sum = _mm256_add_ps(sum, acc[k]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  float total = 0;
  for (float v : lanes)
    total += v;
  return total;
}

/// SSE has no FMA: a multiply and an add per lane, counted as two flops like an FMA.
float fma_loop_sse(long iterations) {
  __m128 acc[chains];
  for (int k = 0; k < chains; ++k)
    acc[k] = _mm_set1_ps(1.0f + 0.001f * static_cast<float>(k));
  const __m128 scale = _mm_set1_ps(0.999999f), shift = _mm_set1_ps(1e-7f);
  for (long i = 0; i < iterations; ++i)
    for (int k = 0; k < chains; ++k)
      acc[k] = _mm_add_ps(_mm_mul_ps(acc[k], scale), shift);
  __m128 sum = acc[0];
  for (int k = 1; k < chains; ++k)
    sum = _mm_add_ps(sum, acc[k]);
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, sum);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

/// The widest FMA loop this CPU runs, its vector width in floats, and its name.
struct fma_kernel {
  float (*loop)(long);
  int lanes;
  const char* name;
};

fma_kernel widest_fma_kernel() {
  const auto& cpu = detect_cpu_features();
  if (cpu.avx512f)
    return {fma_loop_avx512, 16, "AVX-512 FMA"};
  if (cpu.avx2 && cpu.fma)
    return {fma_loop_avx2, 8, "AVX2 FMA"};
  return {fma_loop_sse, 4, "SSE multiply-add"};
}

/// GFLOP/s of `threads` threads each running the loop at once (median of `runs`).
double fma_peak_gflops(const fma_kernel& kernel, int threads, int runs) {
  constexpr long iterations = 20'000'000;
  std::vector<double> times;
  volatile float sink = 0;
  for (int r = 0; r < runs + 1; ++r) {
    auto seconds = bench::time_seconds([&] {
      std::vector<std::thread> running;
      std::vector<float> sums(static_cast<std::size_t>(threads));
      for (int t = 0; t < threads; ++t)
        running.emplace_back([&, t] { sums[static_cast<std::size_t>(t)] = kernel.loop(iterations); });
      for (auto& th : running)
        th.join();
      for (float v : sums)
        sink = sink + v;
    });
    if (r > 0) // the first warms the clocks up
      times.push_back(seconds);
  }
  double flops = 2.0 * kernel.lanes * chains * static_cast<double>(iterations) * threads;
  return flops / bench::median(times) / 1e9;
}

} // namespace

int main(int argc, char** argv) {
  const int n = bench::positive_arg(argc, argv, 1, 1024);
  const int runs = bench::positive_arg(argc, argv, 2, 30);
  const double flops = 2.0 * n * n * static_cast<double>(n);

  auto a_values = random_matrix(n, 1);
  auto b_values = random_matrix(n, 2);
  std::vector<float> direct_out(static_cast<std::size_t>(n) * n);

  graph g;
  auto a = ops::constant(g, a_values, tensor_shape{n, n}, "a");
  auto b = ops::constant(g, b_values, tensor_shape{n, n}, "b");
  auto product = ops::matmul(a, b);
  if (!g.status().ok()) {
    std::cerr << "building the graph failed: " << g.status().to_string() << '\n';
    return 1;
  }

  auto direct_gemm = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a_values.data(), n,
                b_values.data(), n, 0.0f, direct_out.data(), n);
  };

  auto fma = widest_fma_kernel();
  std::vector<double> peak_gflops;
  for (int threads : {1, 2}) {
    peak_gflops.push_back(fma_peak_gflops(fma, threads, 5));
    bench::emit({"fma_peak_gflops_t" + std::to_string(threads), peak_gflops.back(), "GFLOP/s", {}, {},
                 std::string{fma.name} + " loop, " + std::to_string(chains) +
                   " chains per thread: " + detect_cpu_features().summary()});
  }

  for (int threads : {1, 2}) {
    session_options options;
    options.inter_op_parallelism_threads = 1;
    options.intra_op_parallelism_threads = threads;
    options.use_per_session_threads = true; // the session calls set_blas_threads(threads)
    session s{g, options};

    tensor last;
    bool ok = true;
    auto session_run = [&] {
      auto fetched = s.run({product});
      if (!fetched) {
        std::cerr << "step failed: " << fetched.error().to_string() << '\n';
        ok = false;
        return;
      }
      last = fetched->at(0);
    };

    openblas_set_num_threads(threads);
    for (int i = 0; i < warmup_runs && ok; ++i) {
      session_run();
      direct_gemm();
    }
    std::vector<double> session_times, direct_times;
    for (int i = 0; i < runs && ok; ++i) {
      // Alternate which goes first so that neither always follows the other's cache state.
      if (i % 2 == 0) {
        session_times.push_back(bench::time_seconds(session_run));
        direct_times.push_back(bench::time_seconds(direct_gemm));
      } else {
        direct_times.push_back(bench::time_seconds(direct_gemm));
        session_times.push_back(bench::time_seconds(session_run));
      }
    }
    if (!ok)
      return 1;
    double difference = max_relative_difference(last.data<float>(), direct_out.data(),
                                                direct_out.size());
    if (difference > 1e-4) {
      std::cerr << "session and direct products differ by " << difference << '\n';
      return 1;
    }

    double session_gflops = flops / bench::median(session_times) / 1e9;
    double direct_gflops = flops / bench::median(direct_times) / 1e9;
    std::cerr << "matmul " << n << " t" << threads << ": session "
              << bench::median(session_times) * 1e3 << " ms, direct "
              << bench::median(direct_times) * 1e3 << " ms (median of " << runs
              << "), openblas threads now " << openblas_get_num_threads() << '\n';
    auto peak = peak_gflops[static_cast<std::size_t>(threads - 1)];
    bench::emit({"matmul_" + std::to_string(n) + "_f32_t" + std::to_string(threads),
                 session_gflops, "GFLOP/s", peak, session_gflops / peak,
                 "baseline: fma_peak_gflops_t" + std::to_string(threads) + " (target ratio 0.8)"});
    bench::emit({"matmul_" + std::to_string(n) + "_f32_direct_t" + std::to_string(threads),
                 session_gflops, "GFLOP/s", direct_gflops, session_gflops / direct_gflops,
                 "baseline: cblas_sgemm called directly with openblas_set_num_threads(" +
                   std::to_string(threads) + ")"});
  }
  return 0;
}

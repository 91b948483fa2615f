// 1024x1024 float32 MatMul through a session at 1 and 2 threads, beside cblas_sgemm called
// directly on the same operands in the same run. The session's runs and the direct calls
// alternate so that load from other processes hits both alike.
//   bench_matmul [size] [runs]
#include "bench_util.hpp"

#include "actors/session.hpp"
#include "graph/ops.hpp"

#include <cblas.h>

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
    bench::emit({"matmul_" + std::to_string(n) + "_f32_t" + std::to_string(threads),
                 session_gflops, "GFLOP/s", direct_gflops, session_gflops / direct_gflops,
                 "direct baseline: cblas_sgemm with openblas_set_num_threads(" +
                   std::to_string(threads) + ")"});
  }
  return 0;
}

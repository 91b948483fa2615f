// All-reduce bus bandwidth across worker processes on loopback: N collective_worker processes
// (a server per task, the group joined as tasks reach each other, pieces member to member)
// all-reduce 64 MiB of float32, the best of 5 after a warm-up; the slowest member's time
// counts. Bus bandwidth as NCCL's tests define it: bytes x 2 (N - 1) / N / seconds, in MB/s
// (1e6 bytes). Then the median time of an all-reduce of one float32. Beside each, in the same
// run, PyTorch's torch.distributed all_reduce over gloo with as many processes, measured the
// same way (bench/torch_gloo_allreduce.py), run just after actorflow's:
//   allreduce_busbw_MBps_<N>_workers: baseline gloo's bus bandwidth, ratio actorflow / gloo;
//   allreduce_busbw_over_raw_tcp_<N>_workers: the same bus bandwidth against raw loopback TCP
//     between two threads (bench/raw_loopback.hpp), ratio actorflow / raw;
//   allreduce_latency_us_4_bytes_<N>_workers: baseline gloo's latency, ratio gloo / actorflow
//     (above 1: actorflow is faster).
// Without a usable torch (or gloo) the gloo baselines are left out, said on stderr.
//   bench_allreduce            # 2 and 4 workers
//   bench_allreduce 2          # 2 only
#include "support/processes.hpp"
#include "bench_util.hpp"
#include "raw_loopback.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace {

constexpr double mib = 64;
constexpr int iterations = 5;
constexpr int latency_iterations = 1000;

/// An all-reduce's figures: the slowest member's best time of the 64 MiB one and its median
/// time of the 4-byte one (seconds).
struct allreduce_times {
  double seconds = 0;
  double latency_seconds = 0;
};

/// actorflow's figures over `workers` collective_worker processes; zeros on failure.
allreduce_times actorflow_allreduce(int workers) {
  actorflow::testing::cluster_processes cluster{
    ACTORFLOW_COLLECTIVE_WORKER_BINARY, {{"worker", workers}}, 1, [](const std::string&, int) {
      return std::vector<std::string>{"--rounds", "1", "--elements", "1000", "--bench-mib",
                                      std::to_string(mib), "--iterations", std::to_string(iterations),
                                      "--latency-iterations", std::to_string(latency_iterations)};
    }};
  if (!cluster.ready()) {
    std::fprintf(stderr, "bench_allreduce: the %d workers did not start\n", workers);
    return {0, 0};
  }
  double slowest = 0, latency = 0;
  for (int t = 0; t < workers; ++t) {
    auto& worker = cluster.task(static_cast<std::size_t>(t));
    auto line = worker.wait_for_line("allreduce_seconds", std::chrono::milliseconds(300000));
    auto small = worker.wait_for_line("allreduce_latency_us", std::chrono::milliseconds(300000));
    if (!line || !small) {
      std::fprintf(stderr, "bench_allreduce: worker %d gave no time\n", t);
      return {0, 0};
    }
    slowest = std::max(slowest, std::atof(line->c_str() + std::string{"allreduce_seconds "}.size()));
    latency = std::max(latency,
                       std::atof(small->c_str() + std::string{"allreduce_latency_us "}.size()) / 1e6);
  }
  return {slowest, latency};
}

/// gloo's figures over `workers` processes (torch_gloo_allreduce.py); nothing, said on stderr,
/// when torch or gloo is unusable.
std::optional<allreduce_times> gloo_allreduce(int workers) {
  auto text = bench::python_output(
    ACTORFLOW_BENCH_SOURCE_DIR, "torch_gloo_allreduce.py",
    "--workers " + std::to_string(workers) + " --mib " + std::to_string(mib) + " --iterations " +
      std::to_string(iterations) + " --latency-iterations " + std::to_string(latency_iterations));
  if (!text)
    return std::nullopt;
  auto seconds = bench::json_field(*text, "allreduce_seconds");
  auto latency_us = bench::json_field(*text, "allreduce_latency_us");
  if (!seconds || !latency_us)
    return std::nullopt;
  return allreduce_times{*seconds, *latency_us / 1e6};
}

} // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes{2, 4};
  if (argc > 1)
    sizes = {bench::positive_arg(argc, argv, 1, 2)};
  auto bytes = static_cast<std::size_t>(mib * (1 << 20));
  double raw = bench::raw_loopback_mbps(bytes, 16);
  double duplex = bench::raw_loopback_duplex_mbps(bytes, 8);
  std::fprintf(stderr, "raw loopback TCP: %.0f MB/s one way, %.0f MB/s each way both at once\n",
               raw, duplex);
  for (int n : sizes) {
    auto ours = actorflow_allreduce(n);
    if (ours.seconds <= 0)
      return 1;
    auto gloo = gloo_allreduce(n);
    if (!gloo)
      std::fprintf(stderr, "%d workers: no gloo baseline (see above)\n", n);
    auto busbw_of = [&](double seconds) {
      return static_cast<double>(bytes) * 2.0 * (n - 1) / n / seconds / 1e6;
    };
    double busbw = busbw_of(ours.seconds);
    std::fprintf(stderr, "%d workers: 64 MiB all-reduced in %.4f s (gloo: %s)\n", n, ours.seconds,
                 gloo ? (std::to_string(gloo->seconds) + " s").c_str() : "not measured");
    auto workers = std::to_string(n) + "_workers";
    const std::string measured = "64 MiB float32, best of 5 after a warm-up, slowest member, "
                                 "bytes x 2(N-1)/N / s";

    bench::figure vs_gloo{"allreduce_busbw_MBps_" + workers, busbw, "MB/s"};
    if (gloo) {
      vs_gloo.baseline = busbw_of(gloo->seconds);
      vs_gloo.ratio = busbw / *vs_gloo.baseline;
    }
    vs_gloo.note = measured + "; baseline: torch.distributed all_reduce over gloo, " +
                   std::to_string(n) + " processes, measured the same way in the same run" +
                   (gloo ? "" : " (not measured: torch or gloo unusable)") +
                   "; ratio: actorflow / gloo";
    bench::emit(vs_gloo);

    bench::figure vs_raw{"allreduce_busbw_over_raw_tcp_" + workers, busbw, "MB/s"};
    if (raw > 0) {
      vs_raw.baseline = raw;
      vs_raw.ratio = busbw / raw;
    }
    vs_raw.note = measured + "; baseline: raw loopback TCP between two threads, 64 MiB x 16, "
                             "median of 3, same run; ratio: actorflow / raw";
    bench::emit(vs_raw);

    if (n == 2) {
      // Each member of a 2-member ring sends and receives the whole tensor's bytes at once: the
      // bound is TCP both ways at once, not one way.
      bench::figure vs_duplex{"allreduce_busbw_over_raw_tcp_duplex_" + workers, busbw, "MB/s"};
      if (duplex > 0) {
        vs_duplex.baseline = duplex;
        vs_duplex.ratio = busbw / duplex;
      }
      vs_duplex.note = measured + "; baseline: raw loopback TCP both ways at once on one "
                                  "connection (4 threads: each end writes 64 MiB x 8 while it "
                                  "reads as much), the slower way, median of 3, same run; ratio: "
                                  "actorflow / raw duplex";
      bench::emit(vs_duplex);
    }

    bench::figure latency{"allreduce_latency_us_4_bytes_" + workers, ours.latency_seconds * 1e6, "us"};
    if (gloo) {
      latency.baseline = gloo->latency_seconds * 1e6;
      latency.ratio = gloo->latency_seconds / ours.latency_seconds;
    }
    latency.note = "one float32, median of 1000 back to back after 10 warm-ups, slowest member, "
                   "actorflow halving-doubling; baseline: gloo's, measured the same way in the same run" +
                   std::string{gloo ? "" : " (not measured: torch or gloo unusable)"} +
                   "; ratio: gloo / actorflow, above 1 means actorflow is faster";
    bench::emit(latency);
  }
  return 0;
}

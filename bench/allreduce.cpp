// All-reduce bus bandwidth across worker processes on loopback: N collective_worker processes
// (a server per task, the group joined as tasks reach each other, pieces member to member)
// all-reduce 64 MiB of float32, the best of 5 after a warm-up; the slowest member's time
// counts. Bus bandwidth as NCCL's tests define it: bytes x 2 (N - 1) / N / seconds, in MB/s
// (1e6 bytes), beside raw loopback TCP measured in the same run (bench/raw_loopback.hpp). Then
// allreduce_latency_us_4_bytes_<N>_workers: the median time of an all-reduce of one float32.
//   bench_allreduce            # 2 and 4 workers
//   bench_allreduce 2          # 2 only
#include "support/processes.hpp"
#include "bench_util.hpp"
#include "raw_loopback.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr double mib = 64;

/// The slowest member's best time of a 64 MiB all-reduce over `workers` processes, and the
/// slowest member's median time of a 4-byte one (seconds); zeros on failure.
std::pair<double, double> allreduce_seconds(int workers) {
  actorflow::testing::cluster_processes cluster{
    ACTORFLOW_COLLECTIVE_WORKER_BINARY, {{"worker", workers}}, 1, [](const std::string&, int) {
      return std::vector<std::string>{"--rounds", "1", "--elements", "1000", "--bench-mib",
                                      std::to_string(mib), "--iterations", "5",
                                      "--latency-iterations", "1000"};
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

} // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes{2, 4};
  if (argc > 1)
    sizes = {bench::positive_arg(argc, argv, 1, 2)};
  auto bytes = static_cast<std::size_t>(mib * (1 << 20));
  double raw = bench::raw_loopback_mbps(bytes, 16);
  std::fprintf(stderr, "raw loopback TCP: %.0f MB/s\n", raw);
  for (int n : sizes) {
    auto [seconds, latency] = allreduce_seconds(n);
    if (seconds <= 0)
      return 1;
    double busbw = static_cast<double>(bytes) * 2.0 * (n - 1) / n / seconds / 1e6;
    std::fprintf(stderr, "%d workers: 64 MiB all-reduced in %.4f s\n", n, seconds);
    bench::figure f{"allreduce_busbw_MBps_" + std::to_string(n) + "_workers", busbw, "MB/s"};
    if (raw > 0) {
      f.baseline = raw;
      f.ratio = busbw / raw;
    }
    f.note = "64 MiB float32, best of 5, slowest member; baseline: raw loopback TCP, same run";
    bench::emit(f);
    bench::emit({"allreduce_latency_us_4_bytes_" + std::to_string(n) + "_workers", latency * 1e6,
                 "us", std::nullopt, std::nullopt,
                 "one float32, median of 1000 back to back, slowest member (halving-doubling)"});
  }
  return 0;
}

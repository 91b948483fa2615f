// A worker process for the collective tests and benchmark (tests/apps/collectives.test.cpp,
// bench/allreduce.cpp): task N of --job of --cluster, served as actorflow-worker serves one,
// joins the group of every task of its job and runs all-reduces.
//   collective_worker --cluster SPEC --job worker --task 0 --threads 1 [--elements 1001]
//                     [--rounds 3] [--leave-in-round K] [--bench-mib 64 --iterations 5]
//                     [--chunk-kib 4096] [--latency-iterations 1000]
// Prints "serving on HOST:PORT", "joined rank R of N", then per round "round K starting" and
// "round K sum exact" or
// "round K failed: <status> [origin <task>]" (and exits 1); the task given --leave-in-round K
// prints "waiting in round K" and waits there (at most 60 s) for the test to kill it. With --bench-mib, prints
// "allreduce_seconds <best of the iterations>" for an all-reduce of that many MiB of float32;
// with --latency-iterations, "allreduce_latency_us <median>" for all-reduces of one float32.
// Then "done", and it waits (at most 60 s) for its SIGTERM, so that no member leaves while
// another still reads its last pieces.
#include "actors/collective.hpp"
#include "actors/server.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

using namespace actorflow;

int main(int argc, char** argv) {
  std::string spec_text, job = "worker";
  int task = 0, threads = 1, rounds = 3, leave_in_round = -1, iterations = 5, latency = 0;
  long elements = 1001;
  double bench_mib = 0, chunk_kib = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--cluster") spec_text = value;
    else if (flag == "--job") job = value;
    else if (flag == "--task") task = std::atoi(value);
    else if (flag == "--threads") threads = std::atoi(value);
    else if (flag == "--elements") elements = std::atol(value);
    else if (flag == "--rounds") rounds = std::atoi(value);
    else if (flag == "--leave-in-round") leave_in_round = std::atoi(value);
    else if (flag == "--bench-mib") bench_mib = std::atof(value);
    else if (flag == "--iterations") iterations = std::atoi(value);
    else if (flag == "--chunk-kib") chunk_kib = std::atof(value);
    else if (flag == "--latency-iterations") latency = std::atoi(value);
  }
  auto spec = cluster_spec::parse(spec_text);
  if (!spec) {
    std::fprintf(stderr, "collective_worker: %s\n", spec.error().message().c_str());
    return 2;
  }
  auto cluster = std::make_shared<const cluster_spec>(*spec);
  server_options options;
  options.threads = threads;
  auto served = server::start(cluster, job, task, options);
  if (!served) {
    std::fprintf(stderr, "collective_worker: %s\n", served.error().message().c_str());
    return 1;
  }
  auto& srv = **served;
  std::printf("serving on %s:%u\n", srv.host().c_str(), static_cast<unsigned>(srv.port()));
  std::fflush(stdout);
  auto group = collective_group::join(srv.system(), srv.task(), *cluster, job, task, 1, 30);
  if (!group) {
    std::printf("join failed: %s\n", group.error().to_string().c_str());
    return 1;
  }
  std::printf("joined rank %d of %d\n", group->rank(), group->size());
  std::fflush(stdout);
  const int n = group->size();
  for (int round = 0; round < rounds; ++round) {
    if (round == leave_in_round) {
      // The test kills it here, once the others are done with the round before: they are then
      // inside this round's all-reduce, waiting for this member.
      std::printf("waiting in round %d\n", round);
      std::fflush(stdout);
      for (int i = 0; i < 600; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return 3;
    }
    tensor value{dtype::float32, tensor_shape{elements}};
    for (long i = 0; i < elements; ++i)
      value.data<float>()[i] = static_cast<float>((task + 1) * (i % 13 + 1) + round);
    std::printf("round %d starting\n", round);
    std::fflush(stdout);
    auto sum = group->all_reduce(value);
    if (!sum) {
      auto why = sum.error();
      std::printf("round %d failed: %s%s\n", round, why.to_string().c_str(),
                  why.origin() ? (" origin " + why.origin()->name()).c_str() : "");
      std::fflush(stdout);
      return 1;
    }
    for (long i = 0; i < elements; ++i) {
      float want = static_cast<float>(n * (n + 1) / 2 * (i % 13 + 1) + n * round);
      if (sum->data<float>()[i] != want) {
        std::printf("round %d failed: element %ld is %g, not %g\n", round, i,
                    static_cast<double>(sum->data<float>()[i]), static_cast<double>(want));
        return 1;
      }
    }
    std::printf("round %d sum exact\n", round);
    std::fflush(stdout);
  }
  if (bench_mib > 0) {
    auto count = static_cast<std::int64_t>(bench_mib * (1 << 20) / sizeof(float));
    tensor value{dtype::float32, tensor_shape{count}};
    for (std::int64_t i = 0; i < count; ++i)
      value.data<float>()[i] = static_cast<float>(i % 7);
    collective_tuning tuning;
    if (chunk_kib > 0)
      tuning.chunk_bytes = static_cast<std::size_t>(chunk_kib * 1024);
    double best = 1e30;
    for (int it = 0; it <= iterations; ++it) { // the first one warms up
      auto start = std::chrono::steady_clock::now();
      auto sum = group->all_reduce(value, reduction::sum, tuning);
      auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!sum) {
        std::printf("bench failed: %s\n", sum.error().to_string().c_str());
        return 1;
      }
      if (it > 0 && seconds < best)
        best = seconds;
    }
    std::printf("allreduce_seconds %.6f\n", best);
  }
  if (latency > 0) {
    // One float32 (4 bytes), back to back: the median time of one all-reduce.
    auto one = tensor::from_vector<float>({1.f});
    std::vector<double> times;
    for (int it = 0; it < latency + 10; ++it) { // the first 10 warm up
      auto start = std::chrono::steady_clock::now();
      auto sum = group->all_reduce(one);
      auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!sum) {
        std::printf("latency failed: %s\n", sum.error().to_string().c_str());
        return 1;
      }
      if (it >= 10)
        times.push_back(seconds);
    }
    std::sort(times.begin(), times.end());
    std::printf("allreduce_latency_us %.2f\n", times[times.size() / 2] * 1e6);
  }
  std::printf("done\n");
  std::fflush(stdout);
  // Killed by the test once every member is done; never left behind.
  for (int i = 0; i < 600; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return 0;
}

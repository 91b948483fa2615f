// A between-graph cluster of real processes at two sizes (issue 31): what a worker holds must
// not grow with the workers it does not exchange tensors with. The benchmark of the same at 32
// tasks is bench/cluster_scale.cpp.
#include "support/cluster_scale.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using actorflow::testing::cluster_run;

namespace {

/// 2 ps and `workers` workers over the subset in `data`, each worker about 55 steps.
cluster_run train(const std::string& data, int workers, int epochs) {
  std::vector<std::string> flags{"--epochs", std::to_string(epochs), "--batch-size", "16",
                                 "--learning-rate", "0.01", "--threads", "1", "--log-every",
                                 "100000", "--data-dir", data, "--output-dir", data + "/output"};
  auto run = actorflow::testing::run_between_graph_cluster(ACTORFLOW_TRAIN_BINARY,
                                                           ACTORFLOW_WORKER_BINARY, 2, workers,
                                                           flags, 90s);
  for (auto& t : run.tasks) {
    INFO(t.name << ": " << t.ending << "; stderr: " << t.stderr_text);
    CHECK(t.exit_code == 0);
    if (t.is_ps)
      // It stopped by itself, told by every worker: nobody signalled it.
      CHECK(t.stderr_text.find("all " + std::to_string(workers) + " tasks of job 'worker' finished") !=
            std::string::npos);
  }
  REQUIRE(run.all_exited_zero);
  // Ready: every worker has its session (every ps reached, the chief's initialisation awaited).
  CHECK(run.ready_seconds >= 0);
  CHECK(run.ready_seconds < 20);
  return run;
}

/// The most open fds of any worker of `run`, checking on the way that each worker's TCP
/// connections all go to the 2 ps tasks (indices 0 and 1).
int worker_fds(const cluster_run& run) {
  int most = 0;
  for (auto& t : run.tasks) {
    if (t.is_ps)
      continue;
    most = std::max(most, t.max_fds);
    int ps_peers = 0;
    for (auto [peer, count] : t.peers) {
      INFO(t.name << " has " << count << " connection(s) with task " << peer);
      // -1: a far end that had just closed (a ps's side of a finished worker, say).
      CHECK((peer < 2));
      ps_peers += peer >= 0 ? 1 : 0;
    }
    CHECK(ps_peers == 2);
  }
  return most;
}

} // namespace

TEST_CASE("between-graph with 2 ps: a worker's fds and connections stay the same from 2 to 6 workers, and every process ends by itself", "[apps][scale]") {
  actorflow::test::temp_dir data;
  // The first 1792 training examples (each worker loads the whole set: global order).
  REQUIRE(actorflow::testing::write_fashion_mnist_subset(data.path(), 1792, 200));
  // Batch 16: 56 steps per epoch per worker with 2 workers, 18 with 6.
  auto two = train(data.path(), 2, 1);
  auto six = train(data.path(), 6, 3);
  auto fds_two = worker_fds(two);
  auto fds_six = worker_fds(six);
  INFO("a worker's most open fds: " << fds_two << " with 2 workers, " << fds_six << " with 6");
  // A worker exchanges tensors with the ps only: 4 more workers cost it nothing (2 fds of
  // slack: a connection being replaced, the chief's output files).
  CHECK(fds_six <= fds_two + 2);
  CHECK(fds_two > 0);
}

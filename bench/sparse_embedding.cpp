// Sparse embedding traffic to one ps task (issue 29): a 200000 x 64 float32 table (51 MB) on an
// actorflow-worker ps process; two worker processes, each driven by a session of its own from a
// thread of this one (between-graph), look up batches of distinct ids and train their rows with
// gradient descent (SparseApplyGradientDescent on the ps, in the shard's order):
//   sparse_rows_per_s_loopback: rows the ps task served and updated per second, both workers
//     together (a step of B unique ids counts 2 B: the lookup and the update); baseline: the
//     dense analogue, bench_shard_updates' shard_updates_per_s_loopback, is per update, not row.
//   sparse_wire_bytes_per_unique_id: bytes through the ps per step for each further unique id
//     of a batch, from the ps's own counters (its --metrics-port page): the id to the shard and
//     its row back for the lookup, the id and the row's gradient for the update; baseline
//     2 x (dim x 4 + 8), what those carry without framing.
#include "support/metrics_pages.hpp"
#include "support/processes.hpp"
#include "bench_util.hpp"

#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "graph/sparse_ops.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace actorflow;
using namespace actorflow::test;
using namespace actorflow::testing;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t table_rows = 200000, dim = 64, batch = 1024;
constexpr int timed_steps = 200;

/// One worker's between-graph session: the table on the ps, the lookup and its update on
/// /job:worker/task:`task`.
struct embedding_worker {
  graph g;
  output ids, step, init;
  std::unique_ptr<session> s;

  embedding_worker(int task, const std::string& address) {
    actorflow::variable table;
    {
      auto on_ps = g.device("/job:ps/task:0");
      table = ops::variable(g, ops::zeros(g, {table_rows, dim}), "table");
    }
    {
      auto on_worker = g.device("/job:worker/task:" + std::to_string(task));
      ids = ops::placeholder(g, dtype::int64, {batch}, "ids");
      step = gradient_descent_optimizer{0.01}.minimize(ops::reduce_sum(ops::embedding_lookup(table, ids)));
    }
    init = ops::global_variables_initializer(g);
    session_options options;
    options.target = "caf://" + address;
    options.timeout_seconds = 60;
    s = std::make_unique<session>(g, options);
  }
};

/// `unique` distinct ids, repeated to fill a batch, spread over the table from `offset`.
tensor batch_of(std::int64_t unique, std::int64_t offset) {
  std::vector<std::int64_t> values;
  for (std::int64_t i = 0; i < batch; ++i)
    values.push_back((offset + (i % unique) * 97) % table_rows);
  return tensor::from_vector<std::int64_t>(values, {batch});
}

} // namespace

int main() {
  std::string addresses[3];
  for (auto& a : addresses)
    a = "127.0.0.1:" + std::to_string(free_loopback_port());
  auto metrics_port = free_loopback_port();
  auto spec = "ps=" + addresses[0] + ";worker=" + addresses[1] + "," + addresses[2];
  child_process ps{ACTORFLOW_WORKER_BINARY, {"--cluster", spec, "--job", "ps", "--task", "0",
                                             "--threads", "1", "--metrics-port",
                                             std::to_string(metrics_port)}};
  std::vector<std::unique_ptr<child_process>> workers;
  for (int t = 0; t < 2; ++t)
    workers.push_back(std::make_unique<child_process>(
      ACTORFLOW_WORKER_BINARY,
      std::vector<std::string>{"--cluster", spec, "--job", "worker", "--task", std::to_string(t),
                               "--threads", "1"}));
  if (!ps.wait_for_line("serving on", 20s) || !workers[0]->wait_for_line("serving on", 20s) ||
      !workers[1]->wait_for_line("serving on", 20s)) {
    std::fprintf(stderr, "sparse_embedding: the cluster did not start\n");
    return 1;
  }
  std::vector<std::unique_ptr<embedding_worker>> sessions;
  for (int t = 0; t < 2; ++t)
    sessions.push_back(std::make_unique<embedding_worker>(t, addresses[1 + t]));
  if (auto st = sessions[0]->s->run_targets({sessions[0]->init}); !st.ok()) {
    std::fprintf(stderr, "sparse_embedding: %s\n", st.to_string().c_str());
    return 1;
  }
  // -1 when the ps does not answer (a page of nothing would read as no bytes).
  auto ps_bytes = [&]() -> double {
    auto page = fetch_metrics(metrics_port);
    if (page.empty())
      return -1;
    return sum_of(page, "actorflow_sent_bytes_total") + sum_of(page, "actorflow_received_bytes_total");
  };

  // Bytes per step from worker 0 alone, at 64 and at 1024 unique ids.
  auto bytes_per_step = [&](std::int64_t unique) -> double {
    auto& w = *sessions[0];
    if (!w.s->run_targets({w.step}, {{w.ids, batch_of(unique, 0)}}).ok())
      return -1;
    auto before = ps_bytes();
    for (int i = 0; i < 8; ++i)
      if (!w.s->run_targets({w.step}, {{w.ids, batch_of(unique, 0)}}).ok())
        return -1;
    auto after = ps_bytes();
    return before < 0 || after < 0 ? -1 : (after - before) / 8;
  };
  auto few = bytes_per_step(64), many = bytes_per_step(batch);
  if (few < 0 || many < 0) {
    std::fprintf(stderr, "sparse_embedding: a step failed or the ps's metrics did not answer\n");
    return 1;
  }
  bench::figure bytes{"sparse_wire_bytes_per_unique_id", (many - few) / (batch - 64), "bytes",
                      2.0 * (dim * 4 + 8)};
  bytes.ratio = bytes.value / *bytes.baseline;
  bytes.note = "dim 64; (bytes per step at 1024 unique ids - at 64) / 960, the ps's counters, both "
               "ways; baseline: 2 x (dim x 4 + 8), ids and rows alone";
  bench::emit(bytes);

  // Both workers at once, every id of a batch distinct, a new stretch of the table each step.
  std::atomic<bool> failed{false};
  auto drive = [&](int t, int steps) {
    auto& w = *sessions[t];
    for (int i = 0; i < steps && !failed; ++i)
      if (!w.s->run_targets({w.step}, {{w.ids, batch_of(batch, (2 * i + t) * 7919)}}).ok())
        failed = true;
  };
  for (int t = 0; t < 2; ++t)
    drive(t, 20); // warm-up: plans made
  auto seconds = bench::time_seconds([&] {
    std::thread other{drive, 1, timed_steps};
    drive(0, timed_steps);
    other.join();
  });
  if (failed) {
    std::fprintf(stderr, "sparse_embedding: a step failed\n");
    return 1;
  }
  bench::figure rate{"sparse_rows_per_s_loopback", 2.0 * timed_steps * 2 * batch / seconds, "rows/s"};
  rate.note = "one ps task (1 thread), 2 worker processes at once, 1024 distinct ids a step, dim 64: "
              "rows looked up plus rows updated";
  bench::emit(rate);
  ps.signal(SIGTERM);
  for (auto& w : workers)
    w->signal(SIGTERM);
  return 0;
}

// Only the touched rows of a table cross the network (issue 29): a ps process holds a table of
// 20000 x 16 floats, a worker process looks up a batch of ids and trains the rows with gradient
// descent, and the ps's own byte counters (its --metrics-port page) say what crossed per step:
// the batch's unique rows there and back, not the table, growing with the unique ids only.
#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "graph/sparse_ops.hpp"
#include "support/metrics_pages.hpp"
#include "support/processes.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

using namespace actorflow;
using namespace actorflow::test;
using namespace actorflow::testing;
using namespace std::chrono_literals;

TEST_CASE("an embedding step moves the batch's unique rows between worker and ps, not the table", "[apps][sparse]") {
  constexpr std::int64_t rows = 20000, dim = 16, batch = 256;
  auto ps_address = "127.0.0.1:" + std::to_string(free_loopback_port());
  auto worker_address = "127.0.0.1:" + std::to_string(free_loopback_port());
  auto metrics_port = free_loopback_port();
  REQUIRE(metrics_port != 0);
  auto spec = "ps=" + ps_address + ";worker=" + worker_address;
  child_process ps{ACTORFLOW_WORKER_BINARY, {"--cluster", spec, "--job", "ps", "--task", "0",
                                             "--threads", "1", "--metrics-port",
                                             std::to_string(metrics_port)}};
  child_process worker{ACTORFLOW_WORKER_BINARY,
                       {"--cluster", spec, "--job", "worker", "--task", "0", "--threads", "1"}};
  REQUIRE(ps.wait_for_line("serving on", 20s));
  REQUIRE(worker.wait_for_line("serving on", 20s));

  graph g;
  actorflow::variable table;
  {
    auto on_ps = g.device("/job:ps/task:0");
    table = ops::variable(g, ops::zeros(g, {rows, dim}), "table");
  }
  output ids, step;
  {
    auto on_worker = g.device("/job:worker/task:0");
    ids = ops::placeholder(g, dtype::int64, {batch}, "ids");
    auto loss = ops::reduce_sum(ops::embedding_lookup(table, ids));
    step = gradient_descent_optimizer{0.5}.minimize(loss);
  }
  REQUIRE(g.status().ok());
  session_options options;
  options.target = "caf://" + worker_address;
  options.timeout_seconds = 20;
  session s{g, options};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());

  // A batch of `batch` ids with `unique` distinct ones, spread over the table.
  auto batch_of = [&](std::int64_t unique) {
    std::vector<std::int64_t> values;
    for (std::int64_t i = 0; i < batch; ++i)
      values.push_back((i % unique) * 71);
    return tensor::from_vector<std::int64_t>(values, {batch});
  };
  auto ps_bytes = [&] {
    auto page = fetch_metrics(metrics_port);
    REQUIRE_FALSE(page.empty());
    return sum_of(page, "actorflow_sent_bytes_total") + sum_of(page, "actorflow_received_bytes_total");
  };
  // Bytes through the ps per step, over 4 steps, after one that warms the plans up.
  auto per_step = [&](std::int64_t unique) {
    REQUIRE(s.run_targets({step}, {{ids, batch_of(unique)}}).ok());
    auto before = ps_bytes();
    for (int i = 0; i < 4; ++i)
      REQUIRE(s.run_targets({step}, {{ids, batch_of(unique)}}).ok());
    return (ps_bytes() - before) / 4;
  };
  auto few = per_step(16);
  auto many = per_step(256);
  INFO("bytes per step through the ps: " << few << " with 16 unique ids, " << many << " with 256");
  // Far below the table (1.28 MB), which never crosses.
  CHECK(few < 64 * 1024);
  // Each further unique id costs its row both ways (2 x 64 bytes) and its id (8 bytes), nothing
  // for the 256 - unique repeats: 240 more unique ids are about 240 x 136 bytes.
  auto per_unique_id = (many - few) / 240;
  CHECK(per_unique_id > 0.8 * 136);
  CHECK(per_unique_id < 1.25 * 136);

  // The steps trained the rows they touched: row 71 was in all 10 batches, 16 times per batch
  // in the first 5 (its gradient summed before it crossed) and once in the last 5.
  auto value = s.run({ops::gather(table.read, ops::constant(g, tensor::from_vector<std::int64_t>({71, 1})))});
  REQUIRE(value.ok());
  auto got = value->at(0).to_vector<float>();
  CHECK(got.at(0) == Approx(-0.5 * (5 * 16 + 5 * 1)));
  CHECK(got.at(dim) == 0.f);  // row 1: never looked up
  ps.signal(SIGTERM);
  worker.signal(SIGTERM);
  CHECK(ps.wait_exit(10s) == 0);
  CHECK(worker.wait_exit(10s) == 0);
}

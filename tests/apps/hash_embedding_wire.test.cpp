// A hash embedding on two ps processes (graph/hash_embedding.hpp): a worker process looks up and
// trains a batch's ids, each ps task makes and updates the rows its hash owns, and the ps tasks'
// own byte counters (their --metrics-port pages) say what crossed per step: the batch's unique
// rows and ids, growing with the unique ids only.
#include "actors/session.hpp"
#include "graph/hash_embedding.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
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

TEST_CASE("a hash embedding on two ps processes trains the rows each owns and moves only the batch's unique rows", "[apps][sparse][hash_embedding]") {
  constexpr std::int64_t dim = 16, batch = 256;
  std::string ps_addresses[2], worker_address = "127.0.0.1:" + std::to_string(free_loopback_port());
  int metrics_ports[2];
  for (int k = 0; k < 2; ++k) {
    ps_addresses[k] = "127.0.0.1:" + std::to_string(free_loopback_port());
    metrics_ports[k] = free_loopback_port();
    REQUIRE(metrics_ports[k] != 0);
  }
  auto spec = "ps=" + ps_addresses[0] + "," + ps_addresses[1] + ";worker=" + worker_address;
  child_process ps0{ACTORFLOW_WORKER_BINARY, {"--cluster", spec, "--job", "ps", "--task", "0", "--threads", "1",
                                              "--metrics-port", std::to_string(metrics_ports[0])}};
  child_process ps1{ACTORFLOW_WORKER_BINARY, {"--cluster", spec, "--job", "ps", "--task", "1", "--threads", "1",
                                              "--metrics-port", std::to_string(metrics_ports[1])}};
  child_process worker{ACTORFLOW_WORKER_BINARY,
                       {"--cluster", spec, "--job", "worker", "--task", "0", "--threads", "1"}};
  REQUIRE(ps0.wait_for_line("serving on", 20s));
  REQUIRE(ps1.wait_for_line("serving on", 20s));
  REQUIRE(worker.wait_for_line("serving on", 20s));

  graph g;
  hash_embedding table;
  output ids, step, rows, sizes;
  {
    // Shard k on ps task k.
    int next = 0;
    auto on_ps = g.device([&next](const node&) { return "/job:ps/task:" + std::to_string(next++); });
    table = ops::hash_embedding(g, "emb", dim, hash_initializer::constant(1.0), 2);
  }
  {
    auto on_worker = g.device("/job:worker/task:0");
    ids = ops::placeholder(g, dtype::int64, {batch}, "ids");
    rows = ops::hash_embedding_lookup(table, ids);
    step = gradient_descent_optimizer{0.5}.minimize(ops::reduce_sum(rows), table.variables());
  }
  INFO(g.status().to_string());
  REQUIRE(g.status().ok());
  session_options options;
  options.target = "caf://" + worker_address;
  options.timeout_seconds = 20;
  session s{g, options};

  // A batch of `batch` ids with `unique` distinct ones, sparse int64s.
  auto batch_of = [&](std::int64_t unique) {
    std::vector<std::int64_t> values;
    for (std::int64_t i = 0; i < batch; ++i)
      values.push_back((i % unique) * 1000003 + 17);
    return tensor::from_vector<std::int64_t>(values, {batch});
  };
  auto ps_bytes = [&] {
    double total = 0;
    for (auto port : metrics_ports) {
      auto page = fetch_metrics(port);
      REQUIRE_FALSE(page.empty());
      total += sum_of(page, "actorflow_sent_bytes_total") + sum_of(page, "actorflow_received_bytes_total");
    }
    return total;
  };
  // Bytes through the ps tasks per step, over 4 steps, after one that warms the plans up.
  auto per_step = [&](std::int64_t unique) {
    auto warm = s.run_targets({step}, {{ids, batch_of(unique)}});
    INFO(warm.to_string());
    REQUIRE(warm.ok());
    auto before = ps_bytes();
    for (int i = 0; i < 4; ++i)
      REQUIRE(s.run_targets({step}, {{ids, batch_of(unique)}}).ok());
    return (ps_bytes() - before) / 4;
  };
  auto few = per_step(16);
  auto many = per_step(256);
  INFO("bytes per step through the ps tasks: " << few << " with 16 unique ids, " << many << " with 256");
  // Each further unique id costs its id to its shard for the lookup and again with its gradient
  // (2 x 8 bytes) and its row both ways (2 x 64): 240 more unique ids are about 240 x 144 bytes.
  auto per_unique_id = (many - few) / 240;
  CHECK(per_unique_id > 0.8 * 144);
  CHECK(per_unique_id < 1.25 * 144);

  // The rows of the first 16 ids were in all 10 batches, 16 times each in the first 5 (their
  // gradients summed before they crossed) and once in the last 5: 1 - 0.5 x 85.
  auto r = s.run({rows}, {{ids, batch_of(256)}});
  REQUIRE(r.ok());
  auto got = r->at(0).to_vector<float>();
  CHECK(got.at(0) == Approx(1.0 - 0.5 * (5 * 16 + 5 * 1)));
  CHECK(got.at(16 * dim) == Approx(1.0 - 0.5 * 5));  // id 16: in the last 5 batches only
  // Both ps tasks hold rows: the 256 ids, split by their hash.
  auto counted = s.run(table.sizes());
  REQUIRE(counted.ok());
  std::int64_t expected[2] = {0, 0};
  for (std::int64_t i = 0; i < 256; ++i)
    ++expected[hash_shard_of(i * 1000003 + 17, 2)];
  CHECK(counted->at(0).scalar_value<std::int64_t>() == expected[0]);
  CHECK(counted->at(1).scalar_value<std::int64_t>() == expected[1]);
  CHECK(expected[0] > 64);
  CHECK(expected[1] > 64);
  for (auto* p : {&ps0, &ps1, &worker})
    p->signal(SIGTERM);
  for (auto* p : {&ps0, &ps1, &worker})
    CHECK(p->wait_exit(10s) == 0);
}

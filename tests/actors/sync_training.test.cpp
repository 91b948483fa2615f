// Synchronous between-graph rounds through the parameter shards: two workers with graphs of
// their own, one ps task, the same variables as one process training on the concatenated
// batches (TensorFlow's SyncReplicasOptimizer contract).
#include "actors/master.hpp"
#include "actors/protocols/ps.hpp"
#include "actors/protocols/task.hpp"
#include "actors/session.hpp"
#include "actors/session_actor.hpp"
#include "actors/task_service.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <map>
#include <random>

using namespace actorflow;
using namespace actorflow::protocol;
using namespace std::chrono_literals;

namespace {

constexpr double learning_rate = 0.5;
constexpr int rows = 8;

/// A softmax classifier of 4 features into 3 classes; W on one ps, b on another, the rest
/// where the graph's scope puts it.
struct classifier {
  graph g;
  actorflow::variable w, b;
  output x, y, loss;
  classifier(const std::string& ps_w, const std::string& ps_b, const std::string& worker) {
    {
      auto on_ps = g.device(ps_w);
      w = ops::variable(g, ops::constant(g, std::vector<float>{0.1f, -0.2f, 0.3f, 0.0f, 0.5f, -0.1f,
                                                               0.2f, 0.2f, -0.3f, 0.4f, 0.1f, 0.0f},
                                         {4, 3}),
                        "W");
    }
    {
      auto on_ps = g.device(ps_b);
      b = ops::variable(g, ops::constant(g, std::vector<float>{0.f, 0.1f, -0.1f}, {3}), "b");
    }
    auto on_worker = g.device(worker);
    x = ops::placeholder(g, dtype::float32, {-1, 4}, "x");
    y = ops::placeholder(g, dtype::float32, {-1, 3}, "y");
    loss = ops::reduce_mean(ops::softmax_cross_entropy_with_logits(ops::matmul(x, w) + b, y), {},
                            false, "loss");
  }
};

/// Batch `step` of worker `k`: `rows` examples, reproducible.
std::pair<tensor, tensor> batch(int k, int step) {
  std::mt19937 rng(static_cast<unsigned>(1000 * k + step));
  std::uniform_real_distribution<float> feature{-1.f, 1.f};
  std::vector<float> xs, ys;
  for (int r = 0; r < rows; ++r) {
    for (int f = 0; f < 4; ++f)
      xs.push_back(feature(rng));
    int label = static_cast<int>(rng() % 3);
    for (int c = 0; c < 3; ++c)
      ys.push_back(c == label ? 1.f : 0.f);
  }
  return {tensor::from_vector<float>(xs, {rows, 4}), tensor::from_vector<float>(ys, {rows, 3})};
}

tensor concat_rows(const tensor& a, const tensor& b) {
  auto va = a.to_vector<float>();
  auto vb = b.to_vector<float>();
  va.insert(va.end(), vb.begin(), vb.end());
  return tensor::from_vector<float>(va, {a.shape().dim(0) + b.shape().dim(0), a.shape().dim(1)});
}

} // namespace

TEST_CASE("sync rounds on 2 ps give the variables of one process training on the concatenated batches") {
  constexpr int steps = 5;
  auto& sys = default_actor_system();
  task_service_options task_options;
  task_options.threads = 1;
  auto ps = spawn_task_service(sys, "ps", 0, task_options);
  auto ps1 = spawn_task_service(sys, "ps", 1, task_options);

  // Two workers: their own task, a master over the ps and that task, a session.
  std::vector<task_actor> worker_tasks;
  std::vector<master_actor> masters;
  std::vector<std::unique_ptr<classifier>> models;
  std::vector<std::unique_ptr<session>> sessions;
  std::vector<std::vector<gradient_and_variable>> gradients;
  gradient_descent_optimizer sgd{learning_rate};
  for (int k = 0; k < 2; ++k) {
    worker_tasks.push_back(spawn_task_service(sys, "worker", k, task_options));
    master_options config;
    config.task_services = {ps, ps1, worker_tasks.back()};
    config.own_task = "/job:worker/replica:0/task:" + std::to_string(k);
    masters.push_back(spawn_master(sys, config));
    models.push_back(std::make_unique<classifier>("/job:ps/task:0", "/job:ps/task:1",
                                                  "/job:worker/task:" + std::to_string(k)));
    {
      auto on_worker = models.back()->g.device("/job:worker/task:" + std::to_string(k));
      gradients.push_back(sgd.compute_gradients(models.back()->loss,
                                                {models.back()->w, models.back()->b}));
    }
    session_options options;
    options.master = existing_master(masters.back());
    sessions.push_back(std::make_unique<session>(sys, models.back()->g, options));
  }
  REQUIRE(sessions[0]->run_targets({ops::global_variables_initializer(models[0]->g)}).ok());

  caf::scoped_actor self{sys};
  std::map<std::string, shard_actor> shards;
  for (auto& task : {ps, ps1})
    self->request(task, 10s, manifest_atom::value).receive(
      [&](task_manifest& m) {
        for (auto& [name, shard] : m.shards)
          shards[name] = shard;
      },
      [](caf::error&) {});
  REQUIRE(shards.count("W") == 1);
  REQUIRE(shards.count("b") == 1);

  for (int step = 0; step < steps; ++step) {
    // Both workers compute at the same global step, then push: the round closes on the second.
    std::vector<std::vector<tensor>> computed;
    for (int k = 0; k < 2; ++k) {
      auto [xs, ys] = batch(k, step);
      std::vector<output> fetches{gradients[k][0].first, gradients[k][1].first};
      auto r = sessions[k]->run(fetches, {{models[k]->x, xs}, {models[k]->y, ys}});
      REQUIRE(r.ok());
      computed.push_back(*r);
    }
    int applied = 0;
    for (int k = 0; k < 2; ++k)
      for (int v = 0; v < 2; ++v)
        self->send(shards.at(v == 0 ? "W" : "b"), accumulate_atom::value,
                   make_sync_gradient(step, k, computed[k][v], learning_rate, 2));
    for (int answers = 0; answers < 4; ++answers)
      self->receive([&](sync_outcome& o) {
        CHECK(o.applied);
        CHECK(o.global_step == step + 1);
        ++applied;
      },
                    caf::after(10s) >> [] { FAIL("a round did not complete"); });
    CHECK(applied == 4);
  }
  // A gradient from a round that is over is stale: dropped, answered at once.
  self->send(shards.at("W"), accumulate_atom::value,
             make_sync_gradient(0, 1, tensor::from_vector<float>(std::vector<float>(12, 1.f), {4, 3}),
                                learning_rate, 2));
  self->receive([&](sync_outcome& o) {
    CHECK_FALSE(o.applied);
    CHECK(o.global_step == steps);
  },
                caf::after(10s) >> [] { FAIL("no answer to a stale gradient"); });
  auto distributed = sessions[0]->run({models[0]->w.read, models[0]->b.read});
  REQUIRE(distributed.ok());

  // The reference: one process, one session, the two batches of each step concatenated.
  classifier local{"/cpu:0", "/cpu:0", "/cpu:0"};
  auto train = gradient_descent_optimizer{learning_rate}.minimize(local.loss);
  session alone{local.g};
  REQUIRE(alone.run_targets({ops::global_variables_initializer(local.g)}).ok());
  for (int step = 0; step < steps; ++step) {
    auto [x0, y0] = batch(0, step);
    auto [x1, y1] = batch(1, step);
    REQUIRE(alone.run_targets({train}, {{local.x, concat_rows(x0, x1)}, {local.y, concat_rows(y0, y1)}})
              .ok());
  }
  auto reference = alone.run({local.w.read, local.b.read});
  REQUIRE(reference.ok());
  for (int v = 0; v < 2; ++v) {
    auto got = distributed->at(v).to_vector<float>();
    auto want = reference->at(v).to_vector<float>();
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i)
      CHECK(got[i] == Approx(want[i]).margin(1e-5));
  }
  // The reference moved: the comparison is not of two untrained models.
  CHECK(reference->at(1).to_vector<float>() != std::vector<float>{0.f, 0.1f, -0.1f});

  sessions.clear();
  for (auto& t : worker_tasks)
    protocol::send_stop(t);
  for (auto& m : masters)
    protocol::send_stop(m);
  protocol::send_stop(ps);
  protocol::send_stop(ps1);
}

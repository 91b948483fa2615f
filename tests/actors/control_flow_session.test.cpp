// Loops and conds through sessions: a recurrent model trained on an in-process cluster (the
// loop on a worker, its variables on the ps) gives the single device's numbers; loops on the
// test device (its own memory, the GPU's path); placement keeps a loop on one device.
#include "actors/session.hpp"
#include "graph/control_flow.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "graph/replica_device_setter.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace actorflow;
using Catch::Matchers::Contains;

namespace {

struct recurrent_model {
  output loss, train, last_state;
  actorflow::variable w, u;
};

/// A tanh recurrence over the 6 columns of a fixed [4, 6] input, trained to make its last state
/// sum to the targets: h' = tanh(x_t w + h u), loss = mean((sum(h) - target)^2).
recurrent_model build_recurrent(graph& g) {
  recurrent_model m;
  auto x = ops::constant(g, std::vector<float>{0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f,  //
                                               0.7f, 0.8f,  -0.9f, 1.0f, 0.1f, 0.2f,   //
                                               -0.3f, 0.4f, 0.5f,  0.6f, 0.7f, -0.8f,  //
                                               0.9f, -1.0f, 0.2f,  0.3f, 0.4f, 0.5f},
                         {4, 6}, "x");
  m.w = ops::variable(g, ops::random_uniform(g, {1, 3}, -1.0, 1.0), "w");
  m.u = ops::variable(g, ops::random_uniform(g, {3, 3}, -0.5, 0.5), "u");
  auto out = ops::while_loop(
    [](const std::vector<output>& v) { return ops::less(v[0], 6.0); },
    [&](const std::vector<output>& v) {
      auto column = ops::reshape(ops::gather(x, v[0], 1), {4, 1});
      auto h = ops::tanh(ops::matmul(column, m.w) + ops::matmul(v[1], m.u));
      return std::vector<output>{v[0] + 1.0, h};
    },
    {ops::constant(g, std::int32_t{0}, "t"), ops::zeros(g, {4, 3})});
  m.last_state = out[1];
  auto target = ops::constant(g, std::vector<float>{1, -1, 0.5f, 0}, {4}, "target");
  m.loss = ops::reduce_mean(ops::square(ops::reduce_sum(out[1], {1}) - target), {}, false, "loss");
  m.train = gradient_descent_optimizer{0.2}.minimize(m.loss);
  return m;
}

std::vector<float> train_losses(session_options options, bool replicated) {
  graph g;
  g.seed = 7;
  recurrent_model m;
  if (replicated) {
    auto setter = replica_device_setter(1);
    REQUIRE(setter.ok());
    auto d = g.device(*setter);
    m = build_recurrent(g);
  } else {
    m = build_recurrent(g);
  }
  INFO(g.status().to_string());
  REQUIRE(g.status().ok());
  options.log_device_placement = true;
  session s{g, options};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  std::vector<float> losses;
  for (int step = 0; step < 30; ++step) {
    auto r = s.run({m.loss}, {}, {m.train});
    INFO(r.error().to_string());
    REQUIRE(r.ok());
    losses.push_back(r->at(0).scalar_value<float>());
  }
  if (replicated) {
    CHECK(g.at(m.w.ref.node_id).assigned_device == "/job:ps/replica:0/task:0/device:CPU:0");
    CHECK(g.at(m.last_state.node_id).assigned_device == "/job:worker/replica:0/task:0/device:CPU:0");
  }
  return losses;
}

} // namespace

TEST_CASE("a loop trained on an in-process cluster matches the single device, step for step") {
  auto local = train_losses({}, false);
  session_options cluster;
  cluster.in_process_cluster = {{"ps", 1}, {"worker", 2}};
  auto distributed = train_losses(cluster, true);
  REQUIRE(local.size() == distributed.size());
  for (std::size_t i = 0; i < local.size(); ++i)
    CHECK(distributed[i] == Approx(local[i]).epsilon(1e-5));
  // It learns: the loss falls well below where it started.
  CHECK(local.back() < 0.5f * local.front());
}

TEST_CASE("a loop on the test device gives the CPU's numbers") {
  auto cpu = train_losses({}, false);
  session_options test;
  test.test_device_count = 1;
  auto on_test_device = train_losses(test, false);
  for (std::size_t i = 0; i < cpu.size(); ++i)
    CHECK(on_test_device[i] == Approx(cpu[i]).epsilon(1e-5));
}

TEST_CASE("placement keeps a while loop and its Enters on one device") {
  graph g;
  auto x = ops::constant(g, 2.f, "x");
  output doubled;
  auto out = ops::while_loop(
    [](const std::vector<output>& v) { return ops::less(v[0], 5.0); },
    [&](const std::vector<output>& v) {
      // One node pinned to the CPU inside the loop.
      auto d = g.device("/device:CPU:0");
      doubled = v[0] + x;
      return std::vector<output>{doubled};
    },
    {ops::constant(g, 0.f, "start")});
  session_options options;
  options.test_device_count = 1;
  options.log_device_placement = true;
  session s{g, options};
  auto r = s.run({out[0]});
  INFO(r.error().to_string());
  REQUIRE(r.ok());
  CHECK(r->at(0).scalar_value<float>() == 6.f);
  // The pinned node takes the whole loop to the CPU, although the test device is preferred.
  // (The counter's initial value is made before the loop, outside it.)
  int in_loop = 0;
  for (auto& line : s.placement_log())
    if (line.rfind("while/", 0) == 0 && line.rfind("while/iteration_counter:", 0) != 0) {
      ++in_loop;
      CHECK_THAT(line, Contains("device:CPU:0"));
    }
  CHECK(in_loop > 10);
}

TEST_CASE("a cond through a session takes the branch its predicate picks") {
  graph g;
  auto p = ops::placeholder(g, dtype::boolean, {}, "p");
  auto x = ops::constant(g, 5.f, "x");
  auto y = ops::cond(p, [&] { return x * x; }, [&] { return x - 1.0; });
  session s{g};
  auto yes = s.run({y}, {{p, tensor::scalar(true)}});
  auto no = s.run({y}, {{p, tensor::scalar(false)}});
  REQUIRE(yes.ok());
  REQUIRE(no.ok());
  CHECK(yes->at(0).scalar_value<float>() == 25.f);
  CHECK(no->at(0).scalar_value<float>() == 4.f);
}

#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "graph/replica_device_setter.hpp"

#include <catch2/catch.hpp>

#include <random>

using namespace actorflow;

TEST_CASE("an in-process cluster of one ps and two workers trains with variables on the ps") {
  std::mt19937_64 rng{1};
  std::uniform_real_distribution<float> uniform{0.f, 1.f};
  std::vector<float> x_data(100), y_data(100);
  for (std::size_t i = 0; i < x_data.size(); ++i) {
    x_data[i] = uniform(rng);
    y_data[i] = x_data[i] * 0.1f + 0.3f;
  }
  graph g;
  g.seed = 1;
  auto setter = replica_device_setter(1);
  REQUIRE(setter.ok());
  actorflow::variable w, b;
  output train, y;
  {
    auto d = g.device(*setter);
    w = ops::variable(g, ops::random_uniform(g, {1}, -1.0, 1.0), "Weights");
    b = ops::variable(g, ops::zeros(g, {1}), "biases");
    {
      auto worker1 = g.device("/task:1");
      y = w * ops::constant(g, x_data, {100}) + b;
    }
    auto loss = ops::reduce_mean(ops::square(y - ops::constant(g, y_data, {100})));
    train = gradient_descent_optimizer{0.5}.minimize(loss);
  }
  REQUIRE(g.status().ok());
  session_options options;
  options.in_process_cluster = {{"ps", 1}, {"worker", 2}};
  session s{g, options};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  for (int step = 0; step < 300; ++step)
    REQUIRE(s.run_targets({train}).ok());
  auto values = s.run({w.read, b.read});
  REQUIRE(values.ok());
  CHECK(values->at(0).scalar_value<double>() == Approx(0.1).margin(1e-3));
  CHECK(values->at(1).scalar_value<double>() == Approx(0.3).margin(1e-3));
  CHECK(g.at(w.ref.node_id).assigned_device == "/job:ps/replica:0/task:0/device:CPU:0");
  CHECK(g.at(y.node_id).assigned_device == "/job:worker/replica:0/task:1/device:CPU:0");
  auto names = s.device_names();
  CHECK(names.size() == 3);
}

TEST_CASE("an update written inside a worker's device block runs where its variable lives") {
  graph g;
  actorflow::variable counter;
  {
    auto d = g.device("/job:ps/task:0");
    counter = ops::variable(g, 0.f, "counter");
  }
  output step;
  {
    auto d = g.device("/job:worker/task:1");
    step = ops::assign_add(counter, ops::constant(g, 2.f));
  }
  session_options options;
  options.in_process_cluster = {{"ps", 1}, {"worker", 2}};
  session s{g, options};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  for (int i = 0; i < 3; ++i)
    REQUIRE(s.run_targets({step}).ok());
  auto r = s.run({counter.read});
  REQUIRE(r.ok());
  CHECK(r->at(0).scalar_value<float>() == 6.f);
  CHECK(g.at(step.node_id).assigned_device == "/job:ps/replica:0/task:0/device:CPU:0");
}

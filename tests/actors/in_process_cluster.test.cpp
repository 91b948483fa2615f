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

TEST_CASE("a fenced step run again leaves its variable updates applied once") {
  graph g;
  actorflow::variable counter;
  {
    auto d = g.device("/job:ps/task:0");
    counter = ops::variable(g, 0.f, "counter");
  }
  // One increment computed on the worker and applied on the ps; one applied on the ps twice
  // in the same step through two nodes (each node is its own claim).
  output plus_one, plus_ten;
  {
    auto d = g.device("/job:worker/task:0");
    plus_one = ops::assign_add(counter, ops::constant(g, 1.f) * ops::constant(g, 1.f));
  }
  plus_ten = ops::assign_add(counter, ops::constant(g, 10.f));
  session_options options;
  options.in_process_cluster = {{"ps", 1}, {"worker", 1}};
  session s{g, options};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  auto value = [&] { return s.run({counter.read})->at(0).scalar_value<float>(); };
  auto fenced = [&](std::uint64_t owner, std::int64_t closure, std::int32_t run,
                    std::int64_t settled_below, const std::vector<output>& targets) {
    run_options per_step;
    per_step.fence = update_fence{owner, closure, run, settled_below};
    return s.run_with(per_step, {}, {}, targets);
  };

  // Closure 1, its first step, three attempts: applied once.
  for (int attempt = 0; attempt < 3; ++attempt)
    REQUIRE(fenced(42, 1, 0, 1, {plus_one}).ok());
  CHECK(value() == 1.f);
  // A repeat still yields the variable (AssignAdd's output) without touching it.
  run_options repeat;
  repeat.fence = update_fence{42, 1, 0, 1};
  auto yielded = s.run_with(repeat, {plus_one});
  REQUIRE(yielded.ok());
  CHECK(yielded->at(0).scalar_value<float>() == 1.f);
  CHECK(value() == 1.f);
  // The closure's second step, another closure, another owner: each applies once.
  REQUIRE(fenced(42, 1, 1, 1, {plus_one}).ok());
  REQUIRE(fenced(42, 2, 0, 1, {plus_one, plus_ten}).ok());
  REQUIRE(fenced(42, 2, 0, 1, {plus_one, plus_ten}).ok());
  REQUIRE(fenced(43, 1, 0, 1, {plus_one}).ok());
  CHECK(value() == 14.f);
  // Once closures below 3 have settled, a late attempt of closure 2 is refused, also for the
  // node it had not reached.
  REQUIRE(fenced(42, 3, 0, 3, {plus_one}).ok());
  REQUIRE(fenced(42, 2, 5, 3, {plus_ten}).ok());
  CHECK(value() == 15.f);
  // Unfenced steps apply every time.
  REQUIRE(s.run_targets({plus_one}).ok());
  REQUIRE(s.run_targets({plus_one}).ok());
  CHECK(value() == 17.f);
}

TEST_CASE("an all-or-nothing step applies its updates on every ps or, when a part of it fails, on none") {
  graph g;
  actorflow::variable a, b, c;
  {
    auto d = g.device("/job:ps/task:0");
    a = ops::variable(g, 0.f, "a");
  }
  {
    auto d = g.device("/job:ps/task:1");
    b = ops::variable(g, 0.f, "b");
    c = ops::variable(g, 0.f, "c");
  }
  output up_a, up_b, up_c;
  output x;
  {
    auto d = g.device("/job:worker/task:0");
    x = ops::placeholder(g, dtype::float32, tensor_shape::unknown(), "x");
    up_a = ops::assign_add(a, ops::reduce_sum(x * ops::constant(g, 1.f)));
  }
  {
    // b's delta fails unless x has exactly one element, and only after a slow product: a's
    // delta has long arrived on the other ps by then.
    auto d = g.device("/job:ps/task:1");
    auto big = ops::ones(g, {384, 384});
    auto slow = ops::reduce_sum(ops::matmul(big, big)) * ops::constant(g, 0.f);
    up_b = ops::assign_add(b, ops::reduce_sum(ops::reshape(x + slow, {1})));
  }
  {
    // A later update, after the first ones: it applies once they have (never held itself).
    auto d = g.device("/job:worker/task:0");
    auto after = g.control_dependencies({up_a, up_b});
    up_c = ops::assign_add(c, ops::constant(g, 1.f));
  }
  session_options options;
  options.in_process_cluster = {{"ps", 2}, {"worker", 1}};
  session s{g, options};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  auto values = [&] {
    auto r = s.run({a.read, b.read, c.read});
    REQUIRE(r.ok());
    return std::vector<float>{r->at(0).scalar_value<float>(), r->at(1).scalar_value<float>(),
                              r->at(2).scalar_value<float>()};
  };
  run_options all_or_nothing;
  all_or_nothing.all_or_nothing = true;
  auto one = tensor::from_vector<float>({1.f});
  auto two = tensor::from_vector<float>({1.f, 1.f});

  for (int i = 0; i < 3; ++i)
    REQUIRE(s.run_with(all_or_nothing, {}, {{x, one}}, {up_a, up_b, up_c}).ok());
  CHECK(values() == std::vector<float>{3.f, 3.f, 3.f});
  // b's delta cannot be computed: a's update, ready and held on the other ps, is not applied.
  for (int i = 0; i < 5; ++i) {
    auto failed = s.run_with(all_or_nothing, {}, {{x, two}}, {up_a, up_b, up_c});
    REQUIRE_FALSE(failed.ok());
    CHECK(failed.error().message().find("Reshape") != std::string::npos);
    CHECK(values() == std::vector<float>{3.f, 3.f, 3.f});
  }
  // Steps keep working afterwards.
  REQUIRE(s.run_with(all_or_nothing, {}, {{x, one}}, {up_a, up_b, up_c}).ok());
  CHECK(values() == std::vector<float>{4.f, 4.f, 4.f});
}

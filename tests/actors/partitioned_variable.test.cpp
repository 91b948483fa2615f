// Partitioned variables in real sessions: shards on two ps tasks of an in-process cluster,
// initialised slice by slice, read whole through ConcatV2, and trained shard by shard to the
// same values as one unpartitioned variable.
#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "graph/partitioned_variable.hpp"
#include "graph/replica_device_setter.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

using namespace actorflow;

namespace {

constexpr std::uint64_t seed = 20240917;

tensor uniform_floats(std::mt19937_64& engine, tensor_shape shape) {
  tensor t{dtype::float32, std::move(shape)};
  std::uniform_real_distribution<float> dist{-1.f, 1.f};
  for (std::int64_t i = 0; i < t.num_elements(); ++i)
    t.data<float>()[i] = dist(engine);
  return t;
}

session_options two_ps_one_worker() {
  session_options options;
  options.in_process_cluster = {{"ps", 2}, {"worker", 1}};
  return options;
}

/// A linear model y = x w + b trained with gradient descent on fixed data; w is either one
/// variable or a partitioned one, both starting from `w0`.
struct linear_model {
  graph g;
  output x, labels, loss, train, w_value;
  partitioned_variable partitioned;

  linear_model(const tensor& w0, int shards) {
    auto setter = replica_device_setter(2);
    REQUIRE(setter.ok());
    auto dev = g.device(*setter);
    x = ops::placeholder(g, dtype::float32, {-1, 10}, "x");
    labels = ops::placeholder(g, dtype::float32, {-1, 3}, "labels");
    output w;
    std::vector<variable> vars;
    if (shards > 0) {
      partitioned = ops::partitioned_variable(g, "w", w0.shape(), constant_initializer(w0),
                                              fixed_size_partitioner(shards));
      w = partitioned.as_tensor();
      vars = partitioned.shards();
    } else {
      auto plain = ops::variable(g, ops::constant(g, w0), "w");
      w = plain.read;
      vars = {plain};
    }
    auto b = ops::variable(g, ops::zeros(g, {3}), "b");
    vars.push_back(b);
    auto prediction = ops::matmul(x, w) + b;
    loss = ops::reduce_mean(ops::square(prediction - labels), {}, false, "loss");
    train = gradient_descent_optimizer{0.5}.minimize(loss, vars);
    w_value = w;
  }
};

} // namespace

TEST_CASE("a partitioned weight trains to the same values as an unpartitioned one",
          "[actors][partitioned_variable]") {
  INFO("seed " << seed);
  std::mt19937_64 engine{seed};
  auto w0 = uniform_floats(engine, {10, 3});
  auto w_true = uniform_floats(engine, {10, 3});
  auto inputs = uniform_floats(engine, {64, 10});
  // Labels from a known linear map plus a bias, so the loss can reach zero.
  tensor labels{dtype::float32, {64, 3}};
  for (std::int64_t r = 0; r < 64; ++r)
    for (std::int64_t c = 0; c < 3; ++c) {
      float sum = 0.25f;
      for (std::int64_t k = 0; k < 10; ++k)
        sum += inputs.data<float>()[r * 10 + k] * w_true.data<float>()[k * 3 + c];
      labels.data<float>()[r * 3 + c] = sum;
    }

  linear_model plain{w0, 0};
  linear_model sharded{w0, 3};
  INFO(plain.g.status().to_string() << " / " << sharded.g.status().to_string());
  REQUIRE(plain.g.status().ok());
  REQUIRE(sharded.g.status().ok());

  auto train = [&](linear_model& m) {
    session s{m.g, two_ps_one_worker()};
    REQUIRE(s.run_targets({ops::global_variables_initializer(m.g)}).ok());
    auto start = s.run({m.w_value});
    INFO(start.error().to_string());
    REQUIRE(start.ok());
    // Both start from w0 exactly: the shards' constants are w0's rows.
    CHECK(start->at(0).to_vector<float>() == w0.to_vector<float>());
    feed_list data{{m.x, inputs}, {m.labels, labels}};
    for (int step = 0; step < 300; ++step) {
      auto r = s.run_targets({m.train}, data);
      INFO("step " << step << ": " << r.to_string());
      REQUIRE(r.ok());
    }
    auto end = s.run({m.w_value, m.loss}, data);
    INFO(end.error().to_string());
    REQUIRE(end.ok());
    CHECK(end->at(1).scalar_value<double>() < 1e-6);
    return end->at(0).to_vector<double>();
  };
  auto plain_w = train(plain);
  auto sharded_w = train(sharded);
  REQUIRE(plain_w.size() == sharded_w.size());
  auto expected = w_true.to_vector<double>();
  for (std::size_t i = 0; i < plain_w.size(); ++i) {
    INFO("element " << i);
    CHECK(std::abs(sharded_w[i] - plain_w[i]) <= 1e-5);
    CHECK(std::abs(plain_w[i] - expected[i]) <= 1e-2);
  }

  // Each shard lives on its own ps task and is updated by its own Apply op next to it.
  const std::vector<std::string> devices{"/job:ps/replica:0/task:0/device:CPU:0",
                                         "/job:ps/replica:0/task:1/device:CPU:0",
                                         "/job:ps/replica:0/task:0/device:CPU:0"};
  auto& g = sharded.g;
  REQUIRE(sharded.partitioned.shards().size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    auto& shard = sharded.partitioned.shards()[i];
    INFO(shard.name());
    CHECK(shard.ref.producer().assigned_device == devices[i]);
    auto apply = g.find("GradientDescent/update_" + shard.name() + "/ApplyGradientDescent");
    REQUIRE(apply >= 0);
    CHECK(g.at(apply).inputs[0].node_id == shard.ref.node_id);
    CHECK(g.at(apply).attr_or<std::string>("colocate_with", "") == shard.name());
    CHECK(g.at(apply).assigned_device == devices[i]);
  }
  CHECK(sharded.w_value.producer().assigned_device == "/job:worker/replica:0/task:0/device:CPU:0");
}

TEST_CASE("random initializers give each shard its own numbers and as_tensor joins them",
          "[actors][partitioned_variable]") {
  graph g;
  partitioned_variable w;
  output whole;
  {
    auto setter = replica_device_setter(2);
    REQUIRE(setter.ok());
    auto dev = g.device(*setter);
    w = ops::partitioned_variable(g, "w", {6, 4}, truncated_normal_initializer(0.0, 1.0, 3),
                                  fixed_size_partitioner(2, 1), dtype::float64);
    whole = w.as_tensor();
  }
  INFO(g.status().to_string());
  REQUIRE(g.status().ok());
  session s{g, two_ps_one_worker()};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  auto r = s.run({w.shards()[0].read, w.shards()[1].read, whole});
  INFO(r.error().to_string());
  REQUIRE(r.ok());
  auto left = r->at(0).to_vector<double>();
  auto right = r->at(1).to_vector<double>();
  auto joined = r->at(2).to_vector<double>();
  REQUIRE(r->at(2).shape() == (tensor_shape{6, 4}));
  // Shards of equal shape with seeds 3 and 4 draw different numbers.
  CHECK(left != right);
  for (std::int64_t row = 0; row < 6; ++row)
    for (std::int64_t col = 0; col < 4; ++col) {
      auto& shard = col < 2 ? left : right;
      auto expected = shard[static_cast<std::size_t>(row * 2 + col % 2)];
      CHECK(joined[static_cast<std::size_t>(row * 4 + col)] == expected);
      CHECK(std::abs(expected) < 2.0);
    }
}

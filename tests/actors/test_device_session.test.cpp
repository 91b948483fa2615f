// Sessions on the test device (devices/test_device.hpp), which takes a GPU's path: placement
// prefers it, tensors cross between it and the CPU through copies on its streams, training on
// it gives the CPU's numbers, and running out of its memory is an error naming the node.
#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "graph/shape_ops.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace actorflow;
using Catch::Matchers::Contains;

namespace {

const std::string test0 = "/job:localhost/replica:0/task:0/device:TEST:0";
const std::string cpu0 = "/job:localhost/replica:0/task:0/device:CPU:0";

session_options with_test_device() {
  session_options options;
  options.test_device_count = 1;
  options.log_device_placement = true;
  return options;
}

std::string placed(const session& s, const std::string& name) {
  for (auto& line : s.placement_log())
    if (line.rfind(name + ": ", 0) == 0)
      return line.substr(name.size() + 2);
  return {};
}

/// w after three steps of gradient descent on sum((w*x - y)^2), and the losses on the way.
std::vector<float> train_three_steps(session_options options) {
  graph g;
  auto w = ops::variable(g, ops::constant(g, std::vector<float>{0.5f, -1.f, 2.f}, {3, 1}), "w");
  auto x = ops::constant(g, std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, "x");
  auto y = ops::constant(g, std::vector<float>{1, -1}, {2, 1}, "y");
  auto err = ops::matmul(x, w.read) - y;
  auto loss = ops::reduce_sum(err * err, {}, false, "loss");
  gradient_descent_optimizer sgd{0.01};
  auto train = sgd.minimize(loss);
  REQUIRE(g.status().ok());
  session s{g, options};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  std::vector<float> out;
  for (int step = 0; step < 3; ++step) {
    auto r = s.run({loss}, {}, {train});
    INFO(r.error().to_string());
    REQUIRE(r.ok());
    out.push_back(r->at(0).scalar_value<float>());
  }
  auto final_w = s.run({w.read});
  REQUIRE(final_w.ok());
  for (auto v : final_w->at(0).to_vector<float>())
    out.push_back(v);
  if (options.test_device_count > 0)
    CHECK(placed(s, "loss") == test0);
  return out;
}

} // namespace

TEST_CASE("unpinned nodes go to the test device as they would to a GPU") {
  graph g;
  auto a = ops::variable(g, 3.f, "a");
  output b;
  {
    auto cpu = g.device("/cpu:0");
    b = ops::constant(g, 4.f, "b");
  }
  auto c = a * b;
  session s{g, with_test_device()};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  auto r = s.run({c});
  INFO(r.error().to_string());
  REQUIRE(r.ok());
  CHECK(r->at(0).on_host());
  CHECK(r->at(0).scalar_value<float>() == 12.f);
  CHECK(placed(s, "b") == cpu0);
  CHECK(placed(s, "mul") == test0);
  CHECK(placed(s, "a") == test0);
}

TEST_CASE("tensors cross between the CPU and the test device both ways within a step") {
  graph g;
  output x, z;
  {
    auto cpu = g.device("/cpu:0");
    x = ops::constant(g, std::vector<float>{1, 2, 3}, {3}, "x");
  }
  auto y = ops::square(x, "y"); // on the test device
  {
    auto cpu = g.device("/cpu:0");
    z = ops::add(y, ops::constant(g, 1.f, "one"), "z");
  }
  auto w = ops::mul(z, ops::constant(g, 2.f, "two"), "w"); // back on the test device
  session s{g, with_test_device()};
  auto r = s.run({w, z});
  INFO(r.error().to_string());
  REQUIRE(r.ok());
  CHECK(placed(s, "y") == test0);
  CHECK(placed(s, "z") == cpu0);
  CHECK(placed(s, "w") == test0);
  CHECK(r->at(0).to_vector<float>() == std::vector<float>{4, 10, 20});
  CHECK(r->at(1).to_vector<float>() == std::vector<float>{2, 5, 10});
}

TEST_CASE("gradient descent on the test device gives exactly the CPU's numbers") {
  session_options on_cpu;
  on_cpu.test_device_count = 0;
  auto cpu = train_three_steps(on_cpu);
  auto test = train_three_steps(with_test_device());
  CHECK(test == cpu);
  // The loss went down: the steps did something.
  CHECK(cpu.at(1) < cpu.at(0));
}

TEST_CASE("running out of test device memory fails the run naming the node and the bytes") {
  graph g;
  auto big = ops::fill(g, {1024, 1024}, ops::constant(g, 1.f, "one"), "big");
  auto small = ops::fill(g, {4}, ops::constant(g, 3.f, "three"), "small");
  auto options = with_test_device();
  // 0.004 of the test device's 256 MiB card: about 1 MiB.
  options.gpu.per_process_gpu_memory_fraction = 0.004;
  session s{g, options};
  auto r = s.run({big});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == errc::resource_exhausted);
  CHECK_THAT(r.error().message(), Contains("node 'big'") && Contains("TEST:0") &&
                                    Contains("cannot allocate 4.0 MiB") && Contains("in use"));
  // The session goes on.
  auto ok = s.run({small});
  REQUIRE(ok.ok());
  CHECK(ok->at(0).to_vector<float>() == std::vector<float>(4, 3.f));
}

TEST_CASE("a node pinned to a missing test device fails, or moves with soft placement") {
  graph g;
  output x;
  {
    auto missing = g.device("/device:TEST:3");
    x = ops::constant(g, 2.f, "x") * 5.f;
  }
  {
    session s{g, with_test_device()};
    auto r = s.run({x});
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message(), Contains("/device:TEST:3"));
  }
  auto soft = with_test_device();
  soft.allow_soft_placement = true;
  session s{g, soft};
  auto r = s.run({x});
  INFO(r.error().to_string());
  REQUIRE(r.ok());
  CHECK(r->at(0).scalar_value<float>() == 10.f);
  CHECK(placed(s, "mul") == test0);
}

TEST_CASE("tasks of an in-process cluster pass tensors between their test devices") {
  graph g;
  output x, y;
  {
    auto first = g.device("/job:worker/task:0/device:TEST:0");
    x = ops::square(ops::constant(g, std::vector<float>{1, 2}, {2}, "x0"), "x");
  }
  {
    auto second = g.device("/job:worker/task:1/device:TEST:0");
    y = ops::add(x, x, "y");
  }
  auto options = with_test_device();
  options.in_process_cluster = {{"worker", 2}};
  session s{g, options};
  auto r = s.run({y});
  INFO(r.error().to_string());
  REQUIRE(r.ok());
  CHECK(r->at(0).to_vector<float>() == std::vector<float>{2, 8});
  CHECK(placed(s, "y") == "/job:worker/replica:0/task:1/device:TEST:0");
}

TEST_CASE("Transpose, Shape, Size and Rank of a fed batch run on the test device and fetch to "
          "the host") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, tensor_shape{-1, 3}, "x");
  auto moved = ops::transpose(x * 2.0, {1, 0}, "moved");
  auto dims = ops::shape(moved, dtype::int32, "dims");
  auto count = ops::size(moved, dtype::int64, "count");
  auto rank = ops::rank(moved, "rank");
  REQUIRE(g.status().ok());
  session s{g, with_test_device()};
  for (std::int64_t batch : {2, 5}) {
    INFO("batch " << batch);
    std::vector<float> values;
    for (std::int64_t i = 0; i < batch * 3; ++i)
      values.push_back(static_cast<float>(i));
    auto r = s.run({moved, dims, count, rank}, {{x, tensor::from_vector(values, {batch, 3})}});
    INFO(r.error().to_string());
    REQUIRE(r.ok());
    auto& t = r->at(0);
    REQUIRE(t.shape() == tensor_shape{3, batch});
    auto got = t.to_vector<float>();
    for (std::int64_t row = 0; row < 3; ++row)
      for (std::int64_t column = 0; column < batch; ++column)
        CHECK(got[static_cast<std::size_t>(row * batch + column)] == 2.0f * static_cast<float>(column * 3 + row));
    CHECK(r->at(1).to_vector<std::int32_t>() == std::vector<std::int32_t>{3, static_cast<std::int32_t>(batch)});
    CHECK(r->at(2).scalar_value<std::int64_t>() == 3 * batch);
    CHECK(r->at(3).scalar_value<std::int32_t>() == 2);
  }
  for (auto* name : {"moved", "dims", "count", "rank"}) {
    INFO(name);
    CHECK(placed(s, name) == test0);
  }
}

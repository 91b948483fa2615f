// CollectiveReduce nodes (graph/collective_ops.hpp) on CAF's test scheduler: two devices of one
// session stand for two tasks, each offered its own member of one group, so a step runs both
// members' parts; gradient buckets (all_reduce_in_buckets) pack values from the last back and
// cut the reduced bucket into the values' shapes; a node with no group offered, and a member
// whose partner's step failed, end the step with an error instead of waiting. On two test
// devices (devices/test_device.hpp: a GPU's memory path, the CPU's kernel), in a threaded
// system, the nodes copy out of and back into device memory and still sum exactly.
#include "actors/collective.hpp"
#include "actors/testing.hpp"
#include "graph/collective_ops.hpp"
#include "graph/math_ops.hpp"
#include "graph/ops.hpp"
#include "support/offered_group.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

using namespace actorflow;

namespace {

std::string cpu(int index) {
  return "/job:localhost/replica:0/task:0/device:CPU:" + std::to_string(index);
}

std::string test_device(int index) {
  return "/job:localhost/replica:0/task:0/device:TEST:" + std::to_string(index);
}

tensor filled(std::vector<std::int64_t> dims, float first, float step) {
  tensor t{dtype::float32, tensor_shape{dims}};
  for (std::int64_t i = 0; i < t.num_elements(); ++i)
    t.data<float>()[i] = first + step * static_cast<float>(i);
  return t;
}

} // namespace

TEST_CASE("collective reduce nodes on two devices sum and average their values exactly, bucket by bucket, run after run") {
  testing::deterministic_system sys;
  testing::offered_group group{sys, 2, "replicas", cpu};
  graph g;
  // Per device: a [3, 4] value (48 bytes), a [4] and a [2, 2] one (16 bytes each), as a model's
  // gradients come; buckets of 64 bytes take the [2, 2] and [4] ones first, then the [3, 4].
  std::vector<std::vector<output>> fed(2), summed(2), averaged(2);
  int buckets = 0;
  for (int r = 0; r < 2; ++r) {
    auto here = g.device("/cpu:" + std::to_string(r));
    for (auto& dims : std::vector<std::vector<std::int64_t>>{{3, 4}, {4}, {2, 2}})
      fed[r].push_back(ops::placeholder(g, dtype::float32, tensor_shape{dims}));
    ops::bucket_options sum;
    sum.bytes = 64;
    sum.first_bytes = 64;
    sum.reduction = "sum";
    summed[r] = ops::all_reduce_in_buckets(fed[r], "replicas", sum, &buckets);
    ops::bucket_options mean = sum;
    mean.reduction = "mean";
    mean.first_instance = 10;
    averaged[r] = ops::all_reduce_in_buckets(fed[r], "replicas", mean);
  }
  REQUIRE(g.status().ok());
  CHECK(buckets == 2);
  session_options base;
  base.cpu_device_count = 2;
  session s{sys.system(), g, sys.session_options(base)};
  std::vector<output> fetches;
  for (int r = 0; r < 2; ++r) {
    fetches.insert(fetches.end(), summed[r].begin(), summed[r].end());
    fetches.insert(fetches.end(), averaged[r].begin(), averaged[r].end());
  }
  for (int run = 0; run < 3; ++run) {
    INFO("run " << run);
    feed_list feeds;
    std::vector<std::vector<tensor>> values(2);
    for (int r = 0; r < 2; ++r)
      for (auto& in : fed[r]) {
        values[r].push_back(filled(in.shape().dims(), static_cast<float>(run * 10 + r), 0.5f * (r + 1)));
        feeds.emplace_back(in, values[r].back());
      }
    auto out = s.run(fetches, feeds);
    REQUIRE(out.ok());
    for (int r = 0; r < 2; ++r)
      for (std::size_t v = 0; v < 3; ++v) {
        auto& sum = out->at(static_cast<std::size_t>(r) * 6 + v);
        auto& mean = out->at(static_cast<std::size_t>(r) * 6 + 3 + v);
        REQUIRE(sum.shape() == values[0][v].shape());
        REQUIRE(mean.shape() == values[0][v].shape());
        for (std::int64_t i = 0; i < sum.num_elements(); ++i) {
          float expected = values[0][v].data<float>()[i] + values[1][v].data<float>()[i];
          CHECK(sum.data<float>()[i] == expected);
          CHECK(mean.data<float>()[i] == expected / 2);
        }
      }
  }
}

TEST_CASE("gradient buckets fill from the last value back, close at their size or a new dtype, and the first is the smaller") {
  graph g;
  auto a = ops::placeholder(g, dtype::float32, {1000});  // 4000 bytes
  auto b = ops::placeholder(g, dtype::float32, {100});   // 400
  auto c = ops::placeholder(g, dtype::float64, {50});    // 400
  auto d = ops::placeholder(g, dtype::float64, {50});    // 400
  auto e = ops::placeholder(g, dtype::float64, {10});    // 80
  ops::bucket_options options;
  options.bytes = 4400;
  options.first_bytes = 480;
  int buckets = 0;
  auto reduced = ops::all_reduce_in_buckets({a, b, c, d, e}, "replicas", options, &buckets);
  REQUIRE(g.status().ok());
  // e + d fill the first bucket (480 bytes), c opens the second, b (float32) the third, which
  // a joins (4400 bytes).
  CHECK(buckets == 3);
  std::vector<std::int64_t> instances;
  std::vector<std::int64_t> sizes;
  for (std::size_t id = 0; id < g.size(); ++id) {
    auto& n = g.at(static_cast<int>(id));
    if (n.op != "CollectiveReduce")
      continue;
    instances.push_back(n.attr_or<std::int64_t>("instance_key", 0));
    sizes.push_back(g.output_of(static_cast<int>(id), 0).shape().num_elements());
    CHECK(n.attr_or<std::string>("collective_group", "") == "replicas");
    CHECK(n.attr_or<std::string>("reduction", "") == "mean");
  }
  CHECK(instances == std::vector<std::int64_t>{1, 2, 3});
  CHECK(sizes == std::vector<std::int64_t>{60, 50, 1100});
  std::vector<output> values{a, b, c, d, e};
  for (std::size_t i = 0; i < values.size(); ++i) {
    CHECK(reduced[i].type() == values[i].type());
    CHECK(reduced[i].shape() == values[i].shape());
  }
  // 4095 is the groups' own (devices/task_collective.hpp's bootstrap_collective_instance).
  ops::collective_reduce(a, "replicas", 4095);
  CHECK(g.status().message().find("instance key 4095 is not in 1..4094") != std::string::npos);
}

TEST_CASE("a collective reduce node whose device was offered no group fails the step naming the group and the device") {
  testing::deterministic_system sys;
  graph g;
  auto x = ops::constant(g, std::vector<float>{1, 2}, tensor_shape{2});
  auto y = ops::collective_reduce(x, "nobody", 1, "sum", "reduce_x");
  session s{sys.system(), g, sys.session_options()};
  auto out = s.run({y});
  REQUIRE_FALSE(out.ok());
  CHECK(out.error().code() == errc::failed_precondition);
  CHECK(out.error().message().find("no collective group 'nobody' is offered to device " + cpu(0)) !=
        std::string::npos);
  CHECK(out.error().message().find("reduce_x") != std::string::npos);
}

TEST_CASE("a collective reduce node waiting for a member whose own step failed ends with that step instead of waiting") {
  testing::deterministic_system sys;
  testing::offered_group group{sys, 2, "replicas", cpu};
  graph g;
  output waiting, never;
  {
    auto here = g.device("/cpu:0");
    waiting = ops::collective_reduce(ops::constant(g, std::vector<float>{1, 2}, tensor_shape{2}),
                                     "replicas", 1, "sum", "waits");
  }
  {
    // CPU:1's part never starts: its input fails first (an integer division by zero).
    auto here = g.device("/cpu:1");
    auto broken = ops::floor_div(ops::constant(g, std::int32_t{1}), ops::constant(g, std::int32_t{0}),
                                 "divides_by_zero");
    never = ops::collective_reduce(ops::cast(broken, dtype::float32), "replicas", 1, "sum");
  }
  session_options base;
  base.cpu_device_count = 2;
  session s{sys.system(), g, sys.session_options(base)};
  auto out = s.run({waiting, never});
  REQUIRE_FALSE(out.ok());
  CHECK(out.error().message().find("divides_by_zero") != std::string::npos);
}

TEST_CASE("collective reduce nodes on two test devices copy out of and back into device memory and sum exactly, run after run") {
  caf::actor_system_config config;
  caf::actor_system sys{config};
  testing::offered_group group{sys, 2, "replicas", test_device};
  graph g;
  std::vector<output> fed(2), summed(2), ints(2), int_sums(2);
  for (int r = 0; r < 2; ++r) {
    auto here = g.device("/device:TEST:" + std::to_string(r));
    fed[r] = ops::placeholder(g, dtype::float32, tensor_shape{2, 3});
    summed[r] = ops::collective_reduce(fed[r], "replicas", 1, "sum", "sum_" + std::to_string(r));
    ints[r] = ops::placeholder(g, dtype::int64, tensor_shape{4});
    int_sums[r] = ops::collective_reduce(ints[r], "replicas", 2, "sum", "int_sum_" + std::to_string(r));
  }
  REQUIRE(g.status().ok());
  session_options options;
  options.test_device_count = 2;
  options.log_device_placement = true;
  session s{sys, g, options};
  for (int run = 0; run < 3; ++run) {
    INFO("run " << run);
    feed_list feeds;
    std::vector<tensor> floats, integers;
    for (int r = 0; r < 2; ++r) {
      floats.push_back(filled({2, 3}, 0.25f * static_cast<float>(run + r), 1.5f + static_cast<float>(r)));
      feeds.emplace_back(fed[r], floats.back());
      // Past float precision, so that a detour through float would show.
      std::vector<std::int64_t> values;
      for (std::int64_t i = 0; i < 4; ++i)
        values.push_back((std::int64_t{1} << 53) + 3 * i + r + run);
      integers.push_back(tensor::from_vector(values));
      feeds.emplace_back(ints[r], integers.back());
    }
    auto out = s.run({summed[0], summed[1], int_sums[0], int_sums[1]}, feeds);
    INFO(out.error().to_string());
    REQUIRE(out.ok());
    for (int r = 0; r < 2; ++r) {
      auto& sum = out->at(static_cast<std::size_t>(r));
      REQUIRE(sum.shape() == (tensor_shape{2, 3}));
      for (std::int64_t i = 0; i < 6; ++i)
        CHECK(sum.data<float>()[i] == floats[0].data<float>()[i] + floats[1].data<float>()[i]);
      auto& int_sum = out->at(2 + static_cast<std::size_t>(r));
      for (std::int64_t i = 0; i < 4; ++i)
        CHECK(int_sum.data<std::int64_t>()[i] ==
              integers[0].data<std::int64_t>()[i] + integers[1].data<std::int64_t>()[i]);
    }
  }
  for (int r = 0; r < 2; ++r) {
    bool placed_there = false;
    for (auto& line : s.placement_log())
      if (line == "sum_" + std::to_string(r) + ": " + test_device(r))
        placed_there = true;
    CHECK(placed_there);
  }
}

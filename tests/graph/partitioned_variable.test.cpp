// Partitioned variables as graph nodes: fixed_size_partitioner's shard sizes, TensorFlow's
// names, each shard placed on its own by replica_device_setter, initial values per shard, the
// concatenated read, and the errors.
#include "graph/partitioned_variable.hpp"

#include "graph/device_name.hpp"
#include "graph/graph.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "graph/placement.hpp"
#include "graph/replica_device_setter.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace actorflow;
using Catch::Matchers::Contains;

namespace {

tensor_shape shape(std::vector<std::int64_t> dims) { return tensor_shape{std::move(dims)}; }

std::vector<tensor_shape> shard_shapes(const partitioned_variable& v) {
  std::vector<tensor_shape> out;
  for (auto& s : v.shards())
    out.push_back(s.ref.shape());
  return out;
}

std::vector<int> all_nodes(const graph& g) {
  std::vector<int> ids(g.size());
  for (std::size_t i = 0; i < g.size(); ++i)
    ids[i] = static_cast<int>(i);
  return ids;
}

std::vector<device_name> ps_and_worker_devices() {
  std::vector<device_name> out;
  for (const char* name :
       {"/job:ps/replica:0/task:0/device:CPU:0", "/job:ps/replica:0/task:1/device:CPU:0",
        "/job:worker/replica:0/task:0/device:CPU:0"}) {
    auto d = device_name::parse(name);
    REQUIRE(d.ok());
    out.push_back(*d);
  }
  return out;
}

bool every_kernel(const std::string&, const std::string&, dtype) { return true; }

/// The error a partitioned variable "w" of `s` split by `partition` records.
std::string partition_error(tensor_shape s, partitioner partition) {
  graph g;
  auto v = ops::partitioned_variable(g, "w", std::move(s), zeros_initializer(), partition);
  CHECK_FALSE(v.valid());
  INFO(g.status().to_string());
  REQUIRE_FALSE(g.status().ok());
  CHECK(g.status().code() == errc::invalid_argument);
  CHECK_THAT(g.status().message(), Contains("partitioned variable 'w'"));
  return g.status().message();
}

} // namespace

TEST_CASE("fixed_size_partitioner splits 10 rows three ways into 4, 3 and 3 named w/part_i",
          "[graph][partitioned_variable]") {
  graph g;
  auto w = ops::partitioned_variable(g, "w", {10, 3}, zeros_initializer(), fixed_size_partitioner(3));
  INFO(g.status().to_string());
  REQUIRE(g.status().ok());
  REQUIRE(w.valid());
  CHECK(w.name() == "w");
  CHECK(w.shape() == shape({10, 3}));
  CHECK(w.type() == dtype::float32);
  CHECK(w.axis() == 0);
  CHECK(shard_shapes(w) == std::vector<tensor_shape>{shape({4, 3}), shape({3, 3}), shape({3, 3})});
  CHECK(w.offsets() == std::vector<std::int64_t>{0, 4, 7});
  REQUIRE(w.shards().size() == 3);
  for (int i = 0; i < 3; ++i) {
    auto& shard = w.shards()[static_cast<std::size_t>(i)];
    auto part = "w/part_" + std::to_string(i);
    CHECK(shard.name() == part);
    CHECK(shard.ref.producer().op == "VariableV2");
    CHECK(shard.initializer.name() == part + "/Assign");
    CHECK(shard.read.name() == part + "/read");
    CHECK(g.find(part + "/Initializer/zeros/Fill") >= 0);
  }
  // The shards are the graph's trainable variables, in order.
  REQUIRE(g.trainable_variables().size() == 3);
  CHECK(g.trainable_variables()[1].name() == "w/part_1");
}

TEST_CASE("fixed_size_partitioner follows TensorFlow's arithmetic on other shapes and axes",
          "[graph][partitioned_variable]") {
  graph g;
  // More shards than rows: one row each.
  auto few = ops::partitioned_variable(g, "few", {2, 4}, zeros_initializer(), fixed_size_partitioner(5));
  CHECK(shard_shapes(few) == std::vector<tensor_shape>{shape({1, 4}), shape({1, 4})});
  auto even = ops::partitioned_variable(g, "even", {9}, zeros_initializer(), fixed_size_partitioner(3));
  CHECK(shard_shapes(even) == std::vector<tensor_shape>{shape({3}), shape({3}), shape({3})});
  auto columns = ops::partitioned_variable(g, "columns", {2, 7}, zeros_initializer(),
                                           fixed_size_partitioner(2, 1), dtype::float64);
  CHECK(columns.axis() == 1);
  CHECK(shard_shapes(columns) == std::vector<tensor_shape>{shape({2, 4}), shape({2, 3})});
  CHECK(columns.shards()[0].ref.type() == dtype::float64);
  auto one = ops::partitioned_variable(g, "one", {3, 3}, zeros_initializer(), fixed_size_partitioner(1));
  REQUIRE(one.shards().size() == 1);
  CHECK(one.shards()[0].name() == "one/part_0");
  // A second variable of a used name gets a scope of its own, like ops::variable.
  auto again = ops::partitioned_variable(g, "few", {2}, zeros_initializer(), fixed_size_partitioner(2));
  CHECK(again.name() == "few_1");
  CHECK(again.shards()[0].name() == "few_1/part_0");
  INFO(g.status().to_string());
  REQUIRE(g.status().ok());
}

TEST_CASE("under replica_device_setter with two ps tasks the three shards land on tasks 0, 1, 0",
          "[graph][partitioned_variable]") {
  graph g;
  auto setter = replica_device_setter(2);
  REQUIRE(setter.ok());
  partitioned_variable w;
  output y, train;
  {
    auto dev = g.device(*setter);
    w = ops::partitioned_variable(g, "w", {10, 3}, truncated_normal_initializer(0.0, 0.1, 7),
                                  fixed_size_partitioner(3));
    auto x = ops::placeholder(g, dtype::float32, {-1, 10}, "x");
    y = ops::matmul(x, w.as_tensor());
    train = gradient_descent_optimizer{0.1}.minimize(ops::reduce_sum(ops::square(y)), w.shards());
  }
  INFO(g.status().to_string());
  REQUIRE(g.status().ok());
  const std::vector<std::string> tasks{"/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:0"};
  for (std::size_t i = 0; i < 3; ++i) {
    INFO("shard " << i);
    auto& shard = w.shards()[i];
    CHECK(shard.ref.producer().requested_device == tasks[i]);
    CHECK(shard.initializer.producer().requested_device == tasks[i]);
    CHECK(shard.read.producer().requested_device == tasks[i]);
  }
  // The concat is an ordinary op: the worker's. Each shard's initial value is made beside the
  // shard (TF colocates a variable's initial value with it), so no process makes the table whole.
  auto concat = y.producer().inputs[1];
  CHECK(g.at(concat.node_id).op == "ConcatV2");
  CHECK(g.at(concat.node_id).name == "w/ConcatPartitions/concat");
  CHECK(g.at(concat.node_id).requested_device == "/job:worker");
  auto& initial = g.at(g.find("w/part_1/Initializer/truncated_normal/TruncatedNormal"));
  CHECK(initial.requested_device == "/job:ps/task:1");
  CHECK(initial.attr_or<std::string>("colocate_with", "") == "w/part_1");

  auto placed = place_nodes(g, all_nodes(g), ps_and_worker_devices(), every_kernel,
                            placement_options{}, nullptr);
  INFO(placed.to_string());
  REQUIRE(placed.ok());
  const std::vector<std::string> devices{"/job:ps/replica:0/task:0/device:CPU:0",
                                         "/job:ps/replica:0/task:1/device:CPU:0",
                                         "/job:ps/replica:0/task:0/device:CPU:0"};
  for (std::size_t i = 0; i < 3; ++i) {
    auto name = w.shards()[i].name();
    INFO(name);
    CHECK(w.shards()[i].ref.producer().assigned_device == devices[i]);
    // Each shard's own update runs where the shard lives.
    auto apply = g.find("GradientDescent/update_" + name + "/ApplyGradientDescent");
    REQUIRE(apply >= 0);
    CHECK(g.at(apply).attr_or<std::string>("colocate_with", "") == name);
    CHECK(g.at(apply).assigned_device == devices[i]);
  }
  CHECK(g.at(concat.node_id).assigned_device == "/job:worker/replica:0/task:0/device:CPU:0");
}

TEST_CASE("constant_initializer gives each shard a Const of its own rows only",
          "[graph][partitioned_variable]") {
  graph g;
  std::vector<std::int32_t> values(14);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<std::int32_t>(i);
  auto full = tensor::from_vector(values, shape({7, 2}));
  auto rows = ops::partitioned_variable(g, "rows", {7, 2}, constant_initializer(full),
                                        fixed_size_partitioner(2), dtype::int32);
  auto columns = ops::partitioned_variable(g, "columns", {2, 7},
                                           constant_initializer(*full.reshaped(shape({2, 7}))),
                                           fixed_size_partitioner(3, 1), dtype::int32);
  auto filled = ops::partitioned_variable(g, "filled", {3}, constant_initializer(tensor::scalar(2.5f)),
                                          fixed_size_partitioner(2));
  INFO(g.status().to_string());
  REQUIRE(g.status().ok());
  auto const_of = [&](const std::string& name) {
    auto id = g.find(name);
    INFO(name);
    REQUIRE(id >= 0);
    auto* value = g.at(id).attr<tensor>("value");
    REQUIRE(value != nullptr);
    return value->to_vector<std::int32_t>();
  };
  CHECK(const_of("rows/part_0/Initializer/Const") == std::vector<std::int32_t>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(const_of("rows/part_1/Initializer/Const") == std::vector<std::int32_t>{8, 9, 10, 11, 12, 13});
  // Columns 0-2, 3-4 and 5-6 of the 2x7 value.
  CHECK(const_of("columns/part_0/Initializer/Const") == std::vector<std::int32_t>{0, 1, 2, 7, 8, 9});
  CHECK(const_of("columns/part_1/Initializer/Const") == std::vector<std::int32_t>{3, 4, 10, 11});
  CHECK(const_of("columns/part_2/Initializer/Const") == std::vector<std::int32_t>{5, 6, 12, 13});
  CHECK(shard_shapes(filled) == std::vector<tensor_shape>{shape({2}), shape({1})});
}

TEST_CASE("random initializers with a seed give each shard its own seed",
          "[graph][partitioned_variable]") {
  graph g;
  ops::partitioned_variable(g, "w", {6, 2}, random_normal_initializer(0.0, 1.0, 11),
                            fixed_size_partitioner(3));
  ops::partitioned_variable(g, "u", {4}, random_uniform_initializer(-1.0, 1.0), fixed_size_partitioner(2));
  REQUIRE(g.status().ok());
  for (int i = 0; i < 3; ++i) {
    auto name = "w/part_" + std::to_string(i) + "/Initializer/random_normal/RandomStandardNormal";
    auto id = g.find(name);
    INFO(name);
    REQUIRE(id >= 0);
    CHECK(g.at(id).attr_or<std::int64_t>("seed2", -1) == 11 + i);
    CHECK(g.at(id).output_shapes[0] == shape({2, 2}));
  }
  CHECK(g.find("u/part_1/Initializer/random_uniform/RandomUniform") >= 0);
}

TEST_CASE("as_tensor concatenates the shard reads along the split axis, once per call",
          "[graph][partitioned_variable]") {
  graph g;
  auto w = ops::partitioned_variable(g, "w", {2, 5}, zeros_initializer(), fixed_size_partitioner(2, 1));
  auto first = w.as_tensor();
  auto second = w.as_tensor();
  REQUIRE(g.status().ok());
  CHECK(first.producer().op == "ConcatV2");
  CHECK(first.name() == "w/ConcatPartitions/concat");
  CHECK(second.name() == "w/ConcatPartitions_1/concat");
  CHECK(first.producer().attr_or<std::int64_t>("axis", -1) == 1);
  CHECK(first.shape() == shape({2, 5}));
  REQUIRE(first.producer().inputs.size() == 2);
  CHECK(first.producer().inputs[0].node_id == w.shards()[0].read.node_id);
  CHECK(first.producer().inputs[1].node_id == w.shards()[1].read.node_id);

  auto single = ops::partitioned_variable(g, "single", {3}, zeros_initializer(), fixed_size_partitioner(1));
  CHECK(single.as_tensor().producer().op == "Identity");
  CHECK_FALSE(partitioned_variable{}.as_tensor().valid());
}

TEST_CASE("partitioned variables report bad shapes, partitions and initial values",
          "[graph][partitioned_variable]") {
  CHECK_THAT(partition_error(shape({-1, 3}), fixed_size_partitioner(2)), Contains("[?,3]"));
  CHECK_THAT(partition_error(tensor_shape{}, fixed_size_partitioner(2)), Contains("rank 1"));
  CHECK_THAT(partition_error(shape({4, 3}), fixed_size_partitioner(0)), Contains("at least 1"));
  CHECK_THAT(partition_error(shape({4, 3}), fixed_size_partitioner(2, 2)), Contains("rank 2"));
  CHECK_THAT(partition_error(shape({4, 3}), [](const tensor_shape&, dtype) {
               return std::vector<std::int64_t>{2, 3};
             }),
             Contains("one dimension only"));
  CHECK_THAT(partition_error(shape({4, 3}), [](const tensor_shape&, dtype) {
               return std::vector<std::int64_t>{5, 1};
             }),
             Contains("more than it has"));

  graph g;
  auto wrong = ops::partitioned_variable(g, "w", {4, 3}, constant_initializer(tensor{dtype::float32, {3, 3}}),
                                         fixed_size_partitioner(2));
  CHECK_FALSE(wrong.valid());
  CHECK_THAT(g.status().message(), Contains("[3,3]") && Contains("[4,3]"));

  graph h;
  ops::partitioned_variable(h, "w", {4, 3}, zeros_initializer(), fixed_size_partitioner(2),
                            dtype::float64);
  REQUIRE(h.status().ok());
  ops::partitioned_variable(h, "v", {4}, constant_initializer(tensor::scalar(1.0f)),
                            fixed_size_partitioner(2), dtype::float64);
  CHECK_THAT(h.status().message(), Contains("float32[2]") && Contains("float64[2]"));
}

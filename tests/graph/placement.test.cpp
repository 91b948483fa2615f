// The simple placer, with a fake device list (one GPU) and a fake kernel registry.
#include "graph/graph.hpp"
#include "graph/ops.hpp"
#include "graph/partition.hpp"
#include "graph/placement.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

using namespace actorflow;
using Catch::Matchers::Contains;

namespace {

const std::string cpu0 = "/job:localhost/replica:0/task:0/device:CPU:0";
const std::string gpu0 = "/job:localhost/replica:0/task:0/device:GPU:0";

std::vector<device_name> parse_all(const std::vector<std::string>& names) {
  std::vector<device_name> out;
  for (auto& n : names) {
    auto d = device_name::parse(n);
    REQUIRE(d.ok());
    REQUIRE(d->fully_specified());
    out.push_back(*d);
  }
  return out;
}

std::vector<device_name> cpu_and_gpu() { return parse_all({cpu0, gpu0}); }
std::vector<device_name> cpu_only() { return parse_all({cpu0}); }

/// CPUs run everything; the GPU runs every op in float32 (and float64) but nothing int32 or
/// int64, like a registry with no integer GPU kernels.
bool fake_kernels(const std::string&, const std::string& type, dtype t) {
  if (type == "CPU")
    return true;
  if (type == "GPU")
    return t == dtype::float32 || t == dtype::float64 || t == dtype::boolean;
  return false;
}

placement_options localhost() {
  placement_options opts;
  opts.default_task = *device_name::parse("/job:localhost/replica:0/task:0");
  return opts;
}

std::vector<int> all_nodes(const graph& g) {
  std::vector<int> ids(g.size());
  for (std::size_t i = 0; i < g.size(); ++i)
    ids[i] = static_cast<int>(i);
  return ids;
}

const std::string& device_of(const graph& g, const std::string& name) {
  auto id = g.find(name);
  INFO("node '" << name << "'");
  REQUIRE(id >= 0);
  return g.at(id).assigned_device;
}

bool logged(const std::vector<std::string>& log, const std::string& line) {
  return std::find(log.begin(), log.end(), line) != log.end();
}

} // namespace

TEST_CASE("SPEC example: a and b pinned to the CPU, their product unpinned on GPU 0",
          "[graph][placement]") {
  graph g;
  output b;
  variable a;
  {
    auto dev = g.device("/cpu:0");
    a = ops::variable(g, 3.f, "a");
    b = ops::constant(g, 4.f, "b");
  }
  auto c = a * b;
  REQUIRE(g.status().ok());
  auto needed = prune(g, {c.node_id}, {});
  std::vector<std::string> log;
  auto s = place_nodes(g, needed, cpu_and_gpu(), fake_kernels, localhost(), &log);
  INFO(s.to_string());
  REQUIRE(s.ok());
  CHECK(device_of(g, "a") == cpu0);
  CHECK(device_of(g, "a/read") == cpu0);
  CHECK(device_of(g, "b") == cpu0);
  CHECK(device_of(g, "mul") == gpu0);
  CHECK(log.size() == 4);
  CHECK(logged(log, "a: " + cpu0));
  CHECK(logged(log, "a/read: " + cpu0));
  CHECK(logged(log, "b: " + cpu0));
  CHECK(logged(log, "mul: " + gpu0));
  // Nodes not needed are not placed.
  CHECK(device_of(g, "a/Assign").empty());
}

TEST_CASE("without a GPU everything unpinned goes to CPU 0", "[graph][placement]") {
  graph g;
  auto x = ops::constant(g, 1.f, "x");
  auto y = x * x;
  std::vector<std::string> log;
  auto s = place_nodes(g, all_nodes(g), cpu_only(), fake_kernels, localhost(), &log);
  REQUIRE(s.ok());
  CHECK(device_of(g, "x") == cpu0);
  CHECK(device_of(g, y.name()) == cpu0);
  CHECK(log == std::vector<std::string>{"x: " + cpu0, "mul: " + cpu0});
}

TEST_CASE("a device function sends variables to the CPU and everything else to the GPU",
          "[graph][placement]") {
  graph g;
  variable w;
  output y;
  {
    auto dev = g.device([](const node& n) -> std::string {
      return n.op == "VariableV2" ? "/cpu:0" : "/gpu:0";
    });
    auto x = ops::placeholder(g, dtype::float32, {-1, 2}, "x");
    w = ops::variable(g, ops::zeros(g, {2, 2}), "w");
    y = ops::matmul(x, w);
  }
  REQUIRE(g.status().ok());
  auto init = ops::global_variables_initializer(g);
  std::vector<std::string> log;
  auto s = place_nodes(g, all_nodes(g), cpu_and_gpu(), fake_kernels, localhost(), &log);
  INFO(s.to_string());
  REQUIRE(s.ok());
  CHECK(device_of(g, "w") == cpu0);
  // The variable's assign and read are colocated with it.
  CHECK(device_of(g, "w/Assign") == cpu0);
  CHECK(device_of(g, "w/read") == cpu0);
  CHECK(device_of(g, "x") == gpu0);
  CHECK(device_of(g, "zeros/Fill") == gpu0);
  CHECK(device_of(g, y.name()) == gpu0);
  CHECK(device_of(g, init.name()) == gpu0);
  CHECK(log.size() == g.size());
}

TEST_CASE("a node placed in an earlier call stays where it is", "[graph][placement]") {
  graph g;
  auto x = ops::constant(g, 1.f, "x");
  auto y = ops::neg(x);
  g.at(x.node_id).assigned_device = cpu0;
  std::vector<std::string> log;
  REQUIRE(place_nodes(g, all_nodes(g), cpu_and_gpu(), fake_kernels, localhost(), &log).ok());
  CHECK(device_of(g, "x") == cpu0);
  CHECK(device_of(g, y.name()) == gpu0);
  CHECK(log == std::vector<std::string>{"Neg: " + gpu0});

  // A second call with the same nodes moves nothing and logs nothing.
  g.at(y.node_id).requested_device = "/cpu:0";
  log.clear();
  REQUIRE(place_nodes(g, all_nodes(g), cpu_and_gpu(), fake_kernels, localhost(), &log).ok());
  CHECK(device_of(g, "x") == cpu0);
  CHECK(device_of(g, y.name()) == gpu0);
  CHECK(log.empty());
}

TEST_CASE("an int32 variable pinned to the GPU cannot be placed", "[graph][placement]") {
  graph g;
  auto init = ops::constant(g, std::int32_t{5}, "five");
  variable v;
  {
    auto dev = g.device("/gpu:0");
    v = ops::variable(g, init, "Variable");
  }
  REQUIRE(g.status().ok());
  std::vector<std::string> log;
  auto s = place_nodes(g, all_nodes(g), cpu_and_gpu(), fake_kernels, localhost(), &log);
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == errc::invalid_argument);
  CHECK_THAT(s.message(), Contains("cannot assign a device to node 'Variable': could not "
                                   "satisfy explicit device specification"));
  // The request it quotes names the GPU anyway; the reason is the missing kernel.
  CHECK_THAT(s.message(), Contains("because no supported kernel for GPU devices is available for "
                                   "op 'VariableV2' with dtype int32"));
  // On error nothing is placed.
  CHECK(log.empty());
  for (std::size_t i = 0; i < g.size(); ++i)
    CHECK(g.at(static_cast<int>(i)).assigned_device.empty());
}

TEST_CASE("with allow_soft_placement an unrunnable pinned node falls back to the CPU",
          "[graph][placement]") {
  graph g;
  auto init = ops::constant(g, std::int32_t{5}, "five");
  variable v;
  output f;
  {
    auto dev = g.device("/gpu:0");
    v = ops::variable(g, init, "Variable");
    f = ops::constant(g, 1.f, "f");
  }
  auto opts = localhost();
  opts.allow_soft_placement = true;
  std::vector<std::string> log;
  auto s = place_nodes(g, all_nodes(g), cpu_and_gpu(), fake_kernels, opts, &log);
  INFO(s.to_string());
  REQUIRE(s.ok());
  CHECK(device_of(g, "Variable") == cpu0);
  CHECK(device_of(g, "Variable/Assign") == cpu0);
  CHECK(device_of(g, "Variable/read") == cpu0);
  // A float node pinned to the GPU still goes there.
  CHECK(device_of(g, "f") == gpu0);
  CHECK(logged(log, "Variable: " + cpu0));
}

TEST_CASE("with allow_soft_placement a node pinned to a missing GPU goes to the CPU",
          "[graph][placement]") {
  graph g;
  output x;
  {
    auto dev = g.device("/gpu:0");
    x = ops::constant(g, 1.f, "x");
  }
  auto opts = localhost();
  opts.allow_soft_placement = true;
  REQUIRE(place_nodes(g, all_nodes(g), cpu_only(), fake_kernels, opts, nullptr).ok());
  CHECK(device_of(g, "x") == cpu0);
}

TEST_CASE("a variable's assign and read go where the variable goes", "[graph][placement]") {
  graph g;
  variable v;
  {
    auto dev = g.device("/cpu:0");
    v = ops::variable(g, ops::constant(g, 1.f, "one"), "v");
  }
  // Created outside the scope, unpinned: they follow the variable, not the GPU default.
  auto bump = ops::assign_add(v, ops::constant(g, 2.f, "two"));
  REQUIRE(place_nodes(g, all_nodes(g), cpu_and_gpu(), fake_kernels, localhost(), nullptr).ok());
  CHECK(device_of(g, "v") == cpu0);
  CHECK(device_of(g, "v/Assign") == cpu0);
  CHECK(device_of(g, "v/read") == cpu0);
  CHECK(device_of(g, bump.name()) == cpu0);
  CHECK(device_of(g, "two") == gpu0);
}

TEST_CASE("a read placed later follows a variable placed in an earlier call",
          "[graph][placement]") {
  graph g;
  auto v = ops::variable(g, 1.f, "v");
  // First call places only the variable (unpinned, so GPU 0).
  REQUIRE(place_nodes(g, {v.ref.node_id}, cpu_and_gpu(), fake_kernels, localhost(), nullptr).ok());
  REQUIRE(device_of(g, "v") == gpu0);
  // Pretend it went to the CPU, as a previous run decided.
  g.at(v.ref.node_id).assigned_device = cpu0;
  std::vector<std::string> log;
  REQUIRE(place_nodes(g, {v.read.node_id}, cpu_and_gpu(), fake_kernels, localhost(), &log).ok());
  CHECK(device_of(g, "v/read") == cpu0);
  CHECK(log == std::vector<std::string>{"v/read: " + cpu0});
}

TEST_CASE("an unpinned node with no GPU kernel goes to the CPU", "[graph][placement]") {
  graph g;
  auto i = ops::constant(g, std::int32_t{3}, "i");
  auto sq = ops::square(i);
  auto f = ops::cast(sq, dtype::float32);
  auto e = ops::exp(f);
  std::vector<std::string> log;
  REQUIRE(place_nodes(g, all_nodes(g), cpu_and_gpu(), fake_kernels, localhost(), &log).ok());
  CHECK(device_of(g, "i") == cpu0);
  CHECK(device_of(g, sq.name()) == cpu0);
  // Cast is keyed by its int32 input.
  CHECK(device_of(g, f.name()) == cpu0);
  CHECK(device_of(g, e.name()) == gpu0);
  CHECK(log == std::vector<std::string>{"i: " + cpu0, "Square: " + cpu0, "Cast: " + cpu0,
                                        "Exp: " + gpu0});
}

TEST_CASE("requests without a task use the default task, pinned tasks are honoured",
          "[graph][placement]") {
  auto devices = parse_all({
    "/job:worker/replica:0/task:0/device:CPU:0",
    "/job:worker/replica:0/task:0/device:GPU:0",
    "/job:worker/replica:0/task:1/device:CPU:0",
    "/job:worker/replica:0/task:1/device:GPU:0",
  });
  placement_options opts;
  opts.default_task = *device_name::parse("/job:worker/replica:0/task:0");
  graph g;
  output on_task1, on_task1_cpu, unpinned, cpu_only_pin;
  {
    auto dev = g.device("/job:worker/task:1");
    on_task1 = ops::constant(g, 1.f, "on_task1");
    auto cpu = g.device("/cpu:0");
    on_task1_cpu = ops::constant(g, 2.f, "on_task1_cpu");
  }
  unpinned = ops::constant(g, 3.f, "unpinned");
  {
    auto dev = g.device("/cpu:0");
    cpu_only_pin = ops::constant(g, 4.f, "cpu_pin");
  }
  std::vector<std::string> log;
  auto s = place_nodes(g, all_nodes(g), devices, fake_kernels, opts, &log);
  INFO(s.to_string());
  REQUIRE(s.ok());
  CHECK(device_of(g, "on_task1") == "/job:worker/replica:0/task:1/device:GPU:0");
  CHECK(device_of(g, "on_task1_cpu") == "/job:worker/replica:0/task:1/device:CPU:0");
  CHECK(device_of(g, "unpinned") == "/job:worker/replica:0/task:0/device:GPU:0");
  CHECK(device_of(g, "cpu_pin") == "/job:worker/replica:0/task:0/device:CPU:0");
  CHECK(logged(log, "unpinned: /job:worker/replica:0/task:0/device:GPU:0"));
}

TEST_CASE("pinning to a device that does not exist is an error naming the node",
          "[graph][placement]") {
  graph g;
  {
    auto dev = g.device("/gpu:3");
    (void)ops::constant(g, 1.f, "far_away");
  }
  auto s = place_nodes(g, all_nodes(g), cpu_and_gpu(), fake_kernels, localhost(), nullptr);
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == errc::invalid_argument);
  CHECK_THAT(s.message(), Contains("'far_away'"));
  CHECK_THAT(s.message(), Contains("/device:GPU:3"));
  CHECK(device_of(g, "far_away").empty());
}

TEST_CASE("pinning to a job that does not exist is an error naming the node",
          "[graph][placement]") {
  graph g;
  {
    auto dev = g.device("/job:ps/task:0");
    (void)ops::constant(g, 1.f, "param");
  }
  auto s = place_nodes(g, all_nodes(g), cpu_and_gpu(), fake_kernels, localhost(), nullptr);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.message(), Contains("'param'") && Contains("/job:ps"));
}

TEST_CASE("colocated nodes pinned to conflicting devices are an error without soft placement",
          "[graph][placement]") {
  graph g;
  variable v;
  {
    auto dev = g.device("/cpu:0");
    v = ops::variable(g, 1.f, "v");
  }
  output bump;
  {
    auto dev = g.device("/gpu:0");
    bump = ops::assign_add(v, ops::constant(g, 1.f, "one"), "bump");
  }
  // The device scope alone does not pin an update away from its variable (colocation wins, as
  // in TensorFlow); an explicit conflicting request on the node does.
  CHECK(g.at(bump.node_id).requested_device == "/device:CPU:0");
  g.at(bump.node_id).requested_device = "/device:GPU:0";
  auto s = place_nodes(g, all_nodes(g), cpu_and_gpu(), fake_kernels, localhost(), nullptr);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.message(), Contains("bump"));

  auto opts = localhost();
  opts.allow_soft_placement = true;
  REQUIRE(place_nodes(g, all_nodes(g), cpu_and_gpu(), fake_kernels, opts, nullptr).ok());
  CHECK(device_of(g, "v") == cpu0);
  CHECK(device_of(g, "bump") == cpu0);
}

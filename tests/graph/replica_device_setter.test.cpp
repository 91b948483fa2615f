// replica_device_setter (SPEC "Clusters"): variables round-robin over ps tasks, other ops on the
// worker device, nested device scopes keeping their fields; then the placer's final devices.
#include "graph/replica_device_setter.hpp"

#include "graph/device_name.hpp"
#include "graph/graph.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "graph/placement.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace actorflow;
using Catch::Matchers::Contains;

namespace {

device_function make_setter(replica_device_setter_options options) {
  auto setter = replica_device_setter(std::move(options));
  INFO(setter.error().to_string());
  REQUIRE(setter.ok());
  return *setter;
}

device_function make_setter(int ps_tasks) {
  replica_device_setter_options options;
  options.ps_tasks = ps_tasks;
  return make_setter(std::move(options));
}

const std::string& requested(const graph& g, const std::string& name) {
  auto id = g.find(name);
  INFO("node '" << name << "'");
  REQUIRE(id >= 0);
  return g.at(id).requested_device;
}

const std::string& assigned(const graph& g, const std::string& name) {
  auto id = g.find(name);
  INFO("node '" << name << "'");
  REQUIRE(id >= 0);
  return g.at(id).assigned_device;
}

/// Two ps tasks with a CPU each; two worker tasks with a CPU and two GPUs each.
std::vector<device_name> cluster_devices() {
  std::vector<device_name> out;
  for (const char* name :
       {"/job:ps/replica:0/task:0/device:CPU:0", "/job:ps/replica:0/task:1/device:CPU:0",
        "/job:worker/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:0/device:GPU:0",
        "/job:worker/replica:0/task:0/device:GPU:1", "/job:worker/replica:0/task:1/device:CPU:0",
        "/job:worker/replica:0/task:1/device:GPU:0", "/job:worker/replica:0/task:1/device:GPU:1"}) {
    auto d = device_name::parse(name);
    REQUIRE(d.ok());
    REQUIRE(d->fully_specified());
    out.push_back(*d);
  }
  return out;
}

/// CPUs run everything; GPUs run float32 and float64, like a registry with no integer GPU
/// kernels.
bool fake_kernels(const std::string&, const std::string& type, dtype t) {
  if (type == "CPU")
    return true;
  return type == "GPU" && (t == dtype::float32 || t == dtype::float64);
}

std::vector<int> all_nodes(const graph& g) {
  std::vector<int> ids(g.size());
  for (std::size_t i = 0; i < g.size(); ++i)
    ids[i] = static_cast<int>(i);
  return ids;
}

} // namespace

TEST_CASE("SPEC example: with two ps tasks, variables v1..v5 go to ps tasks 0, 1, 0, 1, 0",
          "[graph][replica_device_setter]") {
  graph g;
  std::vector<variable> vars;
  {
    auto dev = g.device(make_setter(2));
    for (int i = 1; i <= 5; ++i)
      vars.push_back(ops::variable(g, static_cast<float>(i), "v" + std::to_string(i)));
  }
  REQUIRE(g.status().ok());
  const std::vector<std::string> expected = {"/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:0",
                                             "/job:ps/task:1", "/job:ps/task:0"};
  for (std::size_t i = 0; i < vars.size(); ++i) {
    INFO("v" << i + 1);
    CHECK(vars[i].ref.producer().requested_device == expected[i]);
    // Assign and read stay with their variable and do not advance the round-robin.
    CHECK(vars[i].initializer.producer().requested_device == expected[i]);
    CHECK(vars[i].read.producer().requested_device == expected[i]);
  }
  // The initial values are ordinary ops: they go to the worker job.
  CHECK(requested(g, "v1/initial_value") == "/job:worker");

  auto s = place_nodes(g, all_nodes(g), cluster_devices(), fake_kernels, placement_options{},
                       nullptr);
  INFO(s.to_string());
  REQUIRE(s.ok());
  CHECK(assigned(g, "v1") == "/job:ps/replica:0/task:0/device:CPU:0");
  CHECK(assigned(g, "v2") == "/job:ps/replica:0/task:1/device:CPU:0");
  CHECK(assigned(g, "v3") == "/job:ps/replica:0/task:0/device:CPU:0");
  CHECK(assigned(g, "v4") == "/job:ps/replica:0/task:1/device:CPU:0");
  CHECK(assigned(g, "v5") == "/job:ps/replica:0/task:0/device:CPU:0");
  CHECK(assigned(g, "v2/read") == "/job:ps/replica:0/task:1/device:CPU:0");
}

TEST_CASE("SPEC example: ops go to /job:worker, and nested /gpu:1 and /task:1 scopes keep their "
          "fields",
          "[graph][replica_device_setter]") {
  graph g;
  output s, p1, p2;
  {
    auto dev = g.device(make_setter(2));
    auto v1 = ops::variable(g, 1.f, "v1");
    auto v2 = ops::variable(g, 2.f, "v2");
    s = v1 + v2;
    {
      auto gpu = g.device("/gpu:1");
      p1 = 2.0 * s;
      {
        auto task = g.device("/task:1");
        p2 = 3.0 * s;
      }
    }
  }
  REQUIRE(g.status().ok());
  CHECK(s.producer().requested_device == "/job:worker");
  CHECK(p1.producer().requested_device == "/job:worker/device:GPU:1");
  CHECK(p2.producer().requested_device == "/job:worker/task:1/device:GPU:1");

  // The placer adds task 0 where none is named (SPEC: no task -> task:0), and the task's
  // default device where no type is named.
  auto placed = place_nodes(g, all_nodes(g), cluster_devices(), fake_kernels,
                            placement_options{}, nullptr);
  INFO(placed.to_string());
  REQUIRE(placed.ok());
  CHECK(assigned(g, "v1") == "/job:ps/replica:0/task:0/device:CPU:0");
  CHECK(assigned(g, "v2") == "/job:ps/replica:0/task:1/device:CPU:0");
  CHECK(assigned(g, s.name()) == "/job:worker/replica:0/task:0/device:GPU:0");
  CHECK(assigned(g, p1.name()) == "/job:worker/replica:0/task:0/device:GPU:1");
  CHECK(assigned(g, p2.name()) == "/job:worker/replica:0/task:1/device:GPU:1");
}

TEST_CASE("a device scope outside the setter fills only what the setter leaves unset",
          "[graph][replica_device_setter]") {
  graph g;
  variable v;
  output x;
  {
    auto outer = g.device("/job:other/task:7/cpu:0");
    auto dev = g.device(make_setter(2));
    v = ops::variable(g, 1.f, "v");
    x = ops::constant(g, 1.f, "x");
  }
  REQUIRE(g.status().ok());
  CHECK(v.ref.producer().requested_device == "/job:ps/task:0/device:CPU:0");
  CHECK(x.producer().requested_device == "/job:worker/task:7/device:CPU:0");
}

TEST_CASE("fields a node's own scope sets win over the setter's", "[graph][replica_device_setter]") {
  graph g;
  variable on_worker, pinned_task, next;
  {
    auto dev = g.device(make_setter(3));
    {
      // Another job: TF gives it no ps task, and the round-robin does not advance.
      auto inner = g.device("/job:worker/task:1");
      on_worker = ops::variable(g, 1.f, "on_worker");
    }
    {
      auto inner = g.device("/task:2/cpu:0");
      pinned_task = ops::variable(g, 1.f, "pinned_task");
    }
    next = ops::variable(g, 1.f, "next");
  }
  REQUIRE(g.status().ok());
  CHECK(on_worker.ref.producer().requested_device == "/job:worker/task:1");
  CHECK(pinned_task.ref.producer().requested_device == "/job:ps/task:2/device:CPU:0");
  // pinned_task took round-robin slot 0 (its own task wins), so next gets task 1.
  CHECK(next.ref.producer().requested_device == "/job:ps/task:1");
}

TEST_CASE("ps_device and worker_device name other jobs and devices",
          "[graph][replica_device_setter]") {
  graph g;
  variable w, b;
  output y;
  {
    replica_device_setter_options options;
    options.ps_tasks = 2;
    options.ps_device = "/job:canshu/cpu:0";
    options.worker_device = "/job:gongzuo/task:1";
    auto dev = g.device(make_setter(options));
    w = ops::variable(g, 1.f, "w");
    b = ops::variable(g, 1.f, "b");
    y = w * b;
  }
  REQUIRE(g.status().ok());
  CHECK(w.ref.producer().requested_device == "/job:canshu/task:0/device:CPU:0");
  CHECK(b.ref.producer().requested_device == "/job:canshu/task:1/device:CPU:0");
  CHECK(y.producer().requested_device == "/job:gongzuo/task:1");
}

TEST_CASE("ps_ops and a custom strategy choose which ops go where",
          "[graph][replica_device_setter]") {
  graph g;
  output c, d;
  variable v;
  {
    replica_device_setter_options options;
    options.ps_tasks = 4;
    options.ps_ops = {"VariableV2", "Const"};
    options.strategy = [](const node& n) { return n.op == "Const" ? 3 : 2; };
    auto dev = g.device(make_setter(options));
    c = ops::constant(g, 1.f, "c");
    v = ops::variable(g, c, "v");
    d = c * v;
  }
  REQUIRE(g.status().ok());
  CHECK(c.producer().requested_device == "/job:ps/task:3");
  CHECK(v.ref.producer().requested_device == "/job:ps/task:2");
  CHECK(d.producer().requested_device == "/job:worker");
}

TEST_CASE("without ps tasks variables go to the worker device too",
          "[graph][replica_device_setter]") {
  graph g;
  variable v;
  {
    auto dev = g.device(make_setter(0));
    v = ops::variable(g, 1.f, "v");
  }
  REQUIRE(g.status().ok());
  CHECK(v.ref.producer().requested_device == "/job:worker");
}

TEST_CASE("with merge_devices false a node that requests a device keeps it untouched",
          "[graph][replica_device_setter]") {
  graph g;
  variable pinned, free;
  output x;
  {
    replica_device_setter_options options;
    options.ps_tasks = 2;
    options.merge_devices = false;
    auto dev = g.device(make_setter(options));
    {
      auto inner = g.device("/gpu:0");
      pinned = ops::variable(g, 1.f, "pinned");
      x = ops::constant(g, 1.f, "x");
    }
    free = ops::variable(g, 1.f, "free");
  }
  REQUIRE(g.status().ok());
  CHECK(pinned.ref.producer().requested_device == "/device:GPU:0");
  CHECK(x.producer().requested_device == "/device:GPU:0");
  CHECK(free.ref.producer().requested_device == "/job:ps/task:0");
}

TEST_CASE("copies of one setter share its round-robin position", "[graph][replica_device_setter]") {
  graph g;
  auto setter = make_setter(2);
  auto copy = setter;
  variable a, b;
  {
    auto dev = g.device(setter);
    a = ops::variable(g, 1.f, "a");
  }
  {
    auto dev = g.device(copy);
    b = ops::variable(g, 1.f, "b");
  }
  CHECK(a.ref.producer().requested_device == "/job:ps/task:0");
  CHECK(b.ref.producer().requested_device == "/job:ps/task:1");
}

TEST_CASE("bad options are reported quoting the part at fault", "[graph][replica_device_setter]") {
  SECTION("a negative number of ps tasks") {
    auto setter = replica_device_setter(-1);
    REQUIRE_FALSE(setter.ok());
    CHECK(setter.error().code() == errc::invalid_argument);
    CHECK_THAT(setter.error().message(), Contains("ps_tasks is -1"));
  }
  SECTION("an unparsable ps device") {
    replica_device_setter_options options;
    options.ps_tasks = 1;
    options.ps_device = "/job:ps/task:x";
    auto setter = replica_device_setter(options);
    REQUIRE_FALSE(setter.ok());
    CHECK(setter.error().code() == errc::invalid_argument);
    CHECK_THAT(setter.error().message(), Contains("ps_device") && Contains("/job:ps/task:x"));
  }
  SECTION("an unparsable worker device") {
    replica_device_setter_options options;
    options.worker_device = "job:worker";
    auto setter = replica_device_setter(options);
    REQUIRE_FALSE(setter.ok());
    CHECK_THAT(setter.error().message(), Contains("worker_device") && Contains("'job:worker'"));
  }
}

TEST_CASE("optimizer slots stay with their variable and do not advance the ps round-robin") {
  graph g;
  auto setter = replica_device_setter(2);
  REQUIRE(setter.ok());
  auto scope = g.device(*setter);
  auto v1 = ops::variable(g, 1.f, "v1");
  auto loss = ops::square(v1.read);
  momentum_optimizer{0.1, 0.9}.minimize(loss);
  auto v2 = ops::variable(g, 2.f, "v2");
  REQUIRE(g.status().ok());
  CHECK(requested(g, "v1") == "/job:ps/task:0");
  // The slot is colocated with v1 (TensorFlow's colocate_with): the setter never sees it.
  CHECK(requested(g, "v1/Momentum") == "/job:ps/task:0");
  CHECK(*g.at(g.find("v1/Momentum")).attr<std::string>("colocate_with") == "v1");
  CHECK(requested(g, "v2") == "/job:ps/task:1");
}

TEST_CASE("a colocate_with scope beats enclosing device scopes and marks the nodes") {
  graph g;
  actorflow::variable v;
  {
    auto ps = g.device("/job:ps/task:1");
    v = ops::variable(g, 1.f, "v");
  }
  auto worker = g.device("/job:worker/task:0");
  output inside, outside;
  {
    auto with_v = g.colocate_with(v.ref);
    inside = ops::constant(g, 2.f, "inside");
  }
  outside = ops::constant(g, 3.f, "outside");
  CHECK(requested(g, "inside") == "/job:ps/task:1");
  CHECK(*g.at(inside.node_id).attr<std::string>("colocate_with") == "v");
  CHECK(requested(g, "outside") == "/job:worker/task:0");
  CHECK_FALSE(g.at(outside.node_id).has_attr("colocate_with"));
}

// The master through sessions: graphs that grow between runs, closing sessions, masters reached
// over loopback with `target`, and tasks that are not masters.
#include "actors/master.hpp"
#include "actors/protocols/master.hpp"
#include "actors/protocols/task.hpp"
#include "actors/session.hpp"
#include "actors/session_actor.hpp"
#include "actors/task_service.hpp"
#include "graph/ops.hpp"
#include "actors/testing.hpp"
#include "support/processes.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

using namespace actorflow;

namespace {

std::vector<std::string> lines_starting(const std::vector<std::string>& trace, const std::string& text) {
  std::vector<std::string> out;
  for (auto& line : trace)
    if (line.find(text) != std::string::npos)
      out.push_back(line);
  return out;
}

/// A task service on the default actor system published on a free loopback port; unpublished
/// and stopped at the end of the scope.
struct published_task {
  published_task(const std::string& job, task_service_options options) {
    auto& sys = default_actor_system();
    service = spawn_task_service(sys, job, 0, std::move(options));
    auto bound = sys.middleman().publish(service, 0, "127.0.0.1", true);
    REQUIRE(static_cast<bool>(bound));
    port = *bound;
  }
  ~published_task() {
    auto& sys = default_actor_system();
    static_cast<void>(sys.middleman().unpublish(service, port));
    protocol::send_stop(service);
  }
  std::string target() const { return "caf://127.0.0.1:" + std::to_string(port); }

  protocol::task_actor service;
  std::uint16_t port = 0;
};

} // namespace

TEST_CASE("a graph that grows between runs is sent again and keeps its variables where they live") {
  graph g;
  actorflow::variable counter;
  {
    auto d = g.device("/job:ps/task:0");
    counter = ops::variable(g, 1.f, "counter");
  }
  session_options options;
  options.in_process_cluster = {{"ps", 1}, {"worker", 1}};
  session s{g, options};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  // Nodes added after the first run: the master gets the grown graph (ExtendSession).
  auto doubled = ops::assign(counter, counter * ops::constant(g, 2.f), "double");
  for (int i = 0; i < 3; ++i)
    REQUIRE(s.run_targets({doubled}).ok());
  auto tripled = counter * ops::constant(g, 3.f, "three");
  auto r = s.run({tripled});
  REQUIRE(r.ok());
  CHECK(r->at(0).scalar_value<float>() == 24.f);
  CHECK(g.at(counter.ref.node_id).assigned_device == "/job:ps/replica:0/task:0/device:CPU:0");
  CHECK(g.at(doubled.node_id).assigned_device == "/job:ps/replica:0/task:0/device:CPU:0");
  CHECK(g.at(tripled.node_id).assigned_device == "/job:worker/replica:0/task:0/device:CPU:0");
}

TEST_CASE("closing a session frees every partition it registered, on every device") {
  testing::deterministic_system sys;
  graph g;
  output a, b, c;
  {
    auto d = g.device("/cpu:1");
    b = ops::constant(g, 4.f, "b");
  }
  a = ops::constant(g, 3.f, "a");
  c = ops::mul(a, b, "c");
  session_options base;
  base.cpu_device_count = 2;
  {
    session s{sys.system(), g, sys.session_options(base)};
    REQUIRE(s.run({c}).ok());
    REQUIRE(s.run({a}).ok());
  }
  auto registered = lines_starting(sys.trace(), " register ");
  auto freed = lines_starting(sys.trace(), " deregister ");
  REQUIRE(registered.size() == 3); // c: one partition per device; a: one on CPU:0
  std::vector<std::string> expected;
  for (auto& line : registered)
    expected.push_back(line.substr(0, line.find(" register ")) + " deregister " +
                       line.substr(line.find(" register ") + 10));
  std::sort(expected.begin(), expected.end());
  std::sort(freed.begin(), freed.end());
  CHECK(freed == expected);
}

TEST_CASE("a session with a target runs on the master published there, over loopback") {
  task_service_options options;
  options.threads = 1;
  options.cpu_device_count = 2;
  published_task server{"localhost", options};

  graph g;
  output product;
  {
    auto d = g.device("/cpu:1");
    auto x = ops::placeholder(g, dtype::float32, {-1}, "x");
    product = ops::mul(x, ops::constant(g, std::vector<float>{1, 2, 3}, {3}), "product");
  }
  auto total = ops::reduce_sum(product, {}, false, "total");
  session_options session_opts;
  session_opts.target = server.target();
  session s{g, session_opts};
  auto names = s.device_names();
  CHECK(names == std::vector<std::string>{"/job:localhost/replica:0/task:0/device:CPU:0",
                                          "/job:localhost/replica:0/task:0/device:CPU:1"});
  auto r = s.run({total}, {{g.find_output("x"), tensor::from_vector<float>({1, 1, 2})}});
  REQUIRE(r.ok());
  CHECK(r->at(0).scalar_value<float>() == 9.f);
  CHECK(g.at(product.node_id).assigned_device == "/job:localhost/replica:0/task:0/device:CPU:1");
  CHECK(g.at(total.node_id).assigned_device == "/job:localhost/replica:0/task:0/device:CPU:0");

  // A node failing on the server: its error crosses back naming the node and its device.
  auto bad = s.run({total}, {{g.find_output("x"), tensor::from_vector<float>({1, 1})}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message().find("'product'") != std::string::npos);
  CHECK(bad.error().message().find("/job:localhost/replica:0/task:0/device:CPU:1") != std::string::npos);
}

TEST_CASE("every task serves sessions, without being asked to") {
  task_service_options options;
  options.threads = 1;
  published_task worker{"worker", options};
  graph g;
  auto c = ops::constant(g, 2.f, "c") * ops::constant(g, 3.f, "d");
  session_options session_opts;
  session_opts.target = worker.target();
  session s{g, session_opts};
  auto r = s.run({c});
  REQUIRE(r.ok());
  CHECK(r->at(0).scalar_value<float>() == 6.f);
  CHECK(g.at(c.node_id).assigned_device == "/job:worker/replica:0/task:0/device:CPU:0");
}

TEST_CASE("nodes naming neither job nor task go to the master's own task, not the first job") {
  testing::deterministic_system sys;
  task_service_options task_options;
  task_options.threads = 1;
  task_options.run_inline = true;
  // SPEC's seed example: "canshu" (the ps job) sorts before "gongzuo".
  auto ps = spawn_task_service(sys.system(), "canshu", 0, task_options);
  auto worker = spawn_task_service(sys.system(), "gongzuo", 1, task_options);
  master_options options;
  options.task_services = {ps, worker};
  options.own_task = "/job:gongzuo/replica:0/task:1";
  auto master = spawn_master(sys.system(), options);
  sys.run_all();

  graph g;
  actorflow::variable w;
  {
    auto d = g.device("/job:canshu/task:0");
    w = ops::variable(g, 2.f, "w");
  }
  auto unpinned = w * ops::constant(g, 5.f, "five");
  auto session_opts = sys.session_options();
  session_opts.master = existing_master(master);
  {
    session s{sys.system(), g, session_opts};
    REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
    auto r = s.run({unpinned});
    REQUIRE(r.ok());
    CHECK(r->at(0).scalar_value<float>() == 10.f);
  }
  CHECK(g.at(w.ref.node_id).assigned_device == "/job:canshu/replica:0/task:0/device:CPU:0");
  CHECK(g.at(unpinned.node_id).assigned_device == "/job:gongzuo/replica:0/task:1/device:CPU:0");
  // The session left the master it was given running: it still answers.
  caf::scoped_actor self{sys.system()};
  self->send(master, protocol::sessions_atom::value);
  sys.run_all();
  std::int64_t open = -1;
  self->receive([&](std::int64_t n) { open = n; }, caf::after(std::chrono::seconds(0)) >> [] {});
  CHECK(open == 0);
  for (auto& task : {ps, worker})
    protocol::send_stop(task);
  protocol::send_stop(master);
  sys.run_all();
}

TEST_CASE("a bad or unreachable target is an error quoting it") {
  graph g;
  auto c = ops::constant(g, 1.f);
  // The last one is well formed, but nothing listens there.
  auto nobody = "caf://127.0.0.1:" + std::to_string(testing::free_loopback_port());
  for (std::string target : {std::string{"127.0.0.1:2222"}, std::string{"caf://127.0.0.1"},
                             std::string{"caf://127.0.0.1:99999"}, nobody}) {
    session_options options;
    options.target = target;
    // Nothing will ever listen there: waiting the default 60 s for it would say nothing more.
    options.connect_timeout_seconds = 1;
    session s{g, options};
    auto r = s.run({c});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message().find(target) != std::string::npos);
  }
}

TEST_CASE("a NoOp target runs what it groups, without a partition of its own") {
  testing::deterministic_system sys;
  graph g;
  actorflow::variable counter;
  output update, train;
  {
    auto d = g.device("/cpu:0");
    counter = ops::variable(g, 0.f, "counter");
    update = ops::assign_add(counter, ops::constant(g, 1.f), "update");
  }
  {
    // The optimizer's train op is such a group; nested groups expand too.
    auto d = g.device("/cpu:1");
    train = ops::group(g, {ops::group(g, {update}, "inner")}, "train");
  }
  session_options base;
  base.cpu_device_count = 2;
  session s{sys.system(), g, sys.session_options(base)};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  sys.clear_trace();
  REQUIRE(s.run_targets({train}).ok());
  REQUIRE(s.run_targets({train}).ok());
  CHECK(lines_starting(sys.trace(), "/device:CPU:1").empty());
  auto r = s.run({counter.read});
  REQUIRE(r.ok());
  CHECK(r->at(0).scalar_value<float>() == 2.f);
}

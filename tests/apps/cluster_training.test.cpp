// SPEC's classic in-graph replication example on a real cluster: jobs "canshu" (2 tasks) and
// "gongzuo" (2 tasks) as four actorflow-worker processes on loopback, and this process as the
// client whose session places the graph over their devices.
#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "support/processes.hpp"
#include "train/models.hpp"

#include <catch2/catch.hpp>

#include <memory>
#include <random>

using namespace actorflow;
using namespace std::chrono_literals;
using actorflow::testing::cluster_processes;
using actorflow::testing::free_loopback_port;

namespace {

/// Starts the workers of `jobs` and requires every one to be serving.
std::unique_ptr<cluster_processes> start_cluster(const std::vector<std::pair<std::string, int>>& jobs) {
  auto cluster = std::make_unique<cluster_processes>(ACTORFLOW_WORKER_BINARY, jobs);
  REQUIRE(cluster->ready());
  return cluster;
}

} // namespace

TEST_CASE("the classic example trains on four worker processes: W goes to 0.1 and b to 0.3") {
  auto cluster = start_cluster({{"canshu", 2}, {"gongzuo", 2}});
  auto spec = cluster_spec::parse(cluster->spec_json());
  REQUIRE(spec.ok());

  graph g;
  gradient_descent_optimizer sgd{0.5};
  auto m = train::build_linreg(g, sgd, 1, train::classic_in_graph_devices());
  auto& w = m.weights;
  auto& b = m.biases;
  auto& train = m.train;
  auto& y = m.prediction;
  REQUIRE(g.status().ok());

  session_options options;
  options.cluster = std::make_shared<cluster_spec>(*spec);
  options.timeout_seconds = 30;
  {
    session s{g, options};
    REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
    for (int step = 0; step < 1000; ++step)
      REQUIRE(s.run_targets({train}).ok());
    auto values = s.run({w.read, b.read});
    REQUIRE(values.ok());
    CHECK(values->at(0).scalar_value<double>() == Approx(0.1).margin(1e-3));
    CHECK(values->at(1).scalar_value<double>() == Approx(0.3).margin(1e-3));
    CHECK(g.at(w.ref.node_id).assigned_device == "/job:canshu/replica:0/task:0/device:CPU:0");
    CHECK(g.at(b.ref.node_id).assigned_device == "/job:canshu/replica:0/task:1/device:CPU:0");
    // The model runs on gongzuo/0 (the loss's value itself is never needed by training).
    CHECK(g.at(y.node_id).assigned_device == "/job:gongzuo/replica:0/task:0/device:CPU:0");
  }
  CHECK(cluster->stop());
}

TEST_CASE("a session on a cluster with an unreachable task fails naming the task") {
  auto port = free_loopback_port();
  REQUIRE(port != 0);
  auto spec = cluster_spec::parse("worker=127.0.0.1:" + std::to_string(port));
  REQUIRE(spec.ok());
  graph g;
  auto c = ops::constant(g, 1.f);
  session_options options;
  options.cluster = std::make_shared<cluster_spec>(*spec);
  options.timeout_seconds = 5;
  session s{g, options};
  auto r = s.run({c});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message().find("/job:worker/replica:0/task:0") != std::string::npos);
  CHECK(r.error().message().find("127.0.0.1:" + std::to_string(port)) != std::string::npos);
}

namespace {

/// A variable on the ps task updated from the worker task every step.
struct ps_counter_graph {
  graph g;
  actorflow::variable counter;
  output step;
  ps_counter_graph() {
    {
      auto d = g.device("/job:ps/task:0");
      counter = ops::variable(g, 0.f, "counter");
    }
    output increment;
    {
      auto d = g.device("/job:worker/task:0");
      increment = ops::constant(g, 1.f) * ops::constant(g, 2.f);
    }
    // The update is colocated with the variable on the ps task; its input crosses tasks.
    step = ops::assign_add(counter, increment);
  }
};

} // namespace

TEST_CASE("a task killed mid-training fails the next step quickly, naming the task") {
  auto cluster = start_cluster({{"ps", 1}, {"worker", 1}});
  ps_counter_graph model;
  session_options options;
  options.cluster = std::make_shared<cluster_spec>(*cluster_spec::parse(cluster->spec_json()));
  options.timeout_seconds = 5;
  session s{model.g, options};
  REQUIRE(s.run_targets({ops::global_variables_initializer(model.g)}).ok());
  for (int i = 0; i < 10; ++i) {
    auto st = s.run_targets({model.step});
    INFO(st.to_string());
    REQUIRE(st.ok());
  }
  cluster->task(0).signal(SIGKILL); // the ps task
  CHECK(cluster->task(0).wait_exit(5000ms) == -1);
  auto started = std::chrono::steady_clock::now();
  auto r = s.run({model.counter.read});
  auto waited = std::chrono::steady_clock::now() - started;
  REQUIRE_FALSE(r.ok());
  INFO(r.error().to_string());
  CHECK(r.error().message().find("/job:ps/replica:0/task:0") != std::string::npos);
  CHECK(waited < 8s);
  cluster->task(1).signal(SIGTERM);
  CHECK(cluster->task(1).wait_exit(10000ms) == 0);
}

TEST_CASE("a hung task (SIGSTOP) fails the step within the bound, naming the task") {
  auto cluster = start_cluster({{"ps", 1}, {"worker", 1}});
  ps_counter_graph model;
  session_options options;
  options.cluster = std::make_shared<cluster_spec>(*cluster_spec::parse(cluster->spec_json()));
  options.timeout_seconds = 2;
  session s{model.g, options};
  REQUIRE(s.run_targets({ops::global_variables_initializer(model.g)}).ok());
  REQUIRE(s.run_targets({model.step}).ok());
  cluster->task(0).signal(SIGSTOP);
  auto started = std::chrono::steady_clock::now();
  auto r = s.run_targets({model.step});
  auto waited = std::chrono::steady_clock::now() - started;
  REQUIRE_FALSE(r.ok());
  INFO(r.to_string());
  CHECK(r.code() == errc::deadline_exceeded);
  CHECK(r.message().find("/job:ps/replica:0/task:0") != std::string::npos);
  CHECK(waited < 5s);
  // The stopped task is killed by its guard; the healthy one must still stop cleanly.
  cluster->task(1).signal(SIGTERM);
  CHECK(cluster->task(1).wait_exit(10000ms) == 0);
}

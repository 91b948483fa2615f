// The installed testing header as an embedder uses it: a small cluster's master, tasks and
// devices under CAF's test coordinator, with the message order asserted.
#include "actors/testing.hpp"

#include "actors/master.hpp"
#include "actors/session_actor.hpp"
#include "actors/task_service.hpp"
#include "graph/ops.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <iostream>

using namespace actorflow;

namespace {

/// A ps task holding w, a worker task computing w * x, and a master the test spawned itself,
/// all on one deterministic system. Returns the trace of one step after initialisation.
std::pair<float, std::vector<std::string>> one_step_on_two_tasks() {
  testing::deterministic_system sys;
  auto ps = spawn_task_service(sys.system(), "ps", 0, sys.task_options("ps"));
  auto worker = spawn_task_service(sys.system(), "worker", 0, sys.task_options("worker"));
  master_options config;
  config.task_services = {ps, worker};
  config.own_task = "/job:worker/replica:0/task:0";
  auto master = spawn_master(sys.system(), config);

  graph g;
  actorflow::variable w;
  {
    auto on_ps = g.device("/job:ps/task:0");
    w = ops::variable(g, 3.f, "w");
  }
  auto x = ops::placeholder(g, dtype::float32, {}, "x");
  auto y = ops::mul(w, x, "y");
  auto options = sys.session_options();
  options.master = existing_master(master);
  float value = 0;
  std::vector<std::string> trace;
  {
    session s{sys.system(), g, options};
    REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
    sys.clear_trace();
    auto r = s.run({y}, {{x, tensor::scalar(5.f)}});
    REQUIRE(r.ok());
    value = r->at(0).scalar_value<float>();
    trace = sys.trace();
  }
  for (auto& task : {ps, worker})
    protocol::send_stop(task);
  protocol::send_stop(master);
  sys.run_all();
  return {value, trace};
}

} // namespace

TEST_CASE("a deterministic test drives a master, two tasks and their devices in a fixed order") {
  auto [value, trace] = one_step_on_two_tasks();
  CHECK(value == 15.f);
  for (auto& line : trace)
    UNSCOPED_INFO(line);
  // The step's partitions are registered (the ps first: the master keeps devices sorted by
  // job and task), then run in the same order. The ps sends w/read and is done in one resume;
  // the worker, waiting for it, finishes only after it arrived.
  std::vector<std::string> expected{
    "ps /device:CPU:0 register 2",
    "worker /device:CPU:0 register 3",
    "ps /device:CPU:0 run step 2",
    "ps /device:CPU:0 finished step 2",
    "worker /device:CPU:0 run step 2",
    "worker /device:CPU:0 tensor w/read:0 step 2",
    "worker /device:CPU:0 finished step 2",
  };
  CHECK(trace == expected);
  CHECK(one_step_on_two_tasks().second == trace);
}

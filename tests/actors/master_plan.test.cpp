// The master's plans, without an actor system: pruning, placement and partitioning of a run
// signature, and how feeds, fetches and steps map onto partitions.
#include "actors/master_plan.hpp"

#include "graph/ops.hpp"

#include <catch2/catch.hpp>

using namespace actorflow;

namespace {

device_directory two_tasks() {
  device_directory d;
  protocol::device_list ps, worker;
  ps.devices.emplace_back("/job:ps/replica:0/task:0/device:CPU:0", protocol::device_actor{});
  worker.devices.emplace_back("/job:worker/replica:0/task:0/device:CPU:0", protocol::device_actor{});
  REQUIRE(d.add_task("ps", ps).ok());
  REQUIRE(d.add_task("worker", worker).ok());
  d.finish();
  return d;
}

} // namespace

TEST_CASE("a plan has one partition per device, with feeds and fetches where they live") {
  graph g;
  actorflow::variable w;
  {
    auto on_ps = g.device("/job:ps/task:0");
    w = ops::variable(g, 2.f, "w");
  }
  auto x = ops::placeholder(g, dtype::float32, {}, "x");
  auto y = ops::mul(w, x, "y");
  auto unused = ops::constant(g, 7.f, "unused");
  auto directory = two_tasks();
  placement_options placement;
  placement.default_task = directory.default_task("", "/job:worker/replica:0/task:0");
  auto request = protocol::make_master_run_request(1, {y, w.read}, {{x, tensor::scalar(3.f)}});
  REQUIRE(request.ok());
  std::int64_t next_handle = 10;
  std::vector<std::string> placed;
  auto plan = make_run_plan(g, *request, directory, placement, next_handle, placed);
  REQUIRE(plan.ok());
  auto& parts = (*plan)->partitions;
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].device == "/job:ps/replica:0/task:0/device:CPU:0");
  CHECK(parts[1].device == "/job:worker/replica:0/task:0/device:CPU:0");
  CHECK(parts[0].handle == 11);
  CHECK(parts[1].handle == 12);
  CHECK(next_handle == 12);
  // w/read is fetched from the ps, y from the worker, which also takes the feed.
  CHECK(parts[0].fetch_names == std::vector<std::string>{"w/read:0"});
  CHECK(parts[0].fetch_slots == std::vector<std::size_t>{1});
  CHECK(parts[1].fetch_slots == std::vector<std::size_t>{0});
  CHECK(parts[0].feeds.empty());
  REQUIRE(parts[1].feeds.size() == 1);
  CHECK(parts[1].feeds[0].second == "x:0");
  // Pruned: the unused constant is placed nowhere.
  CHECK(g.at(unused.node_id).assigned_device.empty());
  CHECK(std::find(placed.begin(), placed.end(), "y: /job:worker/replica:0/task:0/device:CPU:0") !=
        placed.end());

  auto step = make_step_plan(**plan, 5, *request, 1000);
  REQUIRE(step.calls.size() == 2);
  CHECK(step.calls[1].second.handle == 12);
  CHECK(step.calls[1].second.feeds.at(0).second.scalar_value<float>() == 3.f);
  CHECK(step.timeout_ms == 1000);
  std::vector<std::vector<tensor>> fetched{{tensor::scalar(2.f)}, {tensor::scalar(6.f)}};
  auto ordered = gather_fetches(**plan, fetched, 2);
  CHECK(ordered[0].scalar_value<float>() == 6.f);
  CHECK(ordered[1].scalar_value<float>() == 2.f);
}

TEST_CASE("a plan for a name that is not in the graph names it") {
  graph g;
  ops::constant(g, 1.f, "c");
  auto directory = two_tasks();
  protocol::master_run_request request;
  request.fetches = {"missing:0"};
  std::int64_t next_handle = 0;
  std::vector<std::string> placed;
  auto plan = make_run_plan(g, request, directory, {}, next_handle, placed);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.error().message().find("fetch 'missing:0'") != std::string::npos);
}

TEST_CASE("plans are cached by signature and forgotten only if still the same") {
  protocol::master_run_request a, b;
  a.fetches = {"y:0"};
  b.fetches = {"y:0"};
  b.targets = {"train"};
  CHECK(run_signature(a) != run_signature(b));
  plan_cache cache;
  auto first = std::make_shared<run_plan>();
  auto second = std::make_shared<run_plan>();
  cache.insert(run_signature(a), first);
  CHECK(cache.find(run_signature(a)) == first);
  CHECK(cache.find(run_signature(b)) == nullptr);
  cache.insert(run_signature(a), second);
  cache.forget(run_signature(a), first); // a stale plan: the newer one stays
  CHECK(cache.find(run_signature(a)) == second);
  cache.forget(run_signature(a), second);
  CHECK(cache.all().empty());
}

TEST_CASE("runs waiting for a plan's registration all learn its outcome once") {
  run_plan plan;
  int called = 0;
  status seen;
  plan.waiting.push_back([&](const status& s) { ++called; seen = s; });
  plan.waiting.push_back([&](const status&) { ++called; });
  plan.finish_registration(make_error(errc::unavailable, "ps gone"));
  CHECK(called == 2);
  CHECK_FALSE(plan.registering);
  CHECK(seen.message() == "ps gone");
  CHECK(plan.waiting.empty());
}

TEST_CASE("the master places over the kernels a task reports, not over its own registry") {
  // A worker with a device type this process has no kernels for (a GPU, to a master built
  // without CUDA): it reports Square but not Neg for it.
  device_directory d;
  protocol::device_list worker;
  worker.devices.emplace_back("/job:worker/replica:0/task:0/device:CPU:0", protocol::device_actor{});
  worker.devices.emplace_back("/job:worker/replica:0/task:0/device:XPU:0", protocol::device_actor{});
  worker.kernels.emplace_back("XPU", std::vector<std::string>{"Const:float32", "Square:float32"});
  REQUIRE(d.add_task("worker", worker).ok());
  d.finish();
  CHECK(d.has_kernel("Square", "XPU", dtype::float32));
  CHECK_FALSE(d.has_kernel("Neg", "XPU", dtype::float32));
  // The CPU's set was not reported: this process's registry answers for it.
  CHECK(d.has_kernel("MatMul", "CPU", dtype::float32));

  graph g;
  output squared, negated;
  {
    auto xpu = g.device("/job:worker/task:0/device:XPU:0");
    squared = ops::square(ops::constant(g, 3.f, "x"), "squared");
  }
  placement_options placement;
  placement.default_task = d.default_task("", "/job:worker/replica:0/task:0");
  std::int64_t next_handle = 0;
  std::vector<std::string> placed;
  auto request = protocol::make_master_run_request(1, {squared}, {});
  REQUIRE(request.ok());
  auto plan = make_run_plan(g, *request, d, placement, next_handle, placed);
  INFO(plan.error().to_string());
  REQUIRE(plan.ok());
  CHECK((*plan)->partitions.at(0).device == "/job:worker/replica:0/task:0/device:XPU:0");

  {
    auto xpu = g.device("/job:worker/task:0/device:XPU:0");
    negated = ops::neg(squared, "negated");
  }
  auto refused = protocol::make_master_run_request(1, {negated}, {});
  REQUIRE(refused.ok());
  auto failed = make_run_plan(g, *refused, d, placement, next_handle, placed);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().message().find("node 'negated'") != std::string::npos);
}

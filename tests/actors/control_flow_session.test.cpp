// Loops and conds through sessions: a recurrent model (tests/support/recurrent_model.hpp)
// trained on an in-process cluster (the loop on a worker, its variables on the ps), on the test
// device (its own memory, the GPU's path), and with its body split over two devices or two
// tasks gives the single device's numbers step for step.
#include "actors/session.hpp"
#include "graph/control_flow.hpp"
#include "graph/ops.hpp"
#include "graph/replica_device_setter.hpp"
#include "support/recurrent_model.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <thread>
#include <string>
#include <vector>

using namespace actorflow;
using Catch::Matchers::Contains;
using actorflow::testing::build_recurrent;
using actorflow::testing::recurrent_model;

namespace {

std::vector<float> train_losses(session_options options, bool replicated,
                                const std::string& input_device = "",
                                std::vector<std::string>* placement = nullptr) {
  graph g;
  g.seed = 7;
  std::optional<scope_guard> on_cluster;
  if (replicated) {
    auto setter = replica_device_setter(1);
    REQUIRE(setter.ok());
    on_cluster.emplace(g.device(*setter));
  }
  auto m = build_recurrent(g, input_device);
  on_cluster.reset();
  INFO(g.status().to_string());
  REQUIRE(g.status().ok());
  options.log_device_placement = true;
  session s{g, options};
  auto losses = actorflow::testing::train_recurrent(s, g, m, 30);
  if (replicated) {
    CHECK(g.at(m.w.ref.node_id).assigned_device == "/job:ps/replica:0/task:0/device:CPU:0");
    CHECK(g.at(m.last_state.node_id).assigned_device == "/job:worker/replica:0/task:0/device:CPU:0");
  }
  if (placement != nullptr)
    *placement = s.placement_log();
  return losses;
}

/// The same losses, step for step, within float32's rounding of different summation orders.
void check_same_losses(const std::vector<float>& expected, const std::vector<float>& actual) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i)
    CHECK(actual[i] == Approx(expected[i]).epsilon(1e-5));
}

/// The device `log` says node `name` was placed on.
std::string placed(const std::vector<std::string>& log, const std::string& name) {
  for (auto& line : log)
    if (line.rfind(name + ": ", 0) == 0)
      return line.substr(name.size() + 2);
  return {};
}

} // namespace

TEST_CASE("a loop trained on an in-process cluster matches the single device, step for step") {
  auto local = train_losses({}, false);
  session_options cluster;
  cluster.in_process_cluster = {{"ps", 1}, {"worker", 2}};
  auto distributed = train_losses(cluster, true);
  check_same_losses(local, distributed);
  // It learns: the loss falls well below where it started.
  CHECK(local.back() < 0.5f * local.front());
}

TEST_CASE("a loop on the test device gives the CPU's numbers") {
  auto cpu = train_losses({}, false);
  session_options test;
  test.test_device_count = 1;
  std::vector<std::string> log;
  auto on_test_device = train_losses(test, false, "", &log);
  CHECK(placed(log, "while/Merge") == "/job:localhost/replica:0/task:0/device:TEST:0");
  CHECK(placed(log, "while/Tanh") == "/job:localhost/replica:0/task:0/device:TEST:0");
  check_same_losses(cpu, on_test_device);
}

TEST_CASE("a loop whose body spans two devices runs a copy of its control on each") {
  auto cpu = train_losses({}, false);
  session_options test;
  test.test_device_count = 1;
  std::vector<std::string> log;
  // The loop's control goes to the test device (preferred), the input's part to the CPU: the
  // CPU runs its own Enter, Merge, Switch and NextIteration, driven by the condition it
  // receives every iteration, and tensors cross inside the loop under per-iteration keys.
  auto split = train_losses(test, false, "/device:CPU:0", &log);
  CHECK(placed(log, "while/Merge") == "/job:localhost/replica:0/task:0/device:TEST:0");
  CHECK(placed(log, "while/from_input") == "/job:localhost/replica:0/task:0/device:CPU:0");
  CHECK(placed(log, "gradients/while/Exit_grad/Merge") ==
        "/job:localhost/replica:0/task:0/device:TEST:0");
  check_same_losses(cpu, split);
}

TEST_CASE("a loop whose body spans two tasks of an in-process cluster matches one device") {
  auto local = train_losses({}, false);
  session_options cluster;
  cluster.in_process_cluster = {{"ps", 1}, {"worker", 2}};
  std::vector<std::string> log;
  auto split = train_losses(cluster, true, "/job:worker/task:1", &log);
  CHECK(placed(log, "while/from_input") == "/job:worker/replica:0/task:1/device:CPU:0");
  CHECK(placed(log, "while/LoopCond") == "/job:worker/replica:0/task:0/device:CPU:0");
  check_same_losses(local, split);
}

TEST_CASE("a cond through a session takes the branch its predicate picks") {
  graph g;
  auto p = ops::placeholder(g, dtype::boolean, {}, "p");
  auto x = ops::constant(g, 5.f, "x");
  auto y = ops::cond(p, [&] { return x * x; }, [&] { return x - 1.0; });
  session s{g};
  auto yes = s.run({y}, {{p, tensor::scalar(true)}});
  auto no = s.run({y}, {{p, tensor::scalar(false)}});
  REQUIRE(yes.ok());
  REQUIRE(no.ok());
  CHECK(yes->at(0).scalar_value<float>() == 25.f);
  CHECK(no->at(0).scalar_value<float>() == 4.f);
}

TEST_CASE("a cond whose branches run on other tasks sends them only the taken branch's values") {
  for (bool take_far_branch : {true, false}) {
    graph g;
    auto p = ops::placeholder(g, dtype::boolean, {}, "p");
    output x, y;
    {
      auto on_worker0 = g.device("/job:worker/task:0");
      x = ops::fill(g, {256, 256}, ops::constant(g, 0.5f), "x");
    }
    y = ops::cond(
      p,
      [&] {
        auto far = g.device("/job:worker/task:1");
        return ops::reduce_sum(ops::matmul(x, x), {}, false, "far_sum");
      },
      [&] {
        auto near = g.device("/job:worker/task:0");
        return ops::reduce_sum(x, {}, false, "near_sum");
      });
    session_options options;
    options.in_process_cluster = {{"worker", 2}};
    options.log_device_placement = true;
    session s{g, options};
    auto r = s.run({y}, {{p, tensor::scalar(take_far_branch)}});
    INFO(r.error().to_string());
    REQUIRE(r.ok());
    CHECK(r->at(0).scalar_value<float>() ==
          Approx(take_far_branch ? 256.f * 256.f * 256.f * 0.25f : 256.f * 256.f * 0.5f));
    // x is switched where it is made: what crosses to task 1 is the switched value, dead (an
    // empty tensor) when the far branch is not taken.
    auto switches = 0;
    for (auto& line : s.placement_log())
      if (line.rfind("cond/Switch", 0) == 0) {
        ++switches;
        CHECK_THAT(line, Contains("/job:worker/replica:0/task:0/"));
      }
    CHECK(switches >= 2);
  }
}

namespace {

/// A loop of about 50 s (some 5 us an iteration) unless something stops it.
std::vector<output> long_loop(graph& g) {
  return ops::while_loop(
    [](const std::vector<output>& v) { return ops::less(v[0], 1e7); },
    [](const std::vector<output>& v) { return std::vector<output>{v[0] + 1.0}; },
    {ops::constant(g, 0.f, "i0")});
}

session_options on_one_process_or_cluster(bool on_cluster) {
  session_options options;
  if (on_cluster)
    options.in_process_cluster = {{"worker", 1}, {"ps", 1}};
  return options;
}

} // namespace

TEST_CASE("a step past its run_options timeout is aborted on every device and the session goes on") {
  using namespace std::chrono_literals;
  for (bool on_cluster : {false, true}) {
    INFO((on_cluster ? "in-process cluster" : "one process"));
    graph g;
    auto loop = long_loop(g);
    output beside;
    {
      auto on_ps = g.device(on_cluster ? "/job:ps/task:0" : "");
      beside = ops::constant(g, 2.f, "two") * 3.f;
    }
    session s{g, on_one_process_or_cluster(on_cluster)};
    run_options bounded;
    bounded.timeout_ms = 100;
    auto started = std::chrono::steady_clock::now();
    auto r = s.run_with(bounded, {loop[0], beside});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::deadline_exceeded);
    CHECK_THAT(r.error().message(), Contains("100 ms timeout"));
    CHECK(std::chrono::steady_clock::now() - started < 10s);
    // The session goes on, under the bound and without it.
    auto ok = s.run_with(bounded, {beside});
    REQUIRE(ok.ok());
    CHECK(ok->at(0).scalar_value<float>() == 6.f);
    auto unbounded = s.run({beside});
    REQUIRE(unbounded.ok());
  }
}

TEST_CASE("cancel_running_steps aborts a step in flight from another thread and the session goes on") {
  using namespace std::chrono_literals;
  for (bool on_cluster : {false, true}) {
    INFO((on_cluster ? "in-process cluster" : "one process"));
    graph g;
    auto loop = long_loop(g);
    auto small = ops::constant(g, 2.f, "two") * 3.f;
    session s{g, on_one_process_or_cluster(on_cluster)};
    REQUIRE(s.run({small}).ok());
    // Nothing in flight: a cancel changes nothing.
    s.cancel_running_steps();
    auto started = std::chrono::steady_clock::now();
    std::optional<result<std::vector<tensor>>> outcome;
    std::thread stepping{[&] { outcome.emplace(s.run({loop[0]})); }};
    std::this_thread::sleep_for(200ms);
    s.cancel_running_steps();
    stepping.join();
    REQUIRE(outcome);
    REQUIRE_FALSE(outcome->ok());
    CHECK(outcome->error().code() == errc::aborted);
    CHECK_THAT(outcome->error().message(), Contains("cancelled by its client"));
    CHECK(std::chrono::steady_clock::now() - started < 10s);
    auto ok = s.run({small});
    REQUIRE(ok.ok());
    CHECK(ok->at(0).scalar_value<float>() == 6.f);
  }
}

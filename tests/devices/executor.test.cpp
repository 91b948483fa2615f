// Where the executor runs ready nodes: inexpensive ones on the starting (actor's) thread, the
// rest on the pool.
#include "support/kernel_test_util.hpp"

#include "devices/commit_gate.hpp"
#include "devices/executor.hpp"
#include "graph/ops.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <vector>

using namespace actorflow;
using namespace actorflow::testing;

namespace {

/// Runs a partition with a pool that only queues work, then drains the queue on this thread:
/// `handed_to_pool` counts the nodes that were not run where they became ready.
struct counted_step {
  int handed_to_pool = 0;
  status outcome;
  std::vector<tensor> fetched;

  counted_step(kernel_test_env& env, std::shared_ptr<const graph> partition,
               std::vector<std::string> fetches) {
    auto plan = executor_plan::make(std::move(partition), env.dev(), kernel_registry::global());
    REQUIRE(plan.ok());
    std::vector<std::function<void()>> queue;
    step_hooks hooks;
    hooks.schedule = [&](std::function<void()> work) {
      ++handed_to_pool;
      queue.push_back(std::move(work));
    };
    bool done = false;
    auto step = std::make_shared<step_execution>(*plan, 1, std::move(hooks));
    step->start({}, std::move(fetches), [&](status s, std::vector<tensor> values) {
      outcome = std::move(s);
      fetched = std::move(values);
      done = true;
    });
    while (!queue.empty()) {
      auto work = std::move(queue.back());
      queue.pop_back();
      work();
    }
    REQUIRE(done);
  }
};

} // namespace

TEST_CASE("a step of small nodes runs on the thread that starts it, without pool handoffs") {
  kernel_test_env env;
  auto g = std::make_shared<graph>();
  auto a = ops::constant(*g, std::vector<float>{1, 2, 3}, {3}, "a");
  auto b = ops::constant(*g, std::vector<float>{4, 5, 6}, {3}, "b");
  auto sum = ops::reduce_sum(ops::square(a + b) - a, {}, false, "sum");
  counted_step step{env, g, {sum.tensor_name()}};
  REQUIRE(step.outcome.ok());
  CHECK(step.fetched.at(0).scalar_value<float>() == 25 + 49 + 81 - 6);
  CHECK(step.handed_to_pool == 0);
}

TEST_CASE("large inputs and ops whose output small inputs do not bound go to the pool") {
  kernel_test_env env;
  auto g = std::make_shared<graph>();
  // Fill's inputs are a few bytes, its output 4 MiB: never inline.
  auto big = ops::fill(*g, {1024, 1024}, ops::constant(*g, 2.f), "big");
  // Its consumer becomes ready on the pool thread that ran Fill and stays there.
  auto total = ops::reduce_sum(big, {}, false, "total");
  counted_step step{env, g, {total.tensor_name()}};
  REQUIRE(step.outcome.ok());
  CHECK(step.fetched.at(0).scalar_value<float>() == 2.f * 1024 * 1024);
  CHECK(step.handed_to_pool == 1);
}

TEST_CASE("a node whose inputs exceed the inline limit leaves the starting thread") {
  kernel_test_env env;
  auto g = std::make_shared<graph>();
  std::vector<float> values(step_execution::inline_input_bytes / sizeof(float) + 1, 1.f);
  auto large = ops::constant(*g, values, {static_cast<std::int64_t>(values.size())}, "large");
  auto small = ops::constant(*g, 3.f, "small");
  auto total = ops::reduce_sum(large, {}, false, "total");
  auto tripled = ops::mul(small, ops::constant(*g, 3.f), "tripled");
  counted_step step{env, g, {total.tensor_name(), tripled.tensor_name()}};
  REQUIRE(step.outcome.ok());
  CHECK(step.fetched.at(0).scalar_value<float>() == static_cast<float>(values.size()));
  CHECK(step.fetched.at(1).scalar_value<float>() == 9.f);
  CHECK(step.handed_to_pool == 1); // the sum of the large constant; the constants and mul stay
}

namespace {

/// Runs `targets` and `fetches` of `plan` as one inline step; `gate` (optional) holds the
/// step's first updates. `started` sees the step before it may end.
struct gated_step {
  std::shared_ptr<step_execution> execution;
  std::optional<status> outcome;
  std::vector<tensor> fetched;

  gated_step(const std::shared_ptr<const executor_plan>& plan, std::int64_t step_id,
             std::vector<std::string> fetches, std::shared_ptr<commit_gate> gate = nullptr) {
    execution = std::make_shared<step_execution>(plan, step_id, step_hooks{});
    if (gate)
      execution->set_gate(std::move(gate));
    execution->start({}, std::move(fetches), [this](status s, std::vector<tensor> values) {
      outcome = std::move(s);
      fetched = std::move(values);
    });
  }
};

} // namespace

TEST_CASE("a step that fails here after its first updates are prepared leaves them to the coordinator's decision") {
  kernel_test_env env;
  // Three partitions of one device, as a master would prune them for three steps: initialise
  // v, add 5 to it (a first update, held by the gate), read it. Only the first has v's
  // initialiser (a partition runs every node it has).
  auto plan_of = [&](const std::function<std::string(graph&)>& build, std::string& fetch) {
    auto g = std::make_shared<graph>();
    fetch = build(*g);
    auto plan = executor_plan::make(g, env.dev(), kernel_registry::global());
    REQUIRE(plan.ok());
    return *plan;
  };
  auto stored = [](graph& g) {
    auto id = g.add_node(node_spec{"VariableV2", "v", {}, {{"dtype", dtype::float32}, {"shape", tensor_shape{}}}});
    return actorflow::variable{g.output_of(id, 0), g.output_of(id, 0), output{}};
  };
  std::string initialised_value, added, read;
  auto initialise = plan_of([](graph& g) {
    return ops::identity(ops::variable(g, 0.f, "v").initializer).tensor_name();
  }, initialised_value);
  auto add = plan_of([&](graph& g) {
    auto sum = ops::assign_add(stored(g), ops::constant(g, 5.f), "add");
    g.at(sum.node_id).attrs[commit_gate_attr] = true;
    return sum.tensor_name();
  }, added);
  auto read_value = plan_of([&](graph& g) { return stored(g).read.tensor_name(); }, read);
  gated_step initialised{initialise, 1, {initialised_value}};
  REQUIRE(initialised.outcome.has_value());
  REQUIRE(initialised.outcome->ok());
  std::int64_t next_step = 2;
  auto value = [&] {
    gated_step step{read_value, next_step++, {read}};
    REQUIRE(step.outcome.has_value());
    REQUIRE(step.outcome->ok());
    return step.fetched.at(0).scalar_value<float>();
  };

  for (bool commit : {true, false}) {
    INFO((commit ? "the coordinator commits" : "the coordinator aborts"));
    bool armed = false;
    auto gate = std::make_shared<commit_gate>(1, [&] { armed = true; });
    auto before = value();
    gated_step step{add, next_step++, {added}, gate};
    // The update is held and the gate armed: the device has told the coordinator it is prepared.
    REQUIRE(armed);
    REQUIRE_FALSE(step.outcome.has_value());
    // Then something of this device's own fails (a node on another branch, a send).
    step.execution->abort(make_error(errc::internal, "a node of this device failed"));
    // The coordinator may have committed every other device already: the update waits.
    CHECK_FALSE(step.outcome.has_value());
    CHECK_FALSE(gate->committed());
    if (commit)
      gate->commit();
    else
      gate->cancel();
    REQUIRE(step.outcome.has_value());
    INFO(step.outcome->to_string());
    CHECK(step.outcome->message().find("a node of this device failed") != std::string::npos);
    CHECK(value() == before + (commit ? 5.f : 0.f));
  }

  // Not yet prepared (a second first update is still to come): the failure fails the held
  // update at once.
  auto gate = std::make_shared<commit_gate>(2, [] {});
  auto before = value();
  gated_step step{add, next_step++, {added}, gate};
  REQUIRE_FALSE(step.outcome.has_value());
  step.execution->abort(make_error(errc::internal, "a node of this device failed"));
  REQUIRE(step.outcome.has_value());
  CHECK_FALSE(step.outcome->ok());
  CHECK(value() == before);
}

TEST_CASE("a step's roots all run before the nodes they make ready, so a join waiting on a root and a chain runs when the chain ends") {
  kernel_test_env env;
  auto g = std::make_shared<graph>();
  // Roots in this order: the start of a chain, the start of another, and a constant that only
  // the first chain's join waits for (as an update waits for its learning rate).
  auto first = ops::constant(*g, 2.f, "first");
  auto second = ops::constant(*g, 3.f, "second");
  auto rate = ops::constant(*g, 10.f, "rate");
  auto chain = ops::square(ops::square(first));
  auto join = ops::mul(chain, rate, "join");
  auto other = ops::square(ops::square(second));
  ops::make(*g, "_Send", "send_join", {join}, {{"key", attr_value{std::string{"join"}}}});
  ops::make(*g, "_Send", "send_other", {other}, {{"key", attr_value{std::string{"other"}}}});
  auto plan = executor_plan::make(g, env.dev(), kernel_registry::global());
  REQUIRE(plan.ok());
  std::vector<std::string> sent;
  step_hooks hooks; // no pool: every node runs on this thread, in the executor's order
  hooks.send = [&](const std::string& key, const tensor& value) {
    sent.push_back(key + "=" + std::to_string(value.scalar_value<float>()));
  };
  std::optional<status> outcome;
  auto step = std::make_shared<step_execution>(*plan, 1, std::move(hooks));
  step->start({}, {}, [&](status s, std::vector<tensor>) { outcome = std::move(s); });
  REQUIRE(outcome.has_value());
  REQUIRE(outcome->ok());
  // The join ran as soon as its chain ended, before the second chain (which ran first when
  // each root's descendants ran before the next root).
  CHECK(sent == std::vector<std::string>{"join=" + std::to_string(160.f),
                                         "other=" + std::to_string(81.f)});
}

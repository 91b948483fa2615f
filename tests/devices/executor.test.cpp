// Where the executor runs ready nodes: inexpensive ones on the starting (actor's) thread, the
// rest on the pool.
#include "support/kernel_test_util.hpp"

#include "devices/executor.hpp"
#include "graph/ops.hpp"

#include <functional>
#include <memory>
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

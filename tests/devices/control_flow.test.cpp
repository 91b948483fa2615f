// The executor's frames, iterations and dead tensors (devices/executor.cpp) on graphs built
// with cond and while_loop (graph/control_flow.hpp): inline on this thread (deterministic) and
// with an inter-op pool, on the CPU and on the test device (its own memory, a stream).
#include "support/kernel_test_util.hpp"

#include "devices/executor.hpp"
#include "graph/control_flow.hpp"
#include "graph/ops.hpp"

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

using namespace actorflow;
using namespace actorflow::testing;
using Catch::Matchers::Contains;

namespace {

struct step_outcome {
  status outcome;
  std::vector<tensor> fetched;
  std::int64_t peak_iterations = 0;
};

/// Runs `g` once, fetching `fetches`; with `pool`, ready nodes go to an inter-op pool.
step_outcome run_graph(device& dev, const graph& source, const std::vector<output>& fetches,
                       bool pool = false) {
  REQUIRE(source.status().ok());
  // The executor keeps its graph alive: share a copy made through the verbatim path.
  auto g = std::make_shared<graph>();
  for (std::size_t i = 0; i < source.size(); ++i) {
    auto n = source.at(static_cast<int>(i));
    auto added = g->add_node_verbatim(n);
    REQUIRE(added.ok());
  }
  auto plan = executor_plan::make(g, dev, kernel_registry::global());
  INFO((plan.ok() ? std::string{} : plan.error().to_string()));
  REQUIRE(plan.ok());
  std::shared_ptr<thread_pool> inter_op;
  step_hooks hooks;
  if (pool) {
    inter_op = std::make_shared<thread_pool>("test_inter_op", 4);
    hooks.schedule = [inter_op](std::function<void()> work) { inter_op->schedule(std::move(work)); };
  }
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  step_outcome out;
  auto step = std::make_shared<step_execution>(*plan, 1, std::move(hooks));
  std::vector<std::string> names;
  for (auto& f : fetches)
    names.push_back(f.tensor_name());
  step->start({}, names, [&](status s, std::vector<tensor> values) {
    std::lock_guard<std::mutex> guard{mutex};
    out.outcome = std::move(s);
    out.fetched = std::move(values);
    done = true;
    finished.notify_all();
  });
  std::unique_lock<std::mutex> lock{mutex};
  REQUIRE(finished.wait_for(lock, std::chrono::seconds(30), [&] { return done; }));
  out.peak_iterations = step->peak_iterations();
  return out;
}

std::vector<output> counting_loop(graph& g, std::int64_t parallel, int limit) {
  ops::while_options options;
  options.parallel_iterations = parallel;
  return ops::while_loop(
    [limit](const std::vector<output>& v) { return ops::less(v[0], static_cast<double>(limit)); },
    [](const std::vector<output>& v) {
      return std::vector<output>{v[0] + 1.0, v[1] * 2.0};
    },
    {ops::constant(g, std::int32_t{0}, "i"), ops::constant(g, 1.f, "x")}, options);
}

} // namespace

TEST_CASE("a while loop runs its body until the condition fails, on every device and thread mode") {
  kernel_test_env env;
  for (bool pool : {false, true}) {
    graph g;
    auto out = counting_loop(g, 10, 10);
    auto r = run_graph(env.dev(), g, out, pool);
    INFO(r.outcome.to_string());
    REQUIRE(r.outcome.ok());
    CHECK(r.fetched[0].scalar_value<std::int32_t>() == 10);
    CHECK(r.fetched[1].scalar_value<float>() == 1024.f);
  }
}

TEST_CASE("a loop whose condition fails at once runs no iteration and returns its inputs") {
  kernel_test_env env;
  graph g;
  auto out = counting_loop(g, 10, 0);
  auto r = run_graph(env.dev(), g, out);
  REQUIRE(r.outcome.ok());
  CHECK(r.fetched[0].scalar_value<std::int32_t>() == 0);
  CHECK(r.fetched[1].scalar_value<float>() == 1.f);
}

TEST_CASE("no more than parallel_iterations iterations are alive at once") {
  kernel_test_env env;
  for (std::int64_t parallel : {1, 3}) {
    graph g;
    auto out = counting_loop(g, parallel, 40);
    auto r = run_graph(env.dev(), g, out, true);
    REQUIRE(r.outcome.ok());
    CHECK(r.fetched[1].scalar_value<float>() == std::ldexp(1.f, 40));
    CHECK(r.peak_iterations >= 1); // iterations were made at all (0 without loops)
    CHECK(r.peak_iterations <= parallel);
  }
  // Inline, an iteration's NextIteration runs before the condition of the next one finishes:
  // with room for ten, more than one is alive.
  graph g;
  auto out = counting_loop(g, 10, 40);
  auto r = run_graph(env.dev(), g, out);
  REQUIRE(r.outcome.ok());
  CHECK(r.peak_iterations > 1);
  CHECK(r.peak_iterations <= 10);
}

TEST_CASE("maximum_iterations stops a loop whose condition still holds") {
  kernel_test_env env;
  graph g;
  ops::while_options options;
  options.maximum_iterations = 5;
  auto out = ops::while_loop([](const std::vector<output>& v) { return ops::less(v[0], 100.0); },
                             [](const std::vector<output>& v) { return std::vector<output>{v[0] + 3.0}; },
                             {ops::constant(g, 0.f)}, options);
  auto r = run_graph(env.dev(), g, out);
  REQUIRE(r.outcome.ok());
  CHECK(r.fetched[0].scalar_value<float>() == 15.f);
}

TEST_CASE("only the taken branch of a cond runs, the other's tensors are dead") {
  kernel_test_env env;
  for (bool take : {true, false}) {
    graph g;
    auto pred = ops::constant(g, tensor::scalar(take), "pred");
    auto x = ops::constant(g, 3.f, "x");
    auto params = ops::constant(g, std::vector<float>{1, 2}, {2}, "params");
    auto out = ops::cond(
      pred, [&] { return x * 2.0; },
      // Index 7 of two elements: this branch fails if it ever runs (gives 0 + 3 on a GPU).
      [&] { return ops::gather(params, ops::constant(g, std::int32_t{7}, "bad_index")) + x; });
    if (take) {
      auto r = run_graph(env.dev(), g, {out});
      INFO(r.outcome.to_string());
      REQUIRE(r.outcome.ok());
      CHECK(r.fetched[0].scalar_value<float>() == 6.f);
    } else if (env.dev().type() == "GPU") {
      // A GPU's Gather gives zeros for an index out of range, as TensorFlow's does (its indices
      // are not on the host to check): the branch ran, and gave 0 + 3.
      auto r = run_graph(env.dev(), g, {out});
      INFO(r.outcome.to_string());
      REQUIRE(r.outcome.ok());
      CHECK(r.fetched[0].scalar_value<float>() == 3.f);
    } else {
      auto r = run_graph(env.dev(), g, {out});
      REQUIRE_FALSE(r.outcome.ok());
      CHECK_THAT(r.outcome.to_string(), Contains("Gather index 7 is out of range"));
    }
  }
}

TEST_CASE("a cond inside a loop and a loop inside a loop") {
  kernel_test_env env;
  for (bool pool : {false, true}) {
    // Collatz: the number of steps from 27 to 1 is 111.
    graph g;
    auto out = ops::while_loop(
      [](const std::vector<output>& v) { return ops::greater(v[0], 1.0); },
      [&g](const std::vector<output>& v) {
        auto n = v[0];
        auto half = n * 0.5;
        auto even = ops::equal(ops::cast(ops::cast(half, dtype::int32), dtype::float32), half);
        (void)g;
        auto next = ops::cond(even, [&] { return half; }, [&] { return n * 3.0 + 1.0; });
        return std::vector<output>{next, v[1] + 1.0};
      },
      {ops::constant(g, 27.f, "n"), ops::constant(g, 0.f, "steps")});
    // sum over i < 3, j < 4 of (i + 1) * (j + 1) = 6 * 10 = 60, with a loop in the body.
    auto sum = ops::while_loop(
      [](const std::vector<output>& v) { return ops::less(v[0], 3.0); },
      [](const std::vector<output>& v) {
        auto i = v[0];
        auto inner = ops::while_loop(
          [](const std::vector<output>& w) { return ops::less(w[0], 4.0); },
          [i](const std::vector<output>& w) {
            return std::vector<output>{w[0] + 1.0, w[1] + (i + 1.0) * (w[0] + 1.0)};
          },
          {ops::scalar_like(*i.owner, dtype::float32, 0.0, "j"), v[1]});
        return std::vector<output>{i + 1.0, inner[1]};
      },
      {ops::constant(g, 0.f, "i"), ops::constant(g, 0.f, "total")});
    auto r = run_graph(env.dev(), g, {out[1], sum[1]}, pool);
    INFO(r.outcome.to_string());
    REQUIRE(r.outcome.ok());
    REQUIRE(r.fetched[0].is_initialized());
    REQUIRE(r.fetched[1].is_initialized());
    CHECK(r.fetched[0].scalar_value<float>() == 111.f);
    CHECK(r.fetched[1].scalar_value<float>() == 60.f);
  }
}

TEST_CASE("loops and conds on the test device copy the predicate to the host") {
  auto pool = std::make_shared<thread_pool>("test_intra_op", 2);
  auto dev = kernel_test_env::make_device("TEST", pool);
  graph g;
  auto out = counting_loop(g, 4, 12);
  auto picked = ops::cond(ops::greater(out[1], 100.0), [&] { return out[1] - 1.0; },
                          [&] { return out[1]; });
  auto r = run_graph(*dev, g, {out[0], picked}, true);
  INFO(r.outcome.to_string());
  REQUIRE(r.outcome.ok());
  CHECK(r.fetched[0].scalar_value<std::int32_t>() == 12);
  CHECK(r.fetched[1].scalar_value<float>() == 4095.f);
}

TEST_CASE("building a loop or cond wrongly is an error naming the loop and the value") {
  SECTION("a body that changes a shape") {
    graph g;
    ops::while_loop([](const std::vector<output>& v) { return ops::less(ops::reduce_sum(v[0]), 3.0); },
                    [](const std::vector<output>& v) {
                      return std::vector<output>{ops::concat({v[0], v[0]}, 0)};
                    },
                    {ops::constant(g, std::vector<float>{1}, {1})});
    CHECK_THAT(g.status().to_string(), Contains("while loop 'while'") &&
                                         Contains("shape [1] but has shape [2]"));
  }
  SECTION("a body value used outside the loop") {
    graph g;
    output leaked;
    ops::while_loop([](const std::vector<output>& v) { return ops::less(v[0], 3.0); },
                    [&](const std::vector<output>& v) {
                      leaked = v[0] * 2.0;
                      return std::vector<output>{v[0] + 1.0};
                    },
                    {ops::constant(g, 0.f)});
    REQUIRE(g.status().ok());
    auto y = leaked + 1.0;
    (void)y;
    CHECK_THAT(g.status().to_string(), Contains("is made inside the while loop 'while'"));
  }
  SECTION("a non-bool predicate") {
    graph g;
    ops::cond(ops::constant(g, 1.f), [&] { return ops::constant(g, 1.f); },
              [&] { return ops::constant(g, 2.f); });
    CHECK_THAT(g.status().to_string(), Contains("must be a bool scalar"));
  }
}

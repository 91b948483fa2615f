#include "actors/session.hpp"
#include "graph/ops.hpp"

#include <catch2/catch.hpp>

#include <cstdint>

using namespace actorflow;

namespace {
bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}
} // namespace

TEST_CASE("c = a * b returns 12 with a, a/read and b on the CPU") {
  graph g;
  auto a = ops::variable(g, 3.f, "a");
  output b;
  {
    auto cpu = g.device("/cpu:0");
    b = ops::constant(g, 4.f, "b");
  }
  auto c = a * b;
  REQUIRE(c.name() == "mul");
  session_options options;
  options.log_device_placement = true;
  session s{g, options};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  auto r = s.run({c});
  REQUIRE(r.ok());
  CHECK(r->at(0).scalar_value<float>() == 12.f);
  auto& log = s.placement_log();
  auto placed = [&](const std::string& name) {
    for (auto& line : log)
      if (line.rfind(name + ": ", 0) == 0)
        return line.substr(name.size() + 2);
    return std::string{};
  };
  CHECK(placed("a") == "/job:localhost/replica:0/task:0/device:CPU:0");
  CHECK(placed("a/read") == "/job:localhost/replica:0/task:0/device:CPU:0");
  CHECK(placed("b") == "/job:localhost/replica:0/task:0/device:CPU:0");
  CHECK(placed("mul") == "/job:localhost/replica:0/task:0/device:CPU:0");
}

TEST_CASE("a variable keeps its value across runs and assign_add accumulates") {
  graph g;
  auto v = ops::variable(g, 1.f, "v");
  auto inc = ops::assign_add(v, ops::constant(g, 2.f));
  session s{g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  for (int i = 0; i < 3; ++i)
    REQUIRE(s.run_targets({inc}).ok());
  auto r = s.run({v.read});
  REQUIRE(r.ok());
  CHECK(r->at(0).scalar_value<float>() == 7.f);
}

TEST_CASE("updates whose new value nobody reads leave the variable's buffer theirs: two in one step write it in place") {
  graph g;
  auto v = ops::variable(g, ops::zeros(g, {1 << 18}), "v");
  auto first = ops::assign_add(v, ops::ones(g, {1 << 18}), "first");
  output second;
  {
    // After the first, whose output nobody reads: kept to the step's end, that alias would
    // make this one copy the whole variable.
    auto after = g.control_dependencies({first});
    second = ops::assign_add(v, ops::ones(g, {1 << 18}), "second");
  }
  session s{g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  auto buffer = [&] {
    auto r = s.run({v.ref});
    REQUIRE(r.ok());
    return reinterpret_cast<std::uintptr_t>(r->at(0).raw_data());
  };
  auto before = buffer();
  REQUIRE(s.run_targets({second}).ok());
  CHECK(buffer() == before);
  auto r = s.run({v.read});
  REQUIRE(r.ok());
  CHECK(r->at(0).data<float>()[12345] == 2.f);
}

TEST_CASE("reading an uninitialised variable names the variable") {
  graph g;
  auto v = ops::variable(g, 1.f, "weights");
  auto y = v * 2.0;
  session s{g};
  auto r = s.run({y});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == errc::failed_precondition);
  CHECK(contains(r.error().message(), "'weights'"));
}

TEST_CASE("feeds are checked against the placeholder's dtype and shape") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {-1, 3}, "x");
  auto y = ops::reduce_sum(x);
  session s{g};
  auto ok = s.run({y}, {{x, tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3})}});
  REQUIRE(ok.ok());
  CHECK(ok->at(0).scalar_value<float>() == 21.f);
  auto bad_shape = s.run({y}, {{x, tensor::from_vector<float>({1, 2}, {1, 2})}});
  REQUIRE_FALSE(bad_shape.ok());
  CHECK(contains(bad_shape.error().message(), "'x:0'"));
  CHECK(contains(bad_shape.error().message(), "[1,2]"));
  auto bad_type = s.run({y}, {{x, tensor::from_vector<std::int32_t>({1, 2, 3}, {1, 3})}});
  REQUIRE_FALSE(bad_type.ok());
  CHECK(contains(bad_type.error().message(), "int32"));
  auto unfed = s.run({y});
  REQUIRE_FALSE(unfed.ok());
  CHECK(contains(unfed.error().message(), "x"));
}

TEST_CASE("only the nodes the fetches need run") {
  graph g;
  auto unfed = ops::placeholder(g, dtype::float32, {}, "never_fed");
  auto a = ops::constant(g, 2.f);
  auto b = a * 3.0;
  auto unused = unfed + 1.0;
  (void)unused;
  session s{g};
  auto r = s.run({b});
  REQUIRE(r.ok());
  CHECK(r->at(0).scalar_value<float>() == 6.f);
}

TEST_CASE("an int32 variable pinned to /gpu:0 fails without soft placement and runs on the CPU with it") {
  auto build = [](graph& g) {
    auto gpu = g.device("/gpu:0");
    return ops::variable(g, ops::constant(g, std::int32_t{7}), "Variable");
  };
  {
    graph g;
    auto v = build(g);
    session s{g};
    auto r = s.run({v.read}, {}, {});
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.error().message(),
                   "cannot assign a device to node 'Variable': could not satisfy explicit device specification"));
  }
  {
    graph g;
    auto v = build(g);
    session_options options;
    options.allow_soft_placement = true;
    session s{g, options};
    REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
    auto r = s.run({v.read});
    REQUIRE(r.ok());
    CHECK(r->at(0).scalar_value<std::int32_t>() == 7);
    CHECK(g.at(v.ref.node_id).assigned_device == "/job:localhost/replica:0/task:0/device:CPU:0");
  }
}

TEST_CASE("a failing node names itself and its device") {
  graph g;
  auto a = ops::placeholder(g, dtype::float32, {-1}, "a");
  auto b = ops::placeholder(g, dtype::float32, {-1}, "b");
  auto c = ops::add(a, b, "sum");
  session s{g};
  auto r = s.run({c}, {{a, tensor::from_vector<float>({1, 2, 3})}, {b, tensor::from_vector<float>({1, 2})}});
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.error().message(), "node 'sum' on /job:localhost/replica:0/task:0/device:CPU:0"));
  CHECK(contains(r.error().message(), "[3]"));
  CHECK(contains(r.error().message(), "[2]"));
}

TEST_CASE("control dependencies delay x and y until a and b ran") {
  graph g;
  auto counter = ops::variable(g, 0.f, "counter");
  auto a = ops::assign_add(counter, ops::constant(g, 1.f), "a");
  auto b = ops::assign_add(counter, ops::constant(g, 10.f), "b");
  output x, y;
  {
    auto deps = g.control_dependencies({a, b});
    // Reading the variable itself (not the snapshot `read` made before the scope) sees its
    // value when x and y run.
    x = ops::identity(counter.ref, "x");
    y = ops::mul(counter.ref, ops::constant(g, 2.f), "y");
  }
  // Many inter-op threads make an early read likely if the ordering were not enforced.
  session_options options;
  options.inter_op_parallelism_threads = 4;
  options.use_per_session_threads = true;
  session s{g, options};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  for (int step = 1; step <= 20; ++step) {
    auto r = s.run({x, y});
    REQUIRE(r.ok());
    CHECK(r->at(0).scalar_value<float>() == 11.f * step);
    CHECK(r->at(1).scalar_value<float>() == 22.f * step);
  }
}

TEST_CASE("a device function sends variables to the CPU and the rest to the GPU, falling back to the CPU without one") {
  graph g;
  auto scope = g.device([](const node& n) {
    return n.op == "VariableV2" ? std::string{"/cpu:0"} : std::string{"/gpu:0"};
  });
  auto w = ops::variable(g, 2.f, "w");
  auto y = w * 3.0;
  CHECK(g.at(w.ref.node_id).requested_device == "/device:CPU:0");
  CHECK(g.at(y.node_id).requested_device == "/device:GPU:0");
  session_options options;
  options.allow_soft_placement = true;
  session s{g, options};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  auto r = s.run({y});
  REQUIRE(r.ok());
  CHECK(r->at(0).scalar_value<float>() == 6.f);
}

TEST_CASE("step stats split a step into device execution and framework overhead") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {-1, 256}, "x");
  auto w = ops::variable(g, ops::random_uniform(g, {256, 256}, -0.1, 0.1, dtype::float32, 3), "w");
  auto y = ops::reduce_sum(ops::matmul(ops::matmul(x, w), w));
  session s{g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  tensor batch{dtype::float32, {64, 256}};
  for (std::int64_t i = 0; i < batch.num_elements(); ++i)
    batch.data<float>()[i] = 0.01f * static_cast<float>(i % 7);
  step_stats stats;
  auto r = s.run({y}, {{x, batch}}, {}, &stats);
  REQUIRE(r.ok());
  CHECK(stats.execution_seconds > 0);
  CHECK(stats.total_seconds >= stats.execution_seconds);
}

TEST_CASE("a tensor over the per-tensor cap fails its step with an error naming the node and the cap") {
  set_max_tensor_allocation_bytes(std::size_t{1} << 20);
  graph g;
  auto big = ops::fill(g, {std::int64_t{1} << 20}, ops::constant(g, 1.f), "big"); // 4 MiB
  auto total = ops::reduce_sum(big);
  session s{g};
  auto r = s.run({total});
  set_max_tensor_allocation_bytes(0);
  REQUIRE_FALSE(r.ok());
  INFO(r.error().to_string());
  CHECK(r.error().message().find("big") != std::string::npos);
  CHECK(r.error().message().find("per-tensor cap of 1048576") != std::string::npos);
  // Under the cap the same graph runs.
  session again{g};
  auto fine = again.run({total});
  REQUIRE(fine.ok());
  CHECK(fine->at(0).scalar_value<float>() == Approx(1 << 20));
}

TEST_CASE("a random op continues its sequence across a session's run signatures, and each session has its own") {
  // TF keeps one kernel per stateful node and session (its OpSegment): a training loop that
  // also fetches the loss every N steps runs two signatures, and must not draw the same
  // dropout masks or negative samples in both.
  graph g;
  g.seed = 3;
  auto drawn = ops::random_uniform(g, {4}, 0.0, 1.0, dtype::float32, std::nullopt, "drawn");
  auto doubled = ops::mul(drawn, ops::constant(g, 2.f), "doubled");
  REQUIRE(g.status().ok());
  session reference{g};
  std::vector<std::vector<float>> expected;
  for (int i = 0; i < 3; ++i) {
    auto r = reference.run({drawn});
    REQUIRE(r.ok());
    expected.push_back(r->at(0).to_vector<float>());
  }
  REQUIRE(expected[0] != expected[1]);
  session s{g};
  auto first = s.run({drawn});
  auto second = s.run({drawn, doubled});   // a second signature: another plan, the same kernel
  auto third = s.run({drawn});
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  REQUIRE(third.ok());
  CHECK(first->at(0).to_vector<float>() == expected[0]);
  CHECK(second->at(0).to_vector<float>() == expected[1]);
  CHECK(third->at(0).to_vector<float>() == expected[2]);
}

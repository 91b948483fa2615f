#include "actors/testing.hpp"

#include "graph/ops.hpp"

#include <catch2/catch.hpp>

#include <iostream>

using namespace actorflow;

TEST_CASE("a step across two devices runs the same messages in the same order every time") {
  auto run_once = [] {
    testing::deterministic_system sys;
    graph g;
    output a, b, c;
    {
      auto d = g.device("/cpu:1");
      b = ops::constant(g, 4.f, "b");
    }
    {
      auto d = g.device("/cpu:0");
      a = ops::constant(g, 3.f, "a");
      c = ops::mul(a, b, "c");
    }
    session_options base;
    base.cpu_device_count = 2;
    std::vector<std::string> trace;
    float value = 0;
    {
      session s{sys.system(), g, sys.session_options(base)};
      auto r = s.run({c});
      REQUIRE(r.ok());
      value = r->at(0).scalar_value<float>();
      trace = sys.trace();
    }
    return std::make_pair(value, trace);
  };
  auto [first_value, first_trace] = run_once();
  auto [second_value, second_trace] = run_once();
  CHECK(first_value == 12.f);
  CHECK(second_value == 12.f);
  CHECK(first_trace == second_trace);
  for (auto& line : first_trace)
    UNSCOPED_INFO(line);
  // Registration of both partitions, then the step. CPU:1 sends b and finishes in one resume
  // (its own "finished" message is already in its mailbox); CPU:0, waiting on the receive,
  // finishes only after b arrived.
  std::vector<std::string> expected{
    "/device:CPU:0 register 1",
    "/device:CPU:1 register 2",
    "/device:CPU:0 run step 1",
    "/device:CPU:1 run step 1",
    "/device:CPU:1 finished step 1",
    "/device:CPU:0 tensor b:0 step 1",
    "/device:CPU:0 finished step 1",
  };
  CHECK(first_trace == expected);
}

TEST_CASE("a failing node on one device ends the step on the device waiting for it") {
  testing::deterministic_system sys;
  graph g;
  output x, y, z;
  {
    auto d = g.device("/cpu:1");
    auto p = ops::placeholder(g, dtype::float32, {-1}, "p");
    auto q = ops::placeholder(g, dtype::float32, {-1}, "q");
    x = ops::add(p, q, "broken");
    // cpu:0 waits for `broken`, which fails on cpu:1.
    auto dev0 = g.device("/cpu:0");
    y = ops::square(x, "waiting");
    z = ops::constant(g, 1.f, "independent");
  }
  session_options base;
  base.cpu_device_count = 2;
  session s{sys.system(), g, sys.session_options(base)};
  auto p = g.find_output("p");
  auto q = g.find_output("q");
  auto r = s.run({y, z}, {{p, tensor::from_vector<float>({1, 2, 3})}, {q, tensor::from_vector<float>({1, 2})}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message().find("node 'broken' on /job:localhost/replica:0/task:0/device:CPU:1") !=
        std::string::npos);
  // Both devices reported the end of the step: nobody is left waiting.
  int finished = 0;
  for (auto& line : sys.trace())
    if (line.find("finished step 1") != std::string::npos)
      ++finished;
  CHECK(finished == 2);
  // The session stays usable after a failed step.
  auto ok = s.run({z});
  REQUIRE(ok.ok());
  CHECK(ok->at(0).scalar_value<float>() == 1.f);
}

TEST_CASE("a session on the threaded scheduler moves tensors between two CPU devices") {
  graph g;
  actorflow::variable a;
  output c;
  {
    auto d = g.device("/cpu:1");
    a = ops::variable(g, 2.f, "a");
  }
  {
    auto d = g.device("/cpu:0");
    c = a * a * 5.0;
  }
  session_options options;
  options.cpu_device_count = 2;
  session s{g, options};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  for (int i = 0; i < 20; ++i) {
    auto r = s.run({c});
    REQUIRE(r.ok());
    CHECK(r->at(0).scalar_value<float>() == 20.f);
  }
  CHECK(g.at(a.ref.node_id).assigned_device == "/job:localhost/replica:0/task:0/device:CPU:1");
}

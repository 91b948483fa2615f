// Device scopes while building a graph: names, nesting, device functions, invalid strings.
#include "graph/graph.hpp"
#include "graph/ops.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace actorflow;
using Catch::Matchers::Contains;

TEST_CASE("a device scope sets requested_device in canonical form", "[graph][device]") {
  graph g;
  output a;
  {
    auto dev = g.device("/cpu:0");
    a = ops::constant(g, 1.f, "a");
  }
  auto b = ops::constant(g, 2.f, "b");
  REQUIRE(g.status().ok());
  CHECK(a.producer().requested_device == "/device:CPU:0");
  // Outside the scope nothing is requested, and nothing is assigned while building.
  CHECK(b.producer().requested_device.empty());
  CHECK(a.producer().assigned_device.empty());
}

TEST_CASE("nested device scopes override only the fields they name", "[graph][device]") {
  graph g;
  output inner, outer_only, job_override;
  {
    auto outer = g.device("/job:worker/task:0");
    outer_only = ops::constant(g, 1.f);
    {
      auto dev = g.device("/gpu:1");
      inner = ops::constant(g, 2.f);
      {
        auto other_job = g.device("/job:ps");
        job_override = ops::constant(g, 3.f);
      }
    }
  }
  REQUIRE(g.status().ok());
  CHECK(outer_only.producer().requested_device == "/job:worker/task:0");
  CHECK(inner.producer().requested_device == "/job:worker/task:0/device:GPU:1");
  CHECK(job_override.producer().requested_device == "/job:ps/task:0/device:GPU:1");
}

TEST_CASE("an inner device scope of another type replaces the outer type", "[graph][device]") {
  graph g;
  output x;
  {
    auto outer = g.device("/job:worker/replica:0/task:1/device:CPU:0");
    auto inner = g.device("/device:GPU:0");
    x = ops::constant(g, 1.f);
  }
  CHECK(x.producer().requested_device == "/job:worker/replica:0/task:1/device:GPU:0");
}

TEST_CASE("a device function places every Variable on the CPU and the rest on the GPU",
          "[graph][device]") {
  graph g;
  variable w;
  output y;
  {
    auto dev = g.device([](const node& n) -> std::string {
      return n.op == "VariableV2" ? "/cpu:0" : "/gpu:0";
    });
    w = ops::variable(g, ops::zeros(g, {2, 2}), "w");
    y = ops::matmul(w, w);
  }
  auto after = ops::constant(g, 1.f);
  REQUIRE(g.status().ok());
  // Device functions may return any spelling; the canonical one is kept.
  CHECK(w.ref.producer().requested_device == "/device:CPU:0");
  CHECK(y.producer().requested_device == "/device:GPU:0");
  CHECK(g.at(g.find("zeros/Fill")).requested_device == "/device:GPU:0");
  // The variable's assign and read are colocated with it, whatever the function says.
  CHECK(w.initializer.producer().requested_device == "/device:CPU:0");
  CHECK(w.read.producer().requested_device == "/device:CPU:0");
  CHECK(after.producer().requested_device.empty());
}

TEST_CASE("a device function sees the device requested by inner scopes", "[graph][device]") {
  graph g;
  std::string seen;
  output x;
  {
    auto fn = g.device([&seen](const node& n) {
      seen = n.requested_device;
      return n.requested_device.empty() ? std::string{"/cpu:0"} : n.requested_device;
    });
    auto dev = g.device("/gpu:2");
    x = ops::constant(g, 1.f);
  }
  CHECK(seen == "/device:GPU:2");
  CHECK(x.producer().requested_device == "/device:GPU:2");
}

TEST_CASE("a device scope inside a device function merges with the function's choice",
          "[graph][device]") {
  graph g;
  output x;
  {
    auto dev = g.device("/job:ps/task:3");
    auto fn = g.device([](const node&) { return std::string{"/cpu:0"}; });
    x = ops::constant(g, 1.f);
  }
  CHECK(x.producer().requested_device == "/job:ps/task:3/device:CPU:0");
}

TEST_CASE("an invalid device string is recorded as an error quoting it", "[graph][device]") {
  graph g;
  output x;
  {
    auto dev = g.device("/gpu:zero");
    x = ops::constant(g, 1.f);
  }
  REQUIRE_FALSE(g.status().ok());
  CHECK(g.status().code() == errc::invalid_argument);
  CHECK_THAT(g.status().message(), Contains("'/gpu:zero'"));
  // Building goes on; the bad scope requests nothing.
  CHECK(x.valid());
  CHECK(x.producer().requested_device.empty());
}

TEST_CASE("an invalid device string inside a valid scope leaves the outer request",
          "[graph][device]") {
  graph g;
  output x;
  {
    auto outer = g.device("/cpu:0");
    auto bad = g.device("/job:");
    x = ops::constant(g, 1.f);
  }
  REQUIRE_FALSE(g.status().ok());
  CHECK_THAT(g.status().message(), Contains("'/job:'"));
  CHECK(x.producer().requested_device == "/device:CPU:0");
}

TEST_CASE("a device function returning an invalid string is an error naming the node",
          "[graph][device]") {
  graph g;
  {
    auto fn = g.device([](const node&) { return std::string{"/gpu:one"}; });
    (void)ops::constant(g, 1.f, "odd");
  }
  REQUIRE_FALSE(g.status().ok());
  CHECK_THAT(g.status().message(), Contains("'odd'") && Contains("'/gpu:one'"));
}

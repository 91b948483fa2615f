// AllReduce across the devices of one process: every member gets the sum or mean, on the CPU
// and on test devices, and a step aborted while members wait ends instead of hanging.
#include "actors/session.hpp"
#include "devices/collective.hpp"
#include "graph/ops.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace actorflow;
using Catch::Matchers::Contains;

namespace {

session_options devices_of(const std::string& type) {
  session_options options;
  options.log_device_placement = true;
  if (type == "CPU") {
    options.cpu_device_count = 2;
    options.test_device_count = 0;
  } else {
    options.test_device_count = 2;
  }
  return options;
}

std::string placed(const session& s, const std::string& name) {
  for (auto& line : s.placement_log())
    if (line.rfind(name + ": ", 0) == 0)
      return line.substr(name.size() + 2);
  return {};
}

} // namespace

TEST_CASE("all_reduce gives every member the sum or the mean of all members") {
  auto type = GENERATE(as<std::string>{}, "CPU", "TEST");
  INFO("on " << type << " devices");
  graph g;
  output a, b;
  {
    auto first = g.device("/device:" + type + ":0");
    a = ops::constant(g, std::vector<float>{1, 2, 3}, {3}, "a") * 1.f;
  }
  {
    auto second = g.device("/device:" + type + ":1");
    b = ops::constant(g, std::vector<float>{3, 4, 5}, {3}, "b") * 1.f;
  }
  auto means = ops::all_reduce({a, b}, "mean", "mean");
  auto sums = ops::all_reduce({a, b}, "sum", "sum");
  REQUIRE(g.status().ok());
  REQUIRE(means.size() == 2);
  session s{g, devices_of(type)};
  for (int step = 0; step < 3; ++step) {
    auto r = s.run({means[0], means[1], sums[0], sums[1]});
    INFO(r.error().to_string());
    REQUIRE(r.ok());
    CHECK(r->at(0).to_vector<float>() == std::vector<float>{2, 3, 4});
    CHECK(r->at(1).to_vector<float>() == std::vector<float>{2, 3, 4});
    CHECK(r->at(2).to_vector<float>() == std::vector<float>{4, 6, 8});
    CHECK(r->at(3).to_vector<float>() == std::vector<float>{4, 6, 8});
  }
  // Each member runs beside its value.
  CHECK(placed(s, means[0].name()) == "/job:localhost/replica:0/task:0/device:" + type + ":0");
  CHECK(placed(s, means[1].name()) == "/job:localhost/replica:0/task:0/device:" + type + ":1");
  CHECK(host_collectives().pending_groups() == 0);
}

TEST_CASE("a step that fails while all_reduce members wait ends with the failing node's error") {
  graph g;
  output a, b;
  {
    auto first = g.device("/cpu:0");
    a = ops::constant(g, std::vector<float>{1, 2, 3}, {3}, "a") * 1.f;
  }
  output fed;
  {
    auto second = g.device("/cpu:1");
    fed = ops::placeholder(g, dtype::float32, tensor_shape::unknown(), "fed");
    b = ops::reshape(fed, {3}, "bad_reshape");
  }
  auto summed = ops::all_reduce({a, b}, "sum");
  session s{g, devices_of("CPU")};
  // Seven elements do not reshape to three: member 1 never arrives, member 0 must stop waiting.
  // Fetching member 0 alone runs member 1 too: a collective's members run together.
  auto r = s.run({summed[0]}, {{fed, tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7})}});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message(), Contains("bad_reshape"));
  CHECK(host_collectives().pending_groups() == 0);
  // The session goes on: a good feed completes the group.
  auto ok = s.run({summed[0], summed[1]}, {{fed, tensor::from_vector<float>({1, 1, 1})}});
  INFO(ok.error().to_string());
  REQUIRE(ok.ok());
  CHECK(ok->at(1).to_vector<float>() == std::vector<float>{2, 3, 4});
}

TEST_CASE("all_reduce refuses an unknown reduction, naming it") {
  graph g;
  auto a = ops::constant(g, 1.f, "a");
  auto r = ops::all_reduce({a, a}, "max", "m");
  CHECK(r.empty());
  REQUIRE_FALSE(g.status().ok());
  CHECK_THAT(g.status().message(), Contains("'max'"));
}

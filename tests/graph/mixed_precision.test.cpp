// The mixed-precision pass (graph/mixed_precision.hpp): which nodes it marks under "bfloat16"
// (float32 contractions and their gradients on devices that honour it, nothing else), the
// policy's spellings and errors, and the placement-log line.
#include "graph/gradients.hpp"
#include "graph/mixed_precision.hpp"
#include "graph/ops.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <set>
#include <string>

using namespace actorflow;
using Catch::Matchers::Contains;

namespace {

const std::string cpu0 = "/job:localhost/replica:0/task:0/device:CPU:0";
const std::string gpu0 = "/job:localhost/replica:0/task:0/device:GPU:0";

bool cpu_honours(const std::string& type) { return type == "CPU"; }

void place_all(graph& g, const std::string& device) {
  for (std::size_t id = 0; id < g.size(); ++id)
    g.at(static_cast<int>(id)).assigned_device = device;
}

std::set<std::string> marked_ops(const graph& g) {
  std::set<std::string> ops;
  for (std::size_t id = 0; id < g.size(); ++id) {
    const auto& n = g.at(static_cast<int>(id));
    if (n.has_attr(mixed_precision_attr)) {
      CHECK(n.attr_or<std::string>(mixed_precision_attr, "") == "bfloat16");
      ops.insert(n.op);
    }
  }
  return ops;
}

/// relu(conv(x, f)) flattened, then matmul with w, summed; and its gradients for f and w.
std::unique_ptr<graph> model(dtype t) {
  auto made = std::make_unique<graph>();
  auto& g = *made;
  auto x = ops::placeholder(g, t, {2, 6, 6, 4}, "x");
  auto f = ops::placeholder(g, t, {3, 3, 4, 8}, "f");
  auto w = ops::placeholder(g, t, {288, 5}, "w");
  auto conv = ops::relu(ops::conv2d(x, f, {1, 1}, "SAME", "conv"), "conv_relu");
  auto flat = ops::reshape(conv, {2, 288}, "flat");
  auto loss = ops::reduce_sum(ops::matmul(flat, w, false, false, "dense"), {}, false, "loss");
  gradients(loss, {f, w});
  REQUIRE(g.status().ok());
  return made;
}

} // namespace

TEST_CASE("bfloat16 marks the float32 contractions and their gradients on the CPU, and only "
          "them",
          "[mixed_precision]") {
  auto made = model(dtype::float32);
  auto& g = *made;
  place_all(g, cpu0);
  auto records = apply_mixed_precision(g, "bfloat16", cpu_honours);
  CHECK(marked_ops(g) == std::set<std::string>{"Conv2D", "Conv2DBackpropInput",
                                               "Conv2DBackpropFilter", "MatMul"});
  // dense, and its two gradient MatMuls (the gradient of x is pruned: x is no variable).
  REQUIRE(records.size() >= 4);
  for (auto& r : records) {
    CHECK(r.policy == "bfloat16");
    CHECK(r.device == cpu0);
    auto line = mixed_precision_line(r);
    CHECK(is_mixed_precision_line(line));
    CHECK_THAT(line, Contains(r.name) && Contains("(" + r.op + ")") && Contains(cpu0));
    // No "name: " prefix: readers of "name: device" placement lines pass over it.
    CHECK(line.find(": ") == std::string::npos);
  }
  CHECK(mixed_precision_line({"dense", "MatMul", "bfloat16", cpu0}) ==
        "mixed_precision dense (MatMul) = bfloat16 on " + cpu0);
}

TEST_CASE("the mixed-precision pass leaves float64, devices that do not honour it, and the "
          "float32 policy alone",
          "[mixed_precision]") {
  auto doubles = model(dtype::float64);
  place_all(*doubles, cpu0);
  CHECK(apply_mixed_precision(*doubles, "bfloat16", cpu_honours).empty());
  auto on_gpu = model(dtype::float32);
  place_all(*on_gpu, gpu0);
  CHECK(apply_mixed_precision(*on_gpu, "bfloat16", cpu_honours).empty());
  auto plain = model(dtype::float32);
  place_all(*plain, cpu0);
  CHECK(apply_mixed_precision(*plain, "", cpu_honours).empty());
  CHECK(marked_ops(*doubles).empty());
  CHECK(marked_ops(*on_gpu).empty());
  CHECK(marked_ops(*plain).empty());
}

TEST_CASE("the mixed-precision policy comes from the session, else the environment, and a bad "
          "one is named",
          "[mixed_precision]") {
  ::unsetenv("ACTORFLOW_MIXED_PRECISION");
  CHECK(*mixed_precision_policy("") == "");
  CHECK(*mixed_precision_policy("float32") == "");
  CHECK(*mixed_precision_policy("bfloat16") == "bfloat16");
  CHECK(*mixed_precision_policy("mixed_bfloat16") == "bfloat16");
  auto bad = mixed_precision_policy("float16");
  REQUIRE_FALSE(static_cast<bool>(bad));
  CHECK_THAT(bad.error().message(),
             Contains("session_options::mixed_precision") && Contains("'float16'"));
  ::setenv("ACTORFLOW_MIXED_PRECISION", "bfloat16", 1);
  CHECK(*mixed_precision_policy("") == "bfloat16");
  CHECK(*mixed_precision_policy("float32") == ""); // the session's own choice wins
  ::setenv("ACTORFLOW_MIXED_PRECISION", "bf16", 1);
  auto bad_env = mixed_precision_policy("");
  REQUIRE_FALSE(static_cast<bool>(bad_env));
  CHECK_THAT(bad_env.error().message(), Contains("ACTORFLOW_MIXED_PRECISION") && Contains("'bf16'"));
  ::unsetenv("ACTORFLOW_MIXED_PRECISION");
}

// The fusion pass (graph/fusion.hpp): what fuses into _FusedMatMul / _FusedConv2D, what must
// not, the fused node's name and attrs, and how the placement log and the picture show it.
#include "graph/fusion.hpp"
#include "graph/gradients.hpp"
#include "graph/graph_dot.hpp"
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

/// Kernels for the fused ops on the CPU only, as the registry has them.
bool cpu_only(const std::string& op, const std::string& type, dtype) {
  return type == "CPU" || op.rfind("_Fused", 0) != 0;
}

void place_all(graph& g, const std::string& device) {
  for (std::size_t id = 0; id < g.size(); ++id)
    g.at(static_cast<int>(id)).assigned_device = device;
}

/// x [-1, 4] * w [4, 3] (transposed as asked) + b [3], with a Relu when asked.
struct dense {
  std::shared_ptr<graph> g = std::make_shared<graph>();
  output x, w, b, mm, add, y;
  explicit dense(bool relu, bool transpose_b = false, dtype t = dtype::float32) {
    x = ops::placeholder(*g, t, {-1, 4}, "x");
    w = ops::placeholder(*g, t, transpose_b ? tensor_shape{3, 4} : tensor_shape{4, 3}, "w");
    b = ops::placeholder(*g, t, {3}, "b");
    mm = ops::matmul(x, w, false, transpose_b, "mm");
    add = ops::add(mm, b, "add");
    y = relu ? ops::relu(add, "relu") : add;
  }
};

fusion_result fuse(const std::shared_ptr<graph>& g, const std::set<std::string>& keep = {}) {
  REQUIRE(g->status().ok());
  auto r = fuse_partition(g, keep, cpu_only);
  REQUIRE(static_cast<bool>(r));
  return std::move(*r);
}

const node& named(const graph& g, const std::string& name) {
  auto id = g.find(name);
  REQUIRE(id >= 0);
  return g.at(id);
}

} // namespace

TEST_CASE("MatMul plus a bias Add plus Relu on the CPU become one _FusedMatMul named after the Relu") {
  dense d{true, true};
  place_all(*d.g, cpu0);
  auto r = fuse(d.g);
  REQUIRE(r.fusions.size() == 1);
  auto& g = *r.partition;
  CHECK(g.find("mm") < 0);
  CHECK(g.find("add") < 0);
  auto& fused = named(g, "relu");
  CHECK(fused.op == "_FusedMatMul");
  CHECK(fused.attr_or<std::string>("fused_ops", "") == "BiasAdd,Relu");
  CHECK(fused.attr_or<std::string>("fused_nodes", "") == "mm,add,relu");
  CHECK(fused.attr_or<bool>("transpose_b", false));
  CHECK_FALSE(fused.attr_or<bool>("transpose_a", true));
  CHECK(fused.assigned_device == cpu0);
  REQUIRE(fused.inputs.size() == 3);
  CHECK(g.at(fused.inputs[0].node_id).name == "x");
  CHECK(g.at(fused.inputs[1].node_id).name == "w");
  CHECK(g.at(fused.inputs[2].node_id).name == "b");
  CHECK(fused.output_shapes.at(0) == tensor_shape{-1, 3});
  CHECK(r.fusions[0].op == "_FusedMatMul");
  CHECK(r.fusions[0].nodes == std::vector<std::string>{"mm", "add", "relu"});
}

TEST_CASE("MatMul plus a bias Add without Relu fuses as BiasAdd, the bias on either side") {
  for (bool bias_first : {false, true}) {
    auto g = std::make_shared<graph>();
    auto x = ops::placeholder(*g, dtype::float64, {2, 4}, "x");
    auto w = ops::placeholder(*g, dtype::float64, {4, 3}, "w");
    auto b = ops::placeholder(*g, dtype::float64, {3}, "b");
    auto mm = ops::matmul(x, w);
    bias_first ? ops::add(b, mm, "logits") : ops::add(mm, b, "logits");
    place_all(*g, cpu0);
    auto r = fuse(g);
    REQUIRE(r.fusions.size() == 1);
    auto& fused = named(*r.partition, "logits");
    CHECK(fused.op == "_FusedMatMul");
    CHECK(fused.attr_or<std::string>("fused_ops", "") == "BiasAdd");
    CHECK(fused.kernel_type == dtype::float64);
    CHECK(r.partition->at(fused.inputs[2].node_id).name == "b");
  }
}

TEST_CASE("Conv2D plus a bias Add plus Relu become one _FusedConv2D keeping strides and padding") {
  auto g = std::make_shared<graph>();
  auto x = ops::placeholder(*g, dtype::float32, {-1, 28, 28, 1}, "x");
  auto f = ops::placeholder(*g, dtype::float32, {5, 5, 1, 16}, "filter");
  auto b = ops::placeholder(*g, dtype::float32, {16}, "b");
  ops::relu(ops::add(ops::conv2d(x, f, {2, 2}, "SAME", "conv"), b, "add"), "relu");
  place_all(*g, cpu0);
  auto r = fuse(g);
  REQUIRE(r.fusions.size() == 1);
  auto& fused = named(*r.partition, "relu");
  CHECK(fused.op == "_FusedConv2D");
  CHECK(fused.attr_or<std::string>("fused_ops", "") == "BiasAdd,Relu");
  CHECK(fused.attr_or<std::string>("padding", "") == "SAME");
  CHECK(fused.attr_or<std::vector<std::int64_t>>("strides", {}) ==
        std::vector<std::int64_t>{1, 2, 2, 1});
  CHECK(fused.output_shapes.at(0) == tensor_shape{-1, 14, 14, 16});
}

TEST_CASE("nothing fuses when the MatMul's output has another consumer or is fetched or fed") {
  {
    dense d{true};
    ops::square(d.mm, "other");
    place_all(*d.g, cpu0);
    CHECK(fuse(d.g).fusions.empty());
  }
  for (auto kept : {"mm"}) {
    dense d{true};
    place_all(*d.g, cpu0);
    auto r = fuse(d.g, {kept});
    CHECK(r.fusions.empty());
    CHECK(r.partition == d.g);
  }
  {
    // A control edge from the MatMul is a consumer too.
    dense d{true};
    ops::square(d.x, "after");
    d.g->at(d.g->find("after")).control_inputs.push_back(d.mm.node_id);
    place_all(*d.g, cpu0);
    CHECK(fuse(d.g).fusions.empty());
  }
}

TEST_CASE("an Add under a Relu that is fetched or read elsewhere fuses without the Relu") {
  for (bool fetched : {false, true}) {
    dense d{true};
    if (!fetched)
      ops::square(d.add, "other");
    place_all(*d.g, cpu0);
    auto r = fuse(d.g, fetched ? std::set<std::string>{"add"} : std::set<std::string>{});
    REQUIRE(r.fusions.size() == 1);
    auto& g = *r.partition;
    auto& fused = named(g, "add");
    CHECK(fused.op == "_FusedMatMul");
    CHECK(fused.attr_or<std::string>("fused_ops", "") == "BiasAdd");
    auto& relu = named(g, "relu");
    CHECK(relu.op == "Relu");
    CHECK(g.at(relu.inputs[0].node_id).name == "add");
  }
}

TEST_CASE("nothing fuses on a device without the fused kernel, across devices, or for a non-vector bias") {
  {
    dense d{true};
    place_all(*d.g, gpu0);
    CHECK(fuse(d.g).fusions.empty());
  }
  {
    dense d{true};
    place_all(*d.g, cpu0);
    d.g->at(d.mm.node_id).assigned_device = "/job:localhost/replica:0/task:0/device:CPU:1";
    CHECK(fuse(d.g).fusions.empty());
  }
  {
    auto g = std::make_shared<graph>();
    auto x = ops::placeholder(*g, dtype::float32, {2, 4}, "x");
    auto w = ops::placeholder(*g, dtype::float32, {4, 3}, "w");
    auto m = ops::placeholder(*g, dtype::float32, {2, 3}, "m");
    ops::relu(ops::add(ops::matmul(x, w), m, "add"), "relu");
    place_all(*g, cpu0);
    CHECK(fuse(g).fusions.empty());
  }
}

TEST_CASE("gradients that read only the MatMul's shape are rewired to the fused node") {
  dense d{true};
  auto loss = ops::reduce_sum(d.y);
  auto grads = gradients({loss}, {d.w, d.b});
  REQUIRE(d.g->status().ok());
  // The bias Add's gradient sums dy down to the MatMul's run-time shape (the batch is -1).
  auto consumers = d.g->consumers()[static_cast<std::size_t>(d.mm.node_id)];
  REQUIRE(consumers.size() == 2);
  place_all(*d.g, cpu0);
  auto r = fuse(d.g, {grads[0].name(), grads[1].name(), loss.name()});
  REQUIRE(r.fusions.size() == 1);
  auto& g = *r.partition;
  int shape_readers = 0;
  for (std::size_t id = 0; id < g.size(); ++id) {
    auto& n = g.at(static_cast<int>(id));
    if (n.op == "SumToShapeOf" && g.at(n.inputs[1].node_id).name == "relu")
      ++shape_readers;
  }
  CHECK(shape_readers == 1);
  CHECK(named(g, "relu").op == "_FusedMatMul");
}

TEST_CASE("a fusion's placement-log line reads back and the picture shows the fused chain") {
  dense d{true};
  place_all(*d.g, cpu0);
  auto r = fuse(d.g);
  REQUIRE(r.fusions.size() == 1);
  auto line = fusion_line(r.fusions[0]);
  CHECK(line == "fused relu = _FusedMatMul(mm, add, relu) fused_ops=[BiasAdd,Relu] on " + cpu0);
  // No "name: device" prefix for readers of placement lines to take for a placement.
  CHECK(line.find(": ") == std::string::npos);
  auto back = parse_fusion_line(line);
  REQUIRE(back.has_value());
  CHECK(back->name == "relu");
  CHECK(back->op == "_FusedMatMul");
  CHECK(back->fused_ops == "BiasAdd,Relu");
  CHECK(back->nodes == r.fusions[0].nodes);
  CHECK(back->device == cpu0);
  CHECK_FALSE(parse_fusion_line("relu: " + cpu0).has_value());

  // The client's graph records it and graph_to_dot draws it.
  note_fusion(*d.g, *back);
  auto dot = graph_to_dot(*d.g);
  CHECK_THAT(dot, Contains("_FusedMatMul [BiasAdd,Relu]"));
  CHECK_THAT(dot, Contains("(fused into relu)"));
  // So does a fused partition's own picture.
  CHECK_THAT(graph_to_dot(*r.partition), Contains("[BiasAdd,Relu]"));
}

TEST_CASE("ACTORFLOW_FUSION=0 turns the pass off as the session option does") {
  ::unsetenv("ACTORFLOW_FUSION");
  CHECK(fusion_enabled(true));
  CHECK_FALSE(fusion_enabled(false));
  ::setenv("ACTORFLOW_FUSION", "0", 1);
  CHECK_FALSE(fusion_enabled(true));
  ::setenv("ACTORFLOW_FUSION", "1", 1);
  CHECK(fusion_enabled(true));
  ::unsetenv("ACTORFLOW_FUSION");
}

namespace {

/// relu(x w + b) w2 with the gradients of w and b: the backward MatMul of the hidden layer's
/// input gradient feeds a ReluGrad whose result b's gradient sums; `db` reads that sum.
struct two_layers {
  dense d{true};
  output w2, out, loss, db;
  std::vector<output> grads;
  std::string relu_grad, bias_sum;
  two_layers() {
    auto& g = *d.g;
    w2 = ops::placeholder(g, dtype::float32, {3, 2}, "w2");
    out = ops::matmul(d.y, w2, false, false, "mm2");
    loss = ops::reduce_sum(out, {}, false, "loss");
    grads = gradients({loss}, {d.w, d.b});
    db = ops::identity(grads[1], "db");
    REQUIRE(g.status().ok());
    for (std::size_t id = 0; id < g.size(); ++id)
      if (g.at(static_cast<int>(id)).op == "ReluGrad")
        relu_grad = g.at(static_cast<int>(id)).name;
    bias_sum = grads[1].name();
    place_all(g, cpu0);
  }
};

} // namespace

TEST_CASE("a backward MatMul, the ReluGrad of its product and the bias gradient below it become one _FusedMatMulReluGrad") {
  two_layers t;
  REQUIRE_FALSE(t.relu_grad.empty());
  auto& before = *t.d.g;
  auto product = before.at(before.at(before.find(t.relu_grad)).inputs[0].node_id).name;
  auto r = fuse(t.d.g, {t.grads[0].name(), t.db.name(), t.loss.name()});
  auto& g = *r.partition;
  auto& fused = named(g, t.relu_grad);
  CHECK(fused.op == "_FusedMatMulReluGrad");
  CHECK(fused.attr_or<std::string>("fused_ops", "") == "ReluGrad,BiasAddGrad");
  CHECK(fused.attr_or<std::string>("fused_nodes", "") ==
        product + "," + t.bias_sum + "," + t.relu_grad);
  // dY w2^T: the product's transposes drive the kernel; the forward Relu's output is input 2.
  CHECK(fused.attr_or<bool>("transpose_b", false));
  REQUIRE(fused.inputs.size() == 3);
  CHECK(g.at(fused.inputs[2].node_id).name == "relu");
  REQUIRE(fused.output_shapes.size() == 2);
  CHECK(fused.output_shapes[1] == tensor_shape{3});
  CHECK(g.find(product) < 0);
  CHECK(g.find(t.bias_sum) < 0);
  // The bias gradient's reader now reads the fused node's second output.
  auto& db = named(g, "db");
  CHECK(db.inputs.at(0).node_id == g.find(t.relu_grad));
  CHECK(db.inputs.at(0).index == 1);
  bool logged = false;
  for (auto& f : r.fusions)
    logged = logged || (f.op == "_FusedMatMulReluGrad" && f.name == t.relu_grad);
  CHECK(logged);
}

TEST_CASE("a fetched bias gradient stays its own node and the backward GEMM fuses with the ReluGrad alone") {
  two_layers t;
  auto r = fuse(t.d.g, {t.grads[0].name(), t.grads[1].name(), t.loss.name()});
  auto& g = *r.partition;
  auto& fused = named(g, t.relu_grad);
  CHECK(fused.op == "_FusedMatMulReluGrad");
  CHECK(fused.attr_or<std::string>("fused_ops", "") == "ReluGrad");
  CHECK(fused.output_shapes.size() == 1);
  auto& sum = named(g, t.bias_sum);
  CHECK(sum.op == "SumToShapeOf");
  CHECK(sum.inputs.at(0).node_id == g.find(t.relu_grad));
  CHECK(sum.inputs.at(0).index == 0);
}

TEST_CASE("nothing of the backward pass fuses on a device without the fused kernel") {
  two_layers t;
  place_all(*t.d.g, gpu0);
  auto r = fuse(t.d.g, {t.grads[0].name(), t.db.name(), t.loss.name()});
  CHECK(r.fusions.empty());
  CHECK(named(*r.partition, t.relu_grad).op == "ReluGrad");
}

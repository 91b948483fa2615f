// Optimizer graphs: TensorFlow 1.x node names, slots that are not trainable and sit with their
// variable, update ops colocated with their variable, Adam's step powers after every update,
// and shape inference of the update ops.
#include "graph/graph.hpp"
#include "graph/op_registry.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

using namespace actorflow;
using Catch::Matchers::Contains;

namespace {

const node& node_named(const graph& g, const std::string& name) {
  auto id = g.find(name);
  INFO("looking for node '" << name << "'");
  REQUIRE(id >= 0);
  return g.at(id);
}

bool has_control_input(const node& n, int id) {
  return std::find(n.control_inputs.begin(), n.control_inputs.end(), id) != n.control_inputs.end();
}

std::string colocated_with(const node& n) { return n.attr_or<std::string>("colocate_with", ""); }

bool is_variable_named(const std::vector<variable>& vars, const std::string& name) {
  return std::any_of(vars.begin(), vars.end(), [&](const variable& v) { return v.name() == name; });
}

struct two_variables {
  graph g;
  variable w, b;
  output gw, gb;
  two_variables() {
    {
      auto ps = g.device("/job:ps/task:0");
      w = ops::variable(g, ops::zeros(g, {2, 3}), "w");
    }
    {
      auto ps = g.device("/job:ps/task:1");
      b = ops::variable(g, ops::zeros(g, {3}), "b");
    }
    gw = ops::placeholder(g, dtype::float32, {2, 3}, "gw");
    gb = ops::placeholder(g, dtype::float32, {3}, "gb");
  }
};

} // namespace

TEST_CASE("gradient descent names its updates after the variables and groups them") {
  two_variables m;
  auto& g = m.g;
  gradient_descent_optimizer sgd{0.1};
  output train;
  {
    auto worker = g.device("/job:worker/task:0");
    train = sgd.apply_gradients({{m.gw, m.w}, {m.gb, m.b}});
  }
  INFO(g.status().message());
  REQUIRE(g.status().ok());
  CHECK(train.name() == "GradientDescent");
  auto& update_w = node_named(g, "GradientDescent/update_w/ApplyGradientDescent");
  auto& update_b = node_named(g, "GradientDescent/update_b/ApplyGradientDescent");
  CHECK(update_w.attr_or<std::string>("variable", "") == "w");
  CHECK(colocated_with(update_w) == "w");
  CHECK(colocated_with(update_b) == "b");
  // Colocation beats the enclosing device scope.
  CHECK(update_w.requested_device == "/job:ps/task:0");
  CHECK(update_b.requested_device == "/job:ps/task:1");
  auto& learning_rate = node_named(g, "GradientDescent/update_w/learning_rate");
  CHECK(learning_rate.requested_device == "/job:ps/task:0");
  CHECK(update_w.inputs.at(0).node_id == m.w.ref.node_id);
  CHECK(update_w.output_shapes.at(0) == tensor_shape{2, 3});
  auto& group = g.at(train.node_id);
  CHECK(group.op == "NoOp");
  CHECK(has_control_input(group, update_w.id));
  CHECK(has_control_input(group, update_b.id));
  // A second optimizer gets its own scope.
  auto again = gradient_descent_optimizer{0.2}.apply_gradients({{m.gw, m.w}});
  CHECK(again.name() == "GradientDescent_1");
  CHECK(g.find("GradientDescent_1/update_w/ApplyGradientDescent") >= 0);
  auto named = gradient_descent_optimizer{0.2}.apply_gradients({{m.gw, m.w}}, "train");
  CHECK(named.name() == "train");
  CHECK(g.find("train/update_w/ApplyGradientDescent") >= 0);
}

TEST_CASE("momentum slots are zero, not trainable and colocated with their variable") {
  two_variables m;
  auto& g = m.g;
  momentum_optimizer opt{0.1, 0.9, true};
  output train;
  {
    auto worker = g.device("/job:worker/task:0");
    train = opt.apply_gradients({{m.gw, m.w}, {m.gb, m.b}});
  }
  INFO(g.status().message());
  REQUIRE(g.status().ok());
  CHECK(train.name() == "Momentum");
  auto& slot = node_named(g, "w/Momentum");
  CHECK(slot.op == "VariableV2");
  CHECK(slot.output_shapes.at(0) == tensor_shape{2, 3});
  CHECK(slot.requested_device == "/job:ps/task:0");
  CHECK(colocated_with(slot) == "w");
  CHECK(node_named(g, "w/Momentum/Assign").requested_device == "/job:ps/task:0");
  CHECK(node_named(g, "w/Momentum/read").requested_device == "/job:ps/task:0");
  CHECK(node_named(g, "b/Momentum").requested_device == "/job:ps/task:1");
  CHECK(is_variable_named(g.global_variables(), "w/Momentum"));
  CHECK_FALSE(is_variable_named(g.trainable_variables(), "w/Momentum"));
  CHECK(g.trainable_variables().size() == 2);
  auto& update = node_named(g, "Momentum/update_w/ApplyMomentum");
  CHECK(update.attr_or<std::string>("slots", "") == "w/Momentum");
  CHECK(update.attr_or<bool>("use_nesterov", false));
  CHECK(update.inputs.at(1).node_id == slot.id);
  CHECK(colocated_with(update) == "w");
  CHECK(update.requested_device == "/job:ps/task:0");
}

TEST_CASE("adam's slots, step powers and their updates follow TensorFlow's layout") {
  two_variables m;
  auto& g = m.g;
  adam_optimizer adam{0.001};
  auto train = adam.apply_gradients({{m.gw, m.w}, {m.gb, m.b}});
  INFO(g.status().message());
  REQUIRE(g.status().ok());
  CHECK(train.name() == "Adam");
  for (auto name : {"w/Adam", "w/Adam_1", "b/Adam", "b/Adam_1", "beta1_power", "beta2_power"}) {
    INFO(name);
    CHECK(is_variable_named(g.global_variables(), name));
    CHECK_FALSE(is_variable_named(g.trainable_variables(), name));
  }
  // The powers sit with the variable that sorts first by name: "b".
  CHECK(node_named(g, "beta1_power").requested_device == "/job:ps/task:1");
  CHECK(colocated_with(node_named(g, "beta1_power")) == "b");
  auto& update_w = node_named(g, "Adam/update_w/ApplyAdam");
  auto& update_b = node_named(g, "Adam/update_b/ApplyAdam");
  CHECK(update_w.attr_or<std::string>("slots", "") == "w/Adam,w/Adam_1");
  CHECK(update_w.requested_device == "/job:ps/task:0");
  auto& assign1 = node_named(g, "Adam/Assign");
  auto& assign2 = node_named(g, "Adam/Assign_1");
  CHECK(assign1.attr_or<std::string>("variable", "") == "beta1_power");
  CHECK(assign2.attr_or<std::string>("variable", "") == "beta2_power");
  for (auto* n : {&assign1, &assign2, &node_named(g, "Adam/mul"), &node_named(g, "Adam/mul_1")}) {
    INFO(n->name);
    CHECK(has_control_input(*n, update_w.id));
    CHECK(has_control_input(*n, update_b.id));
    CHECK(n->requested_device == "/job:ps/task:1");
  }
  // The new power reads the variable itself (its value when the multiply runs).
  CHECK(node_named(g, "Adam/mul").inputs.at(0).node_id == g.find("beta1_power"));
  auto& group = g.at(train.node_id);
  for (auto id : {update_w.id, update_b.id, assign1.id, assign2.id})
    CHECK(has_control_input(group, id));
}

TEST_CASE("update ops check dtypes and shapes when the graph is built") {
  SECTION("a gradient of another shape") {
    graph g;
    auto w = ops::variable(g, ops::zeros(g, {3}), "w");
    auto grad = ops::placeholder(g, dtype::float32, {4}, "grad");
    gradient_descent_optimizer{0.1}.apply_gradients({{grad, w}});
    REQUIRE_FALSE(g.status().ok());
    CHECK_THAT(g.status().message(), Contains("delta shape [4] differs from variable shape [3]"));
  }
  SECTION("a gradient of another dtype") {
    graph g;
    auto w = ops::variable(g, ops::zeros(g, {3}), "w");
    auto grad = ops::placeholder(g, dtype::float64, {3}, "grad");
    momentum_optimizer{0.1, 0.9}.apply_gradients({{grad, w}});
    REQUIRE_FALSE(g.status().ok());
    CHECK_THAT(g.status().message(), Contains("grad is float64"));
  }
  SECTION("a partially known gradient shape is accepted") {
    graph g;
    auto w = ops::variable(g, ops::zeros(g, {2, 3}), "w");
    auto grad = ops::placeholder(g, dtype::float32, {-1, 3}, "grad");
    adam_optimizer{}.apply_gradients({{grad, w}});
    CHECK(g.status().ok());
  }
  SECTION("an integer variable") {
    graph g;
    auto w = ops::variable(g, ops::constant(g, std::int32_t{1}), "w");
    auto grad = ops::placeholder(g, dtype::int32, {}, "grad");
    gradient_descent_optimizer{0.1}.apply_gradients({{grad, w}});
    REQUIRE_FALSE(g.status().ok());
    CHECK_THAT(g.status().message(), Contains("float32 or float64"));
  }
}

TEST_CASE("update ops declare their slot inputs as variable refs") {
  auto& registry = op_registry::global();
  auto* adam = registry.find("ApplyAdam");
  REQUIRE(adam != nullptr);
  CHECK(adam->stateful);
  CHECK(adam->is_variable_ref_input(0));
  CHECK(adam->is_variable_ref_input(1));
  CHECK(adam->is_variable_ref_input(2));
  CHECK_FALSE(adam->is_variable_ref_input(3));
  auto* momentum = registry.find("ApplyMomentum");
  REQUIRE(momentum != nullptr);
  CHECK(momentum->is_variable_ref_input(1));
  CHECK_FALSE(momentum->is_variable_ref_input(2));
  auto* sgd = registry.find("ApplyGradientDescent");
  REQUIRE(sgd != nullptr);
  CHECK(sgd->is_variable_ref_input(0));
  CHECK_FALSE(sgd->is_variable_ref_input(1));
  auto* assign = registry.find("Assign");
  REQUIRE(assign != nullptr);
  CHECK(assign->is_variable_ref_input(0));
  CHECK_FALSE(assign->is_variable_ref_input(1));
}

TEST_CASE("variables without a gradient are left out of the update") {
  two_variables m;
  auto& g = m.g;
  auto train = gradient_descent_optimizer{0.1}.apply_gradients({{m.gw, m.w}, {output{}, m.b}});
  REQUIRE(g.status().ok());
  CHECK(g.find("GradientDescent/update_w/ApplyGradientDescent") >= 0);
  CHECK(g.find("GradientDescent/update_b/ApplyGradientDescent") < 0);
  CHECK(g.at(train.node_id).control_inputs.size() == 1);
  CHECK_FALSE(adam_optimizer{}.apply_gradients({{output{}, m.b}}).valid());
}

TEST_CASE("minimize records an error when the loss depends on no variable") {
  graph g;
  ops::variable(g, ops::zeros(g, {3}), "w");
  auto loss = ops::reduce_sum(ops::constant(g, 2.f) * 3.0);
  auto train = gradient_descent_optimizer{0.1}.minimize(loss);
  CHECK_FALSE(train.valid());
  REQUIRE_FALSE(g.status().ok());
  CHECK_THAT(g.status().message(), Contains("no gradients"));
}

namespace {

/// SPEC's in-graph example (examples/in_graph_linreg.cpp): W on /job:canshu/task:0, b on
/// /job:canshu/task:1, the model and loss on /job:gongzuo/task:0.
struct in_graph_linreg {
  graph g;
  variable w, b;
  output loss;
  in_graph_linreg() {
    {
      auto d = g.device("/job:canshu/task:0");
      w = ops::variable(g, ops::zeros(g, {1}), "Weights");
    }
    {
      auto d = g.device("/job:canshu/task:1");
      b = ops::variable(g, ops::zeros(g, {1}), "biases");
    }
    auto d = g.device("/job:gongzuo/task:0");
    auto x = ops::constant(g, std::vector<float>{0.5f, 0.25f, 1.f}, {3}, "x_data");
    auto y = ops::constant(g, std::vector<float>{0.35f, 0.325f, 0.4f}, {3}, "y_data");
    loss = ops::reduce_mean(ops::square(w * x + b - y), {}, false, "loss");
  }

  /// The requested device of every node under "gradients/"; requires some.
  std::vector<std::pair<std::string, std::string>> gradient_devices() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (std::size_t i = 0; i < g.size(); ++i) {
      auto& n = g.at(static_cast<int>(i));
      if (n.name.rfind("gradients/", 0) == 0)
        out.emplace_back(n.name, n.requested_device);
    }
    REQUIRE_FALSE(out.empty());
    return out;
  }
};

} // namespace

TEST_CASE("minimize inside a device scope computes the gradients there and updates beside the "
          "variables") {
  // TensorFlow 1.x's default: /job:gongzuo/task:1, where the optimizer is built, does the
  // gradient work; the updates still run where W and b live.
  in_graph_linreg m;
  auto& g = m.g;
  output train;
  {
    auto d = g.device("/job:gongzuo/task:1");
    train = gradient_descent_optimizer{0.5}.minimize(m.loss);
  }
  INFO(g.status().to_string());
  REQUIRE(g.status().ok());
  for (auto& [name, device] : m.gradient_devices()) {
    INFO(name);
    CHECK(device == "/job:gongzuo/task:1");
  }
  auto& apply_w = node_named(g, "GradientDescent/update_Weights/ApplyGradientDescent");
  auto& apply_b = node_named(g, "GradientDescent/update_biases/ApplyGradientDescent");
  CHECK(apply_w.requested_device == "/job:canshu/task:0");
  CHECK(colocated_with(apply_w) == "Weights");
  CHECK(apply_b.requested_device == "/job:canshu/task:1");
  CHECK(colocated_with(apply_b) == "biases");
  CHECK(node_named(g, "GradientDescent/update_Weights/learning_rate").requested_device ==
        "/job:canshu/task:0");
  // Each update's gradient input comes from the optimizer's task.
  CHECK(g.at(apply_w.inputs[2].node_id).requested_device == "/job:gongzuo/task:1");
  CHECK(g.at(apply_b.inputs[2].node_id).requested_device == "/job:gongzuo/task:1");
  CHECK(train.producer().requested_device == "/job:gongzuo/task:1");
}

TEST_CASE("minimize and compute_gradients with colocate_gradients_with_ops keep the gradients "
          "beside the forward ops") {
  gradient_options beside_ops;
  beside_ops.colocate_gradients_with_ops = true;
  SECTION("minimize") {
    in_graph_linreg m;
    {
      auto d = m.g.device("/job:gongzuo/task:1");
      gradient_descent_optimizer{0.5}.minimize(m.loss, {}, beside_ops);
    }
    INFO(m.g.status().to_string());
    REQUIRE(m.g.status().ok());
    // Every forward op between the loss and the variables is on /job:gongzuo/task:0.
    for (auto& [name, device] : m.gradient_devices()) {
      INFO(name);
      CHECK(device == "/job:gongzuo/task:0");
    }
    CHECK(node_named(m.g, "GradientDescent/update_Weights/ApplyGradientDescent").requested_device ==
          "/job:canshu/task:0");
  }
  SECTION("compute_gradients") {
    in_graph_linreg m;
    auto pairs = adam_optimizer{}.compute_gradients(m.loss, {m.w, m.b}, beside_ops);
    REQUIRE(m.g.status().ok());
    REQUIRE(pairs.size() == 2);
    for (auto& [name, device] : m.gradient_devices()) {
      INFO(name);
      CHECK(device == "/job:gongzuo/task:0");
    }
  }
}

TEST_CASE("tower gradients computed inside each tower's device scope stay on that tower") {
  // apps/train/models.cpp's data-parallel towers: variables on the ps, one tower per worker,
  // compute_gradients called inside the tower's scope, averages colocated with the variables.
  graph g;
  variable w;
  {
    auto ps = g.device("/job:ps/task:0");
    w = ops::variable(g, ops::zeros(g, {3, 2}), "w");
  }
  gradient_descent_optimizer sgd{0.1};
  std::vector<std::vector<gradient_and_variable>> towers;
  for (int task = 0; task < 2; ++task) {
    auto on_worker = g.device("/job:worker/task:" + std::to_string(task));
    auto scope = g.name_scope("tower_" + std::to_string(task));
    auto x = ops::placeholder(g, dtype::float32, {-1, 3}, "x");
    auto loss = ops::reduce_mean(ops::square(ops::matmul(x, w)), {}, false, "loss");
    towers.push_back(sgd.compute_gradients(loss, {w}));
  }
  output averaged;
  {
    auto beside = g.colocate_with(w.ref);
    averaged = (towers[0][0].first + towers[1][0].first) * 0.5;
  }
  auto train = sgd.apply_gradients({{averaged, w}});
  INFO(g.status().to_string());
  REQUIRE(g.status().ok());
  REQUIRE(train.valid());
  for (int task = 0; task < 2; ++task) {
    auto prefix = "tower_" + std::to_string(task) + "/gradients/";
    int count = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      auto& n = g.at(static_cast<int>(i));
      if (n.name.rfind(prefix, 0) != 0)
        continue;
      ++count;
      INFO(n.name);
      CHECK(n.requested_device == "/job:worker/task:" + std::to_string(task));
    }
    CHECK(count > 0);
    CHECK(towers[static_cast<std::size_t>(task)][0].first.producer().requested_device ==
          "/job:worker/task:" + std::to_string(task));
  }
  CHECK(averaged.producer().requested_device == "/job:ps/task:0");
}

// The gradient graph walk without running anything: names, devices, stops, errors, sums of
// several consumers and the static-shape shortcuts. Numeric checks of every gradient run through
// sessions in tests/actors/gradient_check.test.cpp.
#include "graph/gradients.hpp"
#include "graph/math_ops.hpp"
#include "graph/op_registry.hpp"
#include "graph/ops.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

using namespace actorflow;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

/// Names of every node whose name starts with `prefix`.
std::vector<std::string> nodes_under(const graph& g, const std::string& prefix) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < g.size(); ++i) {
    auto& n = g.at(static_cast<int>(i));
    if (n.name.rfind(prefix, 0) == 0)
      names.push_back(n.name);
  }
  return names;
}

int count_ops(const graph& g, const std::string& op, const std::string& prefix = "gradients/") {
  int count = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    auto& n = g.at(static_cast<int>(i));
    if (n.op == op && n.name.rfind(prefix, 0) == 0)
      ++count;
  }
  return count;
}

/// Registers, once, an op with one input and no gradient function.
void register_no_gradient_op() {
  static bool done = [] {
    op_registry::global().add(op_def{"NoGradientOp", 1, false, false, [](shape_context& c) {
                                       c.set_output(0, c.input_types[0], c.input_shapes[0]);
                                       return status{};
                                     }});
    return true;
  }();
  (void)done;
}

} // namespace

TEST_CASE("gradient nodes live under the name scope gradients and are named after the forward op",
          "[graph][gradients]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {2, 3}, "x");
  auto w = ops::placeholder(g, dtype::float32, {2, 3}, "w");
  auto y = ops::reduce_sum(x * w);
  auto grads = gradients(y, {x, w});
  INFO(g.status().to_string());
  REQUIRE(g.status().ok());
  REQUIRE(grads.size() == 2);
  REQUIRE(grads[0].valid());
  REQUIRE(grads[1].valid());
  CHECK_THAT(grads[0].name(), StartsWith("gradients/mul_grad/"));
  CHECK_THAT(grads[1].name(), StartsWith("gradients/mul_grad/"));
  CHECK(g.find("gradients/mul_grad/Mul") >= 0);
  CHECK(g.find("gradients/Sum_grad/BroadcastToShapeOf") >= 0);
  CHECK(grads[0].shape() == (tensor_shape{2, 3}));
  CHECK(grads[0].type() == dtype::float32);
  // Every node the call added is inside the scope.
  for (std::size_t i = static_cast<std::size_t>(y.node_id) + 1; i < g.size(); ++i)
    CHECK_THAT(g.at(static_cast<int>(i)).name, StartsWith("gradients/"));

  // A second call opens "gradients_1", like TensorFlow.
  auto again = gradients(y, {x});
  REQUIRE(again[0].valid());
  CHECK_THAT(again[0].name(), StartsWith("gradients_1/"));
}

TEST_CASE("an op on the path without a registered gradient is an error naming op and node",
          "[graph][gradients]") {
  register_no_gradient_op();
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {3}, "x");
  node_spec spec;
  spec.op = "NoGradientOp";
  spec.name = "opaque";
  spec.inputs = {x};
  auto opaque = g.output_of(g.add_node(spec));
  REQUIRE(g.status().ok());
  auto grads = gradients(ops::reduce_sum(opaque * 2.0), {x});
  REQUIRE_FALSE(g.status().ok());
  CHECK(g.status().code() == errc::unimplemented);
  CHECK_THAT(g.status().message(),
             Contains("no gradient registered for op 'NoGradientOp' (node 'opaque')"));
  REQUIRE(grads.size() == 1);
  CHECK_FALSE(grads[0].valid());
}

TEST_CASE("ArgMax, Equal, StopGradient and casts to integers stop gradients without an error",
          "[graph][gradients]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {2, 3}, "x");
  auto am = ops::argmax(x, 1);
  auto direct = gradients(am, {x});
  CHECK(g.status().ok());
  CHECK_FALSE(direct[0].valid());

  auto through_cast = ops::reduce_sum(ops::cast(ops::argmax(x, 1), dtype::float32));
  auto eq = ops::reduce_sum(ops::cast(ops::equal(x, x), dtype::float32));
  auto stopped = gradients({through_cast, eq}, {x});
  CHECK(g.status().ok());
  CHECK_FALSE(stopped[0].valid());

  // StopGradient ends the path where it stands, as in TF.
  auto blocked = gradients(ops::reduce_sum(ops::stop_gradient(x) * x), {x});
  INFO(g.status().to_string());
  CHECK(g.status().ok());
  CHECK(blocked[0].valid()); // through the right factor only
  auto only_stopped = gradients(ops::reduce_sum(ops::stop_gradient(x)), {x});
  CHECK(g.status().ok());
  CHECK_FALSE(only_stopped[0].valid());

  // Another path still brings a gradient.
  auto mixed = gradients(through_cast + ops::reduce_sum(x * 2.0), {x});
  INFO(g.status().to_string());
  CHECK(g.status().ok());
  CHECK(mixed[0].valid());
}

TEST_CASE("an x the ys do not depend on gets an invalid gradient", "[graph][gradients]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {2}, "x");
  auto unrelated = ops::placeholder(g, dtype::float32, {2}, "unrelated");
  auto grads = gradients(ops::reduce_sum(ops::square(x)), {x, unrelated});
  REQUIRE(g.status().ok());
  CHECK(grads[0].valid());
  CHECK_FALSE(grads[1].valid());
}

TEST_CASE("gradients reaching one output from several consumers are summed with AddN",
          "[graph][gradients]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {2, 3}, "x");
  auto y = ops::reduce_sum(ops::exp(x) + ops::square(x) + ops::neg(x));
  auto grads = gradients(y, {x});
  REQUIRE(g.status().ok());
  REQUIRE(grads[0].valid());
  CHECK(grads[0].producer().op == "AddN");
  CHECK(grads[0].producer().inputs.size() == 3);
  CHECK(grads[0].shape() == (tensor_shape{2, 3}));
}

TEST_CASE("broadcasting is undone only where static shapes do not prove it unnecessary",
          "[graph][gradients]") {
  graph g;
  auto a = ops::placeholder(g, dtype::float32, {2, 3}, "a");
  auto b = ops::placeholder(g, dtype::float32, {2, 3}, "b");
  auto same = gradients(ops::reduce_sum(a + b), {a, b});
  REQUIRE(g.status().ok());
  CHECK(count_ops(g, "SumToShapeOf") == 0);
  CHECK(same[0].valid());

  auto bias = ops::placeholder(g, dtype::float32, {3}, "bias");
  auto batch = ops::placeholder(g, dtype::float32, {-1, 3}, "batch");
  auto grads = gradients(ops::reduce_sum(batch + bias), {batch, bias});
  REQUIRE(g.status().ok());
  REQUIRE(grads[1].valid());
  CHECK(grads[1].producer().op == "SumToShapeOf");
  CHECK(grads[1].shape() == (tensor_shape{3}));
  // [?,3] against [?,3]-shaped gradient: the batch sizes may still differ at run time.
  CHECK(grads[0].producer().op == "SumToShapeOf");
  CHECK(grads[0].shape() == (tensor_shape{-1, 3}));
}

TEST_CASE("the default seed is ones of y's static shape, or OnesLike when it is partial",
          "[graph][gradients]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {-1, 3}, "x");
  auto y = ops::square(x);
  auto grads = gradients(y, {x});
  REQUIRE(g.status().ok());
  CHECK(count_ops(g, "OnesLike") == 1);
  auto fixed = ops::placeholder(g, dtype::float32, {2, 3}, "fixed");
  gradients(ops::square(fixed), {fixed});
  CHECK(count_ops(g, "Fill", "gradients_1/") == 1);
  CHECK(g.find("gradients_1/ones/Fill") >= 0);

  auto seeded = gradients({ops::square(fixed)}, {fixed}, {ops::ones(g, {2, 3})});
  REQUIRE(seeded[0].valid());
  CHECK(count_ops(g, "Fill", "gradients_2/") == 0);
}

TEST_CASE("the gradient for a variable's ref flows through its read identity and direct uses",
          "[graph][gradients]") {
  graph g;
  auto v = ops::variable(g, ops::ones(g, {3, 2}, dtype::float32), "w");
  auto x = ops::placeholder(g, dtype::float32, {-1, 3}, "x");
  auto through_read = ops::reduce_sum(ops::matmul(x, v));
  auto direct = ops::reduce_sum(ops::identity(v.ref) * 3.0);
  auto grads = gradients(through_read + direct, {v.ref});
  INFO(g.status().to_string());
  REQUIRE(g.status().ok());
  REQUIRE(grads[0].valid());
  CHECK(grads[0].shape() == (tensor_shape{3, 2}));
  // Two consumers of the variable node (read and the identity): summed.
  CHECK(grads[0].producer().op == "AddN");
  // The initializer (Assign) consumes the variable too but is not on the path.
  CHECK(nodes_under(g, "gradients/w/Assign_grad").empty());
}

namespace {

/// w on a ps, h = tanh(x w) on worker 1, loss = mean(h h + h) on worker 2: h feeds three
/// gradients back, so its gradient starts with an AddN.
struct spread_model {
  graph g;
  variable w;
  output h, loss;
  spread_model() {
    {
      auto ps = g.device("/job:ps/task:0/cpu:0");
      w = ops::variable(g, ops::ones(g, {3, 2}, dtype::float32), "w");
    }
    auto x = ops::placeholder(g, dtype::float32, {4, 3}, "x");
    {
      auto worker = g.device("/job:worker/task:1/cpu:0");
      h = ops::tanh(ops::matmul(x, w), "h");
    }
    {
      auto worker = g.device("/job:worker/task:2/cpu:0");
      loss = ops::reduce_mean(h * h + h, {}, false, "loss");
    }
  }

  /// The requested device of every node gradients() added, by name; fails without any.
  std::vector<std::pair<std::string, std::string>> gradient_devices() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (auto& name : nodes_under(g, "gradients/"))
      out.emplace_back(name, g.at(g.find(name)).requested_device);
    REQUIRE_FALSE(out.empty());
    // The sum of h's three incoming gradients is among them.
    CHECK(count_ops(g, "AddN", "gradients/h_grad/") == 1);
    return out;
  }
};

} // namespace

TEST_CASE("without a device scope at the call gradient nodes request no device",
          "[graph][gradients]") {
  // TensorFlow 1.x's default (colocate_gradients_with_ops=False): the forward ops' devices do
  // not matter, only the scopes around the gradients() call.
  spread_model m;
  auto grads = gradients(m.loss, {m.w.ref});
  INFO(m.g.status().to_string());
  REQUIRE(m.g.status().ok());
  REQUIRE(grads[0].valid());
  for (auto& [name, device] : m.gradient_devices()) {
    INFO(name);
    CHECK(device.empty());
  }
}

TEST_CASE("gradient nodes request the device scope active where gradients() is called",
          "[graph][gradients]") {
  spread_model m;
  std::vector<output> grads;
  {
    auto optimizer_task = m.g.device("/job:worker/task:3");
    grads = gradients(m.loss, {m.w.ref});
  }
  INFO(m.g.status().to_string());
  REQUIRE(m.g.status().ok());
  REQUIRE(grads[0].valid());
  // The seed, the AddN and every op's gradient alike.
  CHECK(m.g.find("gradients/ones/Fill") >= 0);
  for (auto& [name, device] : m.gradient_devices()) {
    INFO(name);
    CHECK(device == "/job:worker/task:3");
  }
}

TEST_CASE("a device function active at the gradients() call places the gradient nodes",
          "[graph][gradients]") {
  spread_model m;
  std::vector<std::string> asked;
  {
    auto chooser = m.g.device([&asked](const node& n) {
      asked.push_back(n.name);
      return std::string{"/job:worker/task:4/cpu:0"};
    });
    gradients(m.loss, {m.w.ref});
  }
  REQUIRE(m.g.status().ok());
  auto devices = m.gradient_devices();
  CHECK(asked.size() == devices.size());
  for (auto& [name, device] : devices) {
    INFO(name);
    CHECK(device == "/job:worker/task:4/device:CPU:0");
  }
}

TEST_CASE("with colocate_gradients_with_ops gradient nodes request the device of their op",
          "[graph][gradients]") {
  spread_model m;
  gradient_options beside_ops;
  beside_ops.colocate_gradients_with_ops = true;
  std::vector<output> grads;
  {
    // The op's device wins over the scope at the call for every field the op names.
    auto elsewhere = m.g.device("/job:worker/task:3");
    grads = gradients(m.loss, {m.w.ref}, beside_ops);
  }
  INFO(m.g.status().to_string());
  REQUIRE(m.g.status().ok());
  REQUIRE(grads[0].valid());
  auto& g = m.g;
  auto matmul_grad = nodes_under(g, "gradients/MatMul_grad/");
  auto tanh_grad = nodes_under(g, "gradients/h_grad/");
  auto loss_grad = nodes_under(g, "gradients/loss_grad/");
  REQUIRE_FALSE(matmul_grad.empty());
  REQUIRE_FALSE(tanh_grad.empty());
  REQUIRE_FALSE(loss_grad.empty());
  for (auto& name : matmul_grad)
    CHECK(g.at(g.find(name)).requested_device == "/job:worker/task:1/device:CPU:0");
  // The AddN summing h's gradients sits with h, like h's own gradient.
  CHECK(g.at(g.find("gradients/h_grad/AddN")).requested_device ==
        "/job:worker/task:1/device:CPU:0");
  for (auto& name : tanh_grad)
    CHECK(g.at(g.find(name)).requested_device == "/job:worker/task:1/device:CPU:0");
  for (auto& name : loss_grad)
    CHECK(g.at(g.find(name)).requested_device == "/job:worker/task:2/device:CPU:0");
  // The seed sits with the loss.
  CHECK(g.at(g.find("gradients/ones/Fill")).requested_device == "/job:worker/task:2/device:CPU:0");
  // The single-y overload takes the options too.
  gradients(m.loss, {m.w.ref}, beside_ops);
  auto second_loss_grad = nodes_under(g, "gradients_1/loss_grad/");
  REQUIRE_FALSE(second_loss_grad.empty());
  for (auto& name : second_loss_grad)
    CHECK(g.at(g.find(name)).requested_device == "/job:worker/task:2/device:CPU:0");
}

TEST_CASE("with colocate_gradients_with_ops gradient nodes of a placed op follow its assigned "
          "device", "[graph][gradients]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {2}, "x");
  auto y = ops::reduce_sum(ops::exp(x, "e"));
  g.at(g.find("e")).assigned_device = "/job:localhost/replica:0/task:0/device:CPU:1";
  gradient_options beside_ops;
  beside_ops.colocate_gradients_with_ops = true;
  gradients(y, {x}, beside_ops);
  REQUIRE(g.status().ok());
  auto names = nodes_under(g, "gradients/e_grad/");
  REQUIRE_FALSE(names.empty());
  for (auto& name : names)
    CHECK(g.at(g.find(name)).requested_device == "/job:localhost/replica:0/task:0/device:CPU:1");
  // By default the assigned device does not matter either.
  gradients(y, {x});
  auto defaults = nodes_under(g, "gradients_1/e_grad/");
  REQUIRE_FALSE(defaults.empty());
  for (auto& name : defaults)
    CHECK(g.at(g.find(name)).requested_device.empty());
}

TEST_CASE("every differentiable standard op has a gradient and the stops are registered",
          "[graph][gradients]") {
  auto& r = gradient_registry::global();
  for (auto op : {"Identity", "Neg", "Square", "Sqrt", "Exp", "Log", "Relu", "Sigmoid", "Tanh",
                  "Add", "Sub", "Mul", "Div", "MatMul", "Sum", "Mean", "Max", "Reshape", "Softmax",
                  "SoftmaxCrossEntropyWithLogits", "Cast", "Fill", "Sin", "Cos", "Log1p",
                  "Expm1", "Cumsum"}) {
    INFO(op);
    CHECK(r.find(op) != nullptr);
  }
  for (auto op : {"ArgMax", "ArgMin", "Equal", "RandomUniform", "RandomStandardNormal", "TruncatedNormal",
                  "Placeholder", "Const", "VariableV2", "NoOp", "Assign", "AssignAdd", "AssignSub",
                  "StopGradient", "IsNan", "IsInf", "IsFinite"}) {
    INFO(op);
    CHECK(r.is_not_differentiable(op));
  }
}

TEST_CASE("the helper ops infer shapes from their shape-giving input", "[graph][gradients]") {
  graph g;
  auto grad = ops::placeholder(g, dtype::float64, {-1, 3}, "grad");
  auto x = ops::placeholder(g, dtype::float64, {3}, "x");
  node_spec spec;
  spec.op = "SumToShapeOf";
  spec.inputs = {grad, x};
  auto summed = g.output_of(g.add_node(spec));
  CHECK(summed.shape() == (tensor_shape{3}));
  CHECK(summed.type() == dtype::float64);
  spec.op = "AddN";
  spec.inputs = {grad, ops::placeholder(g, dtype::float64, {4, -1})};
  auto added = g.output_of(g.add_node(spec));
  CHECK(added.shape() == (tensor_shape{4, 3}));
  REQUIRE(g.status().ok());
  spec.inputs = {grad, x};
  g.add_node(spec);
  CHECK_FALSE(g.status().ok());
}

#include "graph/ops.hpp"
#include "graph/math_ops.hpp"

#include <algorithm>

namespace actorflow::ops {

output make(graph& g, std::string op, const std::string& name, std::vector<output> inputs,
            std::map<std::string, attr_value> attrs) {
  node_spec spec;
  spec.op = std::move(op);
  spec.name = name;
  spec.inputs = std::move(inputs);
  spec.attrs = std::move(attrs);
  return g.output_of(g.add_node(std::move(spec)));
}

namespace {

graph& graph_of(const output& x) { return *x.owner; }

output unary(const char* op, output x, const std::string& name) {
  return make(graph_of(x), op, name, {x});
}

output binary(const char* op, output x, output y, const std::string& name) {
  return make(graph_of(x), op, name, {x, y});
}

output reduction(const char* op, output x, std::vector<std::int64_t> axes, bool keep_dims,
                 const std::string& name) {
  return make(graph_of(x), op, name, {x}, {{"axes", std::move(axes)}, {"keep_dims", keep_dims}});
}

output random(graph& g, const char* op, std::vector<std::int64_t> shape, dtype type,
              std::optional<std::int64_t> seed, const std::string& name) {
  auto [seed1, seed2] = random_seeds(g, seed);
  return make(g, op, name, {},
              {{"shape", std::move(shape)}, {"dtype", type}, {"seed", seed1}, {"seed2", seed2}});
}

output scaled(graph& g, output x, double scale, double offset, const std::string& scope_name) {
  if (scale == 1.0 && offset == 0.0)
    return x;
  auto scope = g.name_scope(scope_name);
  auto y = scale == 1.0 ? x : mul(x, scalar_like(g, x.type(), scale, "scale"), "mul");
  return offset == 0.0 ? y : add(y, scalar_like(g, x.type(), offset, "offset"), "add");
}

} // namespace

std::pair<std::int64_t, std::int64_t> random_seeds(graph& g, std::optional<std::int64_t> seed) {
  // TensorFlow's rule: with a graph seed and no op seed, the op seed is derived from the node
  // count so that each op gets a different but reproducible stream.
  if (g.seed)
    return {*g.seed, seed ? *seed : static_cast<std::int64_t>(g.size())};
  if (seed)
    return {87654321, *seed};
  return {0, 0};
}

output constant(graph& g, const tensor& value, const std::string& name) {
  return make(g, "Const", name, {}, {{"value", value}, {"dtype", value.type()}});
}
output constant(graph& g, float value, const std::string& name) {
  return constant(g, tensor::scalar(value), name);
}
output constant(graph& g, double value, const std::string& name) {
  return constant(g, tensor::scalar(value), name);
}
output constant(graph& g, std::int32_t value, const std::string& name) {
  return constant(g, tensor::scalar(value), name);
}
output constant(graph& g, std::int64_t value, const std::string& name) {
  return constant(g, tensor::scalar(value), name);
}
output constant(graph& g, const std::vector<float>& values, tensor_shape shape,
                const std::string& name) {
  if (static_cast<std::int64_t>(values.size()) != shape.num_elements()) {
    g.record_error(make_error(errc::invalid_argument,
                              "constant '" + name + "': " + std::to_string(values.size()) +
                                " values do not fill shape " + shape.to_string()));
  }
  return constant(g, tensor::from_vector(values, std::move(shape)), name);
}

output scalar_like(graph& g, dtype type, double value, const std::string& name) {
  tensor t{type, tensor_shape{}};
  visit_dtype(type, [&](auto zero) {
    *t.data<decltype(zero)>() = static_cast<decltype(zero)>(value);
    return 0;
  });
  return constant(g, t, name);
}

output placeholder(graph& g, dtype type, tensor_shape shape, const std::string& name) {
  return make(g, "Placeholder", name, {}, {{"dtype", type}, {"shape", std::move(shape)}});
}

namespace {

/// The variable's nodes, inside its already opened name scope.
actorflow::variable variable_in_scope(graph& g, output initial_value, bool trainable) {
  auto var_name = g.current_scope();
  node_spec spec;
  spec.op = "VariableV2";
  spec.name = var_name;
  spec.exact_name = true;
  spec.attrs = {{"dtype", initial_value.type()}, {"shape", initial_value.shape()}};
  actorflow::variable v;
  v.ref = g.output_of(g.add_node(std::move(spec)));
  auto colocated = std::map<std::string, attr_value>{{"variable", var_name},
                                                     {"colocate_with", var_name}};
  v.initializer = make(g, "Assign", "Assign", {v.ref, initial_value}, colocated);
  v.read = make(g, "Identity", "read", {v.ref}, {{"colocate_with", var_name}});
  g.add_variable(v, trainable);
  return v;
}

} // namespace

actorflow::variable variable(graph& g, output initial_value, const std::string& name,
                             bool trainable) {
  // TensorFlow's layout: scope "w/", the variable node named "w" after it, then "w/Assign"
  // and "w/read" inside the scope.
  auto scope = g.name_scope(name);
  return variable_in_scope(g, initial_value, trainable);
}

actorflow::variable variable(graph& g, float initial_value, const std::string& name) {
  // The initial value belongs to the variable's own scope: "w_1/initial_value" for a second "w".
  auto scope = g.name_scope(name);
  return variable_in_scope(g, constant(g, initial_value, "initial_value"), true);
}

output global_variables_initializer(graph& g, const std::string& name) {
  std::vector<output> inits;
  for (auto& v : g.global_variables())
    inits.push_back(v.initializer);
  return group(g, inits, name);
}

namespace {

output assign_op(const char* op, const actorflow::variable& var, output value,
                 const std::string& name) {
  auto& g = graph_of(var.ref);
  // colocate_with makes an update written inside a worker's device block run where its
  // variable lives (graph::add_node).
  return make(g, op, name, {var.ref, value},
              {{"variable", var.ref.name()}, {"colocate_with", var.ref.name()}});
}

} // namespace

output is_variable_initialized(const actorflow::variable& var, const std::string& name) {
  return make(graph_of(var.ref), "IsVariableInitialized", name, {var.ref},
              {{"variable", var.ref.name()}, {"colocate_with", var.ref.name()}});
}

output assign(const actorflow::variable& var, output value, const std::string& name) {
  return assign_op("Assign", var, value, name);
}
output assign_add(const actorflow::variable& var, output value, const std::string& name) {
  return assign_op("AssignAdd", var, value, name);
}
output assign_sub(const actorflow::variable& var, output value, const std::string& name) {
  return assign_op("AssignSub", var, value, name);
}

output identity(output x, const std::string& name) { return unary("Identity", x, name); }
output neg(output x, const std::string& name) { return unary("Neg", x, name); }
output square(output x, const std::string& name) { return unary("Square", x, name); }
output sqrt(output x, const std::string& name) { return unary("Sqrt", x, name); }
output exp(output x, const std::string& name) { return unary("Exp", x, name); }
output log(output x, const std::string& name) { return unary("Log", x, name); }
output relu(output x, const std::string& name) { return unary("Relu", x, name); }
output sigmoid(output x, const std::string& name) { return unary("Sigmoid", x, name); }
output tanh(output x, const std::string& name) { return unary("Tanh", x, name); }
output softmax(output logits, const std::string& name) { return unary("Softmax", logits, name); }

output add(output x, output y, const std::string& name) { return binary("Add", x, y, name); }
output sub(output x, output y, const std::string& name) { return binary("Sub", x, y, name); }
output mul(output x, output y, const std::string& name) { return binary("Mul", x, y, name); }
output div(output x, output y, const std::string& name) { return binary("Div", x, y, name); }
output equal(output x, output y, const std::string& name) { return binary("Equal", x, y, name); }
output less(output x, output y, const std::string& name) { return binary("Less", x, y, name); }
output less_equal(output x, output y, const std::string& name) {
  return binary("LessEqual", x, y, name);
}
output greater(output x, output y, const std::string& name) {
  return binary("Greater", x, y, name);
}
output greater_equal(output x, output y, const std::string& name) {
  return binary("GreaterEqual", x, y, name);
}
output less(output x, double y, const std::string& name) {
  return less(x, scalar_like(graph_of(x), x.type(), y, "y"), name);
}
output greater(output x, double y, const std::string& name) {
  return greater(x, scalar_like(graph_of(x), x.type(), y, "y"), name);
}
output logical_and(output x, output y, const std::string& name) {
  return binary("LogicalAnd", x, y, name);
}
output logical_not(output x, const std::string& name) { return unary("LogicalNot", x, name); }

// --- graph/math_ops.hpp ----------------------------------------------------------------------

output cumsum(output x, std::int64_t axis, bool exclusive, bool reverse, const std::string& name) {
  return make(graph_of(x), "Cumsum", name, {x},
              {{"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}});
}

output where(output condition, const std::string& name) {
  return make(graph_of(condition), "Where", name, {condition});
}

output argmin(output x, std::int64_t axis, const std::string& name) {
  return make(graph_of(x), "ArgMin", name, {x}, {{"axis", axis}});
}

output maximum(output x, output y, const std::string& name) { return binary("Maximum", x, y, name); }
output minimum(output x, output y, const std::string& name) { return binary("Minimum", x, y, name); }
output pow(output x, output y, const std::string& name) { return binary("Pow", x, y, name); }
output floor_div(output x, output y, const std::string& name) {
  return binary("FloorDiv", x, y, name);
}
output floor_mod(output x, output y, const std::string& name) {
  return binary("FloorMod", x, y, name);
}
output squared_difference(output x, output y, const std::string& name) {
  return binary("SquaredDifference", x, y, name);
}
output not_equal(output x, output y, const std::string& name) {
  return binary("NotEqual", x, y, name);
}
output logical_or(output x, output y, const std::string& name) {
  return binary("LogicalOr", x, y, name);
}

output abs(output x, const std::string& name) { return unary("Abs", x, name); }
output sign(output x, const std::string& name) { return unary("Sign", x, name); }
output floor(output x, const std::string& name) { return unary("Floor", x, name); }
output ceil(output x, const std::string& name) { return unary("Ceil", x, name); }
output round(output x, const std::string& name) { return unary("Round", x, name); }
output stop_gradient(output x, const std::string& name) { return unary("StopGradient", x, name); }
output sin(output x, const std::string& name) { return unary("Sin", x, name); }
output cos(output x, const std::string& name) { return unary("Cos", x, name); }
output log1p(output x, const std::string& name) { return unary("Log1p", x, name); }
output expm1(output x, const std::string& name) { return unary("Expm1", x, name); }
output is_nan(output x, const std::string& name) { return unary("IsNan", x, name); }
output is_inf(output x, const std::string& name) { return unary("IsInf", x, name); }
output is_finite(output x, const std::string& name) { return unary("IsFinite", x, name); }

output select(output condition, output t, output e, const std::string& name) {
  return make(graph_of(condition), "SelectV2", name, {condition, t, e});
}

output reduce_min(output x, std::vector<std::int64_t> axes, bool keep_dims, const std::string& name) {
  return reduction("Min", x, std::move(axes), keep_dims, name);
}
output reduce_prod(output x, std::vector<std::int64_t> axes, bool keep_dims,
                   const std::string& name) {
  return reduction("Prod", x, std::move(axes), keep_dims, name);
}

output gather(output params, output indices, std::int64_t axis, const std::string& name) {
  return make(graph_of(params), "Gather", name, {params, indices}, {{"axis", axis}});
}

output cast(output x, dtype to, const std::string& name) {
  return make(graph_of(x), "Cast", name, {x}, {{"dtype", to}});
}

output matmul(output a, output b, bool transpose_a, bool transpose_b, const std::string& name) {
  return make(graph_of(a), "MatMul", name, {a, b},
              {{"transpose_a", transpose_a}, {"transpose_b", transpose_b}});
}

output reduce_sum(output x, std::vector<std::int64_t> axes, bool keep_dims, const std::string& name) {
  return reduction("Sum", x, std::move(axes), keep_dims, name);
}
output reduce_mean(output x, std::vector<std::int64_t> axes, bool keep_dims, const std::string& name) {
  return reduction("Mean", x, std::move(axes), keep_dims, name);
}
output reduce_max(output x, std::vector<std::int64_t> axes, bool keep_dims, const std::string& name) {
  return reduction("Max", x, std::move(axes), keep_dims, name);
}

output argmax(output x, std::int64_t axis, const std::string& name) {
  return make(graph_of(x), "ArgMax", name, {x}, {{"axis", axis}});
}

namespace {

/// {h, w} as TensorFlow's NHWC attribute [1, h, w, 1]; anything else passes through for the
/// op's shape function to refuse by name.
std::vector<std::int64_t> nhwc_window(std::vector<std::int64_t> hw) {
  if (hw.size() == 2)
    return {1, hw[0], hw[1], 1};
  return hw;
}

output pool(const char* op, output x, std::vector<std::int64_t> ksize,
            std::vector<std::int64_t> strides, const std::string& padding, const std::string& name) {
  return make(graph_of(x), op, name, {x},
              {{"ksize", nhwc_window(std::move(ksize))},
               {"strides", nhwc_window(std::move(strides))},
               {"padding", padding}});
}

} // namespace

output conv2d(output x, output filter, std::vector<std::int64_t> strides, const std::string& padding,
              const std::string& name) {
  return make(graph_of(x), "Conv2D", name, {x, filter},
              {{"strides", nhwc_window(std::move(strides))}, {"padding", padding}});
}

output max_pool(output x, std::vector<std::int64_t> ksize, std::vector<std::int64_t> strides,
                const std::string& padding, const std::string& name) {
  return pool("MaxPool", x, std::move(ksize), std::move(strides), padding, name);
}

output avg_pool(output x, std::vector<std::int64_t> ksize, std::vector<std::int64_t> strides,
                const std::string& padding, const std::string& name) {
  return pool("AvgPool", x, std::move(ksize), std::move(strides), padding, name);
}

output reshape(output x, std::vector<std::int64_t> shape, const std::string& name) {
  return make(graph_of(x), "Reshape", name, {x}, {{"shape", std::move(shape)}});
}

output concat(const std::vector<output>& values, std::int64_t axis, const std::string& name) {
  auto valid = std::find_if(values.begin(), values.end(), [](auto& v) { return v.valid(); });
  if (valid == values.end())
    return output{};
  if (values.size() == 1)
    return identity(values.front(), name);
  // add_node records an error for any invalid value among the others.
  return make(graph_of(*valid), "ConcatV2", name, values, {{"axis", axis}});
}

output softmax_cross_entropy_with_logits(output logits, output labels, const std::string& name) {
  return make(graph_of(logits), "SoftmaxCrossEntropyWithLogits", name, {logits, labels});
}

output fill(graph& g, std::vector<std::int64_t> shape, output value, const std::string& name) {
  return make(g, "Fill", name, {value}, {{"shape", std::move(shape)}});
}

output zeros(graph& g, std::vector<std::int64_t> shape, dtype type, const std::string& name) {
  auto scope = g.name_scope(name);
  return fill(g, std::move(shape), scalar_like(g, type, 0.0, "value"), "Fill");
}

output ones(graph& g, std::vector<std::int64_t> shape, dtype type, const std::string& name) {
  auto scope = g.name_scope(name);
  return fill(g, std::move(shape), scalar_like(g, type, 1.0, "value"), "Fill");
}

output random_uniform(graph& g, std::vector<std::int64_t> shape, double minval, double maxval,
                      dtype type, std::optional<std::int64_t> seed, const std::string& name) {
  auto scope = g.name_scope(name);
  auto base = random(g, "RandomUniform", std::move(shape), type, seed, "RandomUniform");
  return scaled(g, base, maxval - minval, minval, "range");
}

output random_normal(graph& g, std::vector<std::int64_t> shape, double mean, double stddev,
                     dtype type, std::optional<std::int64_t> seed, const std::string& name) {
  auto scope = g.name_scope(name);
  auto base = random(g, "RandomStandardNormal", std::move(shape), type, seed, "RandomStandardNormal");
  return scaled(g, base, stddev, mean, "scaled");
}

output truncated_normal(graph& g, std::vector<std::int64_t> shape, double mean, double stddev,
                        dtype type, std::optional<std::int64_t> seed, const std::string& name) {
  auto scope = g.name_scope(name);
  auto base = random(g, "TruncatedNormal", std::move(shape), type, seed, "TruncatedNormal");
  return scaled(g, base, stddev, mean, "scaled");
}

output no_op(graph& g, const std::string& name) { return make(g, "NoOp", name, {}); }

std::vector<output> all_reduce(const std::vector<output>& values, const std::string& reduction,
                               const std::string& name) {
  std::vector<output> reduced;
  if (values.empty())
    return reduced;
  auto& g = graph_of(values.front());
  if (reduction != "sum" && reduction != "mean") {
    g.record_error(make_error(errc::invalid_argument, "all_reduce '" + name + "': reduction '" +
                                                        reduction + "' is neither sum nor mean"));
    return reduced;
  }
  auto key = g.unique_name(name);
  auto size = static_cast<std::int64_t>(values.size());
  for (std::int64_t rank = 0; rank < size; ++rank) {
    auto& value = values[static_cast<std::size_t>(rank)];
    auto beside = g.colocate_with(value);
    reduced.push_back(make(g, "AllReduce", key + "_" + std::to_string(rank), {value},
                           {{"group_key", key},
                            {"group_rank", rank},
                            {"group_size", size},
                            {"reduction", reduction}}));
  }
  return reduced;
}

output group(graph& g, const std::vector<output>& deps, const std::string& name) {
  node_spec spec;
  spec.op = "NoOp";
  spec.name = name;
  for (auto& d : deps)
    if (d.valid())
      spec.control_inputs.push_back(d.node_id);
  return g.output_of(g.add_node(std::move(spec)));
}

} // namespace actorflow::ops

namespace actorflow {

namespace {
output number_like(const output& other, double value) {
  return ops::scalar_like(*other.owner, other.type(), value, "y");
}
} // namespace

output operator+(output x, output y) { return ops::add(x, y); }
output operator-(output x, output y) { return ops::sub(x, y); }
output operator*(output x, output y) { return ops::mul(x, y); }
output operator/(output x, output y) { return ops::div(x, y); }
output operator-(output x) { return ops::neg(x); }
output operator+(output x, double y) { return ops::add(x, number_like(x, y)); }
output operator+(double x, output y) { return ops::add(number_like(y, x), y); }
output operator-(output x, double y) { return ops::sub(x, number_like(x, y)); }
output operator-(double x, output y) { return ops::sub(number_like(y, x), y); }
output operator*(output x, double y) { return ops::mul(x, number_like(x, y)); }
output operator*(double x, output y) { return ops::mul(number_like(y, x), y); }
output operator/(output x, double y) { return ops::div(x, number_like(x, y)); }
output operator/(double x, output y) { return ops::div(number_like(y, x), y); }

} // namespace actorflow

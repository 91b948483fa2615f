#pragma once
/// The graph-building API: one function per op, plus arithmetic operators on outputs.
///   graph g;
///   auto x = ops::placeholder(g, dtype::float32, {-1, 784}, "x");
///   auto w = ops::variable(g, ops::zeros(g, {784, 10}), "w");
///   auto logits = ops::matmul(x, w);
///   auto init = ops::global_variables_initializer(g);
/// Every function takes an optional name hint; the node gets a unique scoped name from it.
/// Each function's comment gives its op's TensorFlow name and attributes: the contract with
/// kernels and serialisation. Ops that only gradients and optimizers create are documented in
/// graph/gradient_ops.cpp and graph/training_ops.cpp.

#include "graph/graph.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace actorflow::ops {

/// Adds a node of op `op` named `name` (in the current name scope) with `inputs` and `attrs`,
/// and gives its output 0: what the builders here, the control-flow ones and the gradients'
/// are made of.
output make(graph& g, std::string op, const std::string& name, std::vector<output> inputs,
            std::map<std::string, attr_value> attrs = {});

// --- sources -------------------------------------------------------------------------------

/// "Const": attrs value (tensor), dtype.
output constant(graph& g, const tensor& value, const std::string& name = "Const");
output constant(graph& g, float value, const std::string& name = "Const");
output constant(graph& g, double value, const std::string& name = "Const");
output constant(graph& g, std::int32_t value, const std::string& name = "Const");
output constant(graph& g, std::int64_t value, const std::string& name = "Const");
output constant(graph& g, const std::vector<float>& values, tensor_shape shape,
                const std::string& name = "Const");
/// A scalar constant of dtype `type` holding `value` converted.
output scalar_like(graph& g, dtype type, double value, const std::string& name = "Const");

/// "Placeholder": attrs dtype, shape (partial shapes allowed: -1 for an unknown dimension).
output placeholder(graph& g, dtype type, tensor_shape shape = tensor_shape::unknown(),
                   const std::string& name = "Placeholder");

/// A variable: "VariableV2" (attrs dtype, shape), "<name>/Assign" (its initializer) and
/// "<name>/read" (an Identity that arithmetic on the variable uses), all in the variable's
/// name scope. Assign and read are colocated with the variable (attr "colocate_with").
actorflow::variable variable(graph& g, output initial_value, const std::string& name = "Variable",
                             bool trainable = true);
/// Convenience: a scalar variable of float32.
actorflow::variable variable(graph& g, float initial_value, const std::string& name = "Variable");

/// A NoOp depending on every variable's initializer.
output global_variables_initializer(graph& g, const std::string& name = "init");

/// "IsVariableInitialized" (TF's): a bool scalar, made on the variable's device, saying whether
/// it holds a value; what a readiness check reads instead of the value itself (a table of
/// billions of parameters would travel whole otherwise). Attr variable.
output is_variable_initialized(const actorflow::variable& var,
                               const std::string& name = "IsVariableInitialized");

/// "Assign" / "AssignAdd" / "AssignSub": inputs (variable ref, value), attr variable (the
/// variable node's name); output the new value. Colocated with the variable.
output assign(const actorflow::variable& var, output value, const std::string& name = "Assign");
output assign_add(const actorflow::variable& var, output value, const std::string& name = "AssignAdd");
output assign_sub(const actorflow::variable& var, output value, const std::string& name = "AssignSub");

// --- elementwise ---------------------------------------------------------------------------

output identity(output x, const std::string& name = "Identity");
output neg(output x, const std::string& name = "Neg");
output square(output x, const std::string& name = "Square");
output sqrt(output x, const std::string& name = "Sqrt");
output exp(output x, const std::string& name = "Exp");
output log(output x, const std::string& name = "Log");
output relu(output x, const std::string& name = "Relu");
output sigmoid(output x, const std::string& name = "Sigmoid");
output tanh(output x, const std::string& name = "Tanh");

/// Binary ops broadcast numpy-style; mismatched shapes are an error naming both. Default
/// names follow TensorFlow's Python operators: "add", "sub", "mul", "truediv".
output add(output x, output y, const std::string& name = "add");
output sub(output x, output y, const std::string& name = "sub");
output mul(output x, output y, const std::string& name = "mul");
output div(output x, output y, const std::string& name = "truediv");
/// "Equal": bool result.
output equal(output x, output y, const std::string& name = "Equal");
/// "Less", "LessEqual", "Greater", "GreaterEqual": bool results, numpy broadcasting.
output less(output x, output y, const std::string& name = "Less");
output less_equal(output x, output y, const std::string& name = "LessEqual");
output greater(output x, output y, const std::string& name = "Greater");
output greater_equal(output x, output y, const std::string& name = "GreaterEqual");
output less(output x, double y, const std::string& name = "Less");
output greater(output x, double y, const std::string& name = "Greater");
/// "LogicalAnd", "LogicalNot" on bool tensors.
output logical_and(output x, output y, const std::string& name = "LogicalAnd");
output logical_not(output x, const std::string& name = "LogicalNot");

/// "Gather": attr axis; the slices of params at indices (int32 or int64) along axis. A scalar
/// index drops the axis: gather(x [b, t, f], i, 1) is x[:, i, :].
output gather(output params, output indices, std::int64_t axis = 0, const std::string& name = "Gather");

/// "Cast": attr dtype (the destination type).
output cast(output x, dtype to, const std::string& name = "Cast");

// --- linear algebra, reductions, shapes ------------------------------------------------------

/// "MatMul": attrs transpose_a, transpose_b.
output matmul(output a, output b, bool transpose_a = false, bool transpose_b = false,
              const std::string& name = "MatMul");

/// "Sum" / "Mean" / "Max": attrs axes (empty = all axes; negative counts from the end),
/// keep_dims.
output reduce_sum(output x, std::vector<std::int64_t> axes = {}, bool keep_dims = false,
                  const std::string& name = "Sum");
output reduce_mean(output x, std::vector<std::int64_t> axes = {}, bool keep_dims = false,
                   const std::string& name = "Mean");
output reduce_max(output x, std::vector<std::int64_t> axes = {}, bool keep_dims = false,
                  const std::string& name = "Max");

/// "ArgMax": attr axis; int64 result.
output argmax(output x, std::int64_t axis, const std::string& name = "ArgMax");

/// "Reshape": attr shape (one dimension may be -1).
output reshape(output x, std::vector<std::int64_t> shape, const std::string& name = "Reshape");

/// "Conv2D": x [batch, height, width, in] (NHWC) convolved with filter [kh, kw, in, out];
/// strides {sh, sw}; padding "SAME" or "VALID" (graph/conv_geometry.hpp).
output conv2d(output x, output filter, std::vector<std::int64_t> strides, const std::string& padding,
              const std::string& name = "Conv2D");
/// "MaxPool" / "AvgPool" over NHWC windows {kh, kw} moved by strides {sh, sw}. AvgPool divides
/// by the window's elements inside the input (SAME padding adds none).
output max_pool(output x, std::vector<std::int64_t> ksize, std::vector<std::int64_t> strides,
                const std::string& padding, const std::string& name = "MaxPool");
output avg_pool(output x, std::vector<std::int64_t> ksize, std::vector<std::int64_t> strides,
                const std::string& padding, const std::string& name = "AvgPool");

/// "ConcatV2": inputs x0 .. x{N-1} (N >= 1, one dtype), attr axis (int64; negative counts from
/// the end). TensorFlow's ConcatV2 takes the axis as a last int32 input; here it is an attribute,
/// like Sum's axes and Reshape's shape, so that shape inference and the kernel know it without
/// a value. The inputs have one rank (at least 1) and equal dimensions except along axis, where
/// the result has their sum; unknown dimensions are allowed. Like tf.concat, a single value
/// gives an Identity instead. `values` must not be empty: an empty list has no graph to record
/// the error in, and the result is an invalid output.
output concat(const std::vector<output>& values, std::int64_t axis,
              const std::string& name = "concat");

// --- activations and losses ------------------------------------------------------------------

/// "Softmax" over the last axis.
output softmax(output logits, const std::string& name = "Softmax");

/// "SoftmaxCrossEntropyWithLogits": inputs (logits [batch, classes], labels [batch, classes]);
/// output 0 the per-example loss [batch], output 1 the backprop (softmax - labels).
output softmax_cross_entropy_with_logits(output logits, output labels,
                                         const std::string& name = "SoftmaxCrossEntropyWithLogits");

// --- filling and random ----------------------------------------------------------------------

/// "Fill": input a scalar value, attr shape.
output fill(graph& g, std::vector<std::int64_t> shape, output value, const std::string& name = "Fill");
output zeros(graph& g, std::vector<std::int64_t> shape, dtype type = dtype::float32,
             const std::string& name = "zeros");
output ones(graph& g, std::vector<std::int64_t> shape, dtype type = dtype::float32,
            const std::string& name = "ones");

/// The attrs seed and seed2 of a random op made now in `g` with op seed `seed` (TensorFlow's
/// rules: the graph seed and the op seed, or one derived from the node count; (0, 0) when
/// neither is set, a new sequence every process).
std::pair<std::int64_t, std::int64_t> random_seeds(graph& g, std::optional<std::int64_t> seed);

/// "RandomUniform" ([0, 1)), "RandomStandardNormal", "TruncatedNormal" (within two standard
/// deviations): attrs shape, dtype, seed, seed2. The results are reproducible when the graph
/// seed or the op seed is set (TensorFlow's rules); each run draws new numbers.
output random_uniform(graph& g, std::vector<std::int64_t> shape, double minval = 0.0,
                      double maxval = 1.0, dtype type = dtype::float32,
                      std::optional<std::int64_t> seed = std::nullopt,
                      const std::string& name = "random_uniform");
output random_normal(graph& g, std::vector<std::int64_t> shape, double mean = 0.0,
                     double stddev = 1.0, dtype type = dtype::float32,
                     std::optional<std::int64_t> seed = std::nullopt,
                     const std::string& name = "random_normal");
output truncated_normal(graph& g, std::vector<std::int64_t> shape, double mean = 0.0,
                        double stddev = 1.0, dtype type = dtype::float32,
                        std::optional<std::int64_t> seed = std::nullopt,
                        const std::string& name = "truncated_normal");

/// "NoOp": no inputs, no outputs; useful as a target with control dependencies.
output no_op(graph& g, const std::string& name = "NoOp");

/// A NoOp that runs after all of `deps` (tf.group).
output group(graph& g, const std::vector<output>& deps, const std::string& name = "group_deps");

/// AllReduce (MirroredStrategy's all-reduce, NCCL's job on GPUs): one member per value, each
/// colocated with its value, and each outputs the sum ("sum") or mean ("mean") of all values,
/// added in the order given. Attributes: group_key (the group's unique name), group_rank,
/// group_size, reduction. All members run in the same step, on devices of this process's
/// tasks; an aborted step ends their wait.
std::vector<output> all_reduce(const std::vector<output>& values, const std::string& reduction = "sum",
                               const std::string& name = "AllReduce");

} // namespace actorflow::ops

namespace actorflow {

output operator+(output x, output y);
output operator-(output x, output y);
output operator*(output x, output y);
output operator/(output x, output y);
output operator-(output x);
// With a plain number: the number becomes a constant of the other operand's dtype.
output operator+(output x, double y);
output operator+(double x, output y);
output operator-(output x, double y);
output operator-(double x, output y);
output operator*(output x, double y);
output operator*(double x, output y);
output operator/(output x, double y);
output operator/(double x, output y);

} // namespace actorflow

#pragma once
/// Ops about a tensor's layout and shape (TensorFlow's Transpose, Shape, Size and Rank).
///   auto xt = ops::transpose(x, {1, 0});   // x [a, b] -> [b, a]; no perm: the axes reversed
///   auto dims = ops::shape(x);             // int32 [rank]: x's dimensions when the step runs
///   auto count = ops::size(x);             // int32 scalar: its element count; ops::rank(x) too
/// Transpose's gradient is the transpose by the inverse permutation; Shape, Size and Rank read
/// only their input's run-time shape and have no gradient (they stop it, as in TensorFlow).

#include "graph/graph.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace actorflow {

class op_registry;
class gradient_registry;

/// Transpose, Shape, Size and Rank (graph/standard_ops.cpp calls it).
void register_shape_ops(op_registry& registry);
/// Transpose's gradient; Shape, Size and Rank as not differentiable (graph/gradients.cpp calls it).
void register_shape_gradients(gradient_registry& registry);

/// Transpose's attr perm for an input of `rank`: output axis i is input axis perm[i]. Empty
/// means the axes reversed (tf.transpose's default). An error, naming what is wrong, unless
/// perm has `rank` entries that are each of 0 .. rank-1 once. Shape inference and every
/// device's kernel read perm through this one function.
result<std::vector<int>> transpose_permutation(const std::vector<std::int64_t>& perm, int rank);

/// The permutation that undoes `perm` (a valid one): inverse[perm[i]] = i. Empty stays empty
/// (reversing is its own inverse).
std::vector<std::int64_t> inverse_permutation(const std::vector<std::int64_t>& perm);

namespace ops {

/// "Transpose": attr perm (int64 list; empty: reversed axes). Output axis i is input axis
/// perm[i], so out[i0, ..., in] = x[i at perm^-1]; any dtype. TensorFlow takes perm as an int32
/// input; here it is an attribute, like Reshape's shape, so shape inference knows it.
output transpose(output x, std::vector<std::int64_t> perm = {}, const std::string& name = "transpose");

/// "Shape": attr out_type (int32 or int64); a vector of x's dimensions at run time.
output shape(output x, dtype out_type = dtype::int32, const std::string& name = "Shape");

/// "Size": attr out_type (int32 or int64); a scalar, x's number of elements at run time.
output size(output x, dtype out_type = dtype::int32, const std::string& name = "Size");

/// "Rank": an int32 scalar, x's number of dimensions at run time.
output rank(output x, const std::string& name = "Rank");

} // namespace ops

} // namespace actorflow

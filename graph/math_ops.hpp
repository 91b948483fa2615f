#pragma once
/// Elementwise math, selection and reductions beyond graph/ops.hpp's core set, under
/// TensorFlow's op names (math_ops.py). Each has its own kernel on the CPU and the GPU;
/// the gradients follow TensorFlow's math_grad.py (graph/gradients.cpp).
/// The builders are defined in graph/ops.cpp, beside the core ones.
///   auto y = ops::maximum(x, ops::scalar_like(g, x.type(), 0.0));   // max(x, 0), broadcast
///   auto z = ops::select(ops::greater(x, limit), limit, x);          // tf.where (broadcasting)

#include "graph/graph.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace actorflow::ops {

/// "Maximum" / "Minimum": numpy broadcasting, float and integer types. The gradient goes to x
/// where x >= y (Maximum) or x <= y (Minimum), else to y, as in TensorFlow.
output maximum(output x, output y, const std::string& name = "Maximum");
output minimum(output x, output y, const std::string& name = "Minimum");
/// "Pow": x^y elementwise. Integer powers need y >= 0 (on the CPU a negative one fails the
/// step, naming the node, as TensorFlow's).
output pow(output x, output y, const std::string& name = "Pow");
/// "FloorDiv" / "FloorMod": Python's // and %: the quotient rounded toward minus infinity and
/// the remainder with the divisor's sign. On the CPU an integer divisor of zero fails the step.
output floor_div(output x, output y, const std::string& name = "FloorDiv");
output floor_mod(output x, output y, const std::string& name = "FloorMod");
/// "SquaredDifference": (x - y)^2.
output squared_difference(output x, output y, const std::string& name = "SquaredDifference");
/// "NotEqual": bool result; "LogicalOr" on bool tensors.
output not_equal(output x, output y, const std::string& name = "NotEqual");
output logical_or(output x, output y, const std::string& name = "LogicalOr");

/// "Abs", "Sign" (float and integer types); "Floor", "Ceil", "Round" (float types; Round
/// rounds half to even, as TensorFlow's and numpy's).
output abs(output x, const std::string& name = "Abs");
output sign(output x, const std::string& name = "Sign");
output floor(output x, const std::string& name = "Floor");
output ceil(output x, const std::string& name = "Ceil");
output round(output x, const std::string& name = "Round");
/// "Sin", "Cos", "Log1p" (log(1 + x), exact near 0), "Expm1" (exp(x) - 1, exact near 0): float
/// types.
output sin(output x, const std::string& name = "Sin");
output cos(output x, const std::string& name = "Cos");
output log1p(output x, const std::string& name = "Log1p");
output expm1(output x, const std::string& name = "Expm1");
/// "StopGradient": x itself (the buffer shared), through which no gradient flows (tf.stop_gradient).
output stop_gradient(output x, const std::string& name = "StopGradient");
/// "IsNan", "IsInf", "IsFinite": bool results of float inputs; no gradient.
output is_nan(output x, const std::string& name = "IsNan");
output is_inf(output x, const std::string& name = "IsInf");
output is_finite(output x, const std::string& name = "IsFinite");

/// "ArgMin": the index of the smallest element along `axis` (int64; the first of equal ones),
/// as ops::argmax's.
output argmin(output x, std::int64_t axis, const std::string& name = "ArgMin");

/// "Cumsum": running sums along `axis` (an attribute, as ArgMax's), TF's: `exclusive` leaves each
/// element out of its own sum, `reverse` sums from the end. Gradient: the reverse cumsum.
output cumsum(output x, std::int64_t axis, bool exclusive = false, bool reverse = false,
              const std::string& name = "Cumsum");

/// "Where": the coordinates of `condition`'s true elements, int64 [count, rank], row-major
/// (tf.where with a condition alone); its size known only when it runs. CPU only, as Unique.
output where(output condition, const std::string& name = "Where");

/// "SelectV2": condition ? t : e elementwise, the three broadcast together numpy-style
/// (tf.where in TF 2; TF1's rank-1 condition over rows is a reshape of it in Python).
output select(output condition, output t, output e, const std::string& name = "SelectV2");

/// "Min" / "Prod": attrs axes (empty = all axes; negative counts from the end), keep_dims.
/// float32 products accumulate in float64, as Sum's do.
output reduce_min(output x, std::vector<std::int64_t> axes = {}, bool keep_dims = false,
                  const std::string& name = "Min");
output reduce_prod(output x, std::vector<std::int64_t> axes = {}, bool keep_dims = false,
                   const std::string& name = "Prod");

} // namespace actorflow::ops

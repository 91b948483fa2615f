#pragma once
/// What a Transpose copies on every device, on the fewest dimensions that describe it: axes of
/// extent 1 dropped, and output axes that stay adjacent and in order in the input merged. Output
/// element at index (i0, ..., ik) of `extents` reads the input at sum(ij * in_strides[j]).
///   auto layout = make_transpose_layout(x.shape(), {0, 2, 1});   // [b, m, n] -> [b, n, m]
///   // layout->extents {b, n, m}, in_strides {m * n, 1, n}; a [b, 1, n] input: no move at all
/// The permutation is read by graph/shape_ops.hpp's transpose_permutation, as shape inference
/// reads it.

#include "graph/status.hpp"
#include "graph/tensor_shape.hpp"

#include <cstdint>
#include <vector>

namespace actorflow {

struct transpose_layout {
  /// The transpose's output shape.
  tensor_shape out_shape;
  /// The simplified output axes, outermost first; at least one.
  std::vector<std::int64_t> extents;
  /// Per simplified output axis, its stride in the input, in elements.
  std::vector<std::int64_t> in_strides;

  /// Whether the output's elements lie in the input's order (only axes of extent 1 moved):
  /// the input's buffer under the output shape is the result.
  bool moves_nothing() const { return extents.size() == 1 && in_strides[0] == 1; }
};

/// The layout of transposing a tensor of shape `in` (fully defined) by attr `perm` (empty: the
/// axes reversed); the error of transpose_permutation when perm does not fit.
result<transpose_layout> make_transpose_layout(const tensor_shape& in,
                                               const std::vector<std::int64_t>& perm);

} // namespace actorflow

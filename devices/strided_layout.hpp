#pragma once
/// What a Transpose or a StridedSlice copies on every device, on the fewest dimensions that
/// describe it: axes of extent 1 dropped, and output axes that stay adjacent and in order in the
/// input merged. Output element at index (i0, ..., ik) of `extents` reads the input at
/// in_offset + sum(ij * in_strides[j]); a stride may be negative (x[::-1]).
///   auto layout = make_transpose_layout(x.shape(), {0, 2, 1});   // [b, m, n] -> [b, n, m]
///   // layout->extents {b, n, m}, in_strides {m * n, 1, n}; a [b, 1, n] input: no move at all
///   auto rows = make_strided_slice_layout(x.shape(), spec, node.name);   // x[2:6:2] of [8, 5]
///   // rows->in_offset 10, extents {2, 5}, in_strides {10, 1}
/// The permutation is read by graph/shape_ops.hpp's transpose_permutation and the subscript by
/// graph/strided_slice.hpp's plan_strided_slice, as shape inference reads them.

#include "graph/status.hpp"
#include "graph/tensor_shape.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace actorflow {

struct strided_slice_spec;

struct strided_layout {
  /// The output shape.
  tensor_shape out_shape;
  /// Where output element 0 lies in the input, in elements.
  std::int64_t in_offset = 0;
  /// The simplified output axes, outermost first; at least one.
  std::vector<std::int64_t> extents;
  /// Per simplified output axis, its stride in the input, in elements.
  std::vector<std::int64_t> in_strides;
  /// The input's element count.
  std::int64_t in_elements = 0;

  /// Whether the output is the input's elements in their order: the input's buffer under the
  /// output shape is the result.
  bool moves_nothing() const {
    return in_offset == 0 && extents.size() == 1 && in_strides[0] == 1 && extents[0] == in_elements;
  }
  /// The output's element count.
  std::int64_t out_elements() const { return out_shape.num_elements(); }
};

/// The layout of transposing a tensor of shape `in` (fully defined) by attr `perm` (empty: the
/// axes reversed); the error of transpose_permutation when perm does not fit.
result<strided_layout> make_transpose_layout(const tensor_shape& in,
                                             const std::vector<std::int64_t>& perm);

/// The layout of StridedSlice `spec` of a tensor of shape `in` (fully defined); the error of
/// plan_strided_slice, naming `node_name`, when the subscript does not fit.
result<strided_layout> make_strided_slice_layout(const tensor_shape& in, const strided_slice_spec& spec,
                                                 const std::string& node_name);

/// The layout of StridedSliceGrad: the slice `spec` of x's shape `x`, checked to have dy's
/// shape `dy` (an error naming `node_name` and the shapes otherwise).
result<strided_layout> make_strided_slice_grad_layout(const tensor_shape& x, const tensor_shape& dy,
                                                      const strided_slice_spec& spec,
                                                      const std::string& node_name);

} // namespace actorflow

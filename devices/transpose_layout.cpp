#include "devices/transpose_layout.hpp"

#include "graph/shape_ops.hpp"

namespace actorflow {

result<transpose_layout> make_transpose_layout(const tensor_shape& in,
                                               const std::vector<std::int64_t>& perm) {
  auto rank = in.rank();
  auto axes = transpose_permutation(perm, rank);
  if (!axes)
    return axes.error();
  std::vector<std::int64_t> strides(static_cast<std::size_t>(rank), 1);
  for (int k = rank - 2; k >= 0; --k)
    strides[static_cast<std::size_t>(k)] =
      strides[static_cast<std::size_t>(k + 1)] * in.dim(k + 1);
  transpose_layout layout;
  std::vector<std::int64_t> out_dims;
  for (auto axis : *axes) {
    auto extent = in.dim(axis);
    auto stride = strides[static_cast<std::size_t>(axis)];
    out_dims.push_back(extent);
    if (extent == 1)
      continue;
    // Contiguous with the axis before it: one axis of both extents at this one's stride.
    if (!layout.extents.empty() && layout.in_strides.back() == extent * stride) {
      layout.extents.back() *= extent;
      layout.in_strides.back() = stride;
      continue;
    }
    layout.extents.push_back(extent);
    layout.in_strides.push_back(stride);
  }
  if (layout.extents.empty()) {
    layout.extents.push_back(1);
    layout.in_strides.push_back(1);
  }
  layout.out_shape = tensor_shape{out_dims};
  return layout;
}

} // namespace actorflow

#include "devices/strided_layout.hpp"

#include "graph/shape_ops.hpp"
#include "graph/strided_slice.hpp"

namespace actorflow {

namespace {

/// Row-major element strides of a fully defined shape.
std::vector<std::int64_t> row_major_strides(const tensor_shape& s) {
  std::vector<std::int64_t> strides(static_cast<std::size_t>(s.rank()), 1);
  for (int k = s.rank() - 2; k >= 0; --k)
    strides[static_cast<std::size_t>(k)] = strides[static_cast<std::size_t>(k + 1)] * s.dim(k + 1);
  return strides;
}

/// Appends the next output axis: dropped at extent 1, merged into the one before when the two
/// walk the input as one axis would (the outer's stride is this one's whole span).
void add_axis(strided_layout& layout, std::int64_t extent, std::int64_t stride) {
  if (extent == 1)
    return;
  if (!layout.extents.empty() && layout.in_strides.back() == extent * stride) {
    layout.extents.back() *= extent;
    layout.in_strides.back() = stride;
    return;
  }
  layout.extents.push_back(extent);
  layout.in_strides.push_back(stride);
}

void finish(strided_layout& layout, const tensor_shape& in, tensor_shape out) {
  if (layout.extents.empty()) {
    layout.extents.push_back(1);
    layout.in_strides.push_back(1);
  }
  layout.in_elements = in.num_elements();
  layout.out_shape = std::move(out);
}

} // namespace

result<strided_layout> make_transpose_layout(const tensor_shape& in,
                                             const std::vector<std::int64_t>& perm) {
  auto axes = transpose_permutation(perm, in.rank());
  if (!axes)
    return axes.error();
  auto strides = row_major_strides(in);
  strided_layout layout;
  std::vector<std::int64_t> out_dims;
  for (auto axis : *axes) {
    out_dims.push_back(in.dim(axis));
    add_axis(layout, in.dim(axis), strides[static_cast<std::size_t>(axis)]);
  }
  finish(layout, in, tensor_shape{out_dims});
  return layout;
}

result<strided_layout> make_strided_slice_layout(const tensor_shape& in, const strided_slice_spec& spec,
                                                 const std::string& node_name) {
  auto plan = plan_strided_slice(in, spec, node_name);
  if (!plan)
    return plan.error();
  auto strides = row_major_strides(in);
  strided_layout layout;
  auto empty = plan->out_shape.num_elements() == 0;
  for (std::size_t k = 0; k < plan->axes.size(); ++k) {
    auto& taken = plan->axes[k];
    if (empty)
      break;
    layout.in_offset += taken.start * strides[k];
    if (!taken.shrink)
      add_axis(layout, taken.length, taken.stride * strides[k]);
  }
  if (empty) {
    // Nothing is read: one axis of no elements.
    layout.in_offset = 0;
    layout.extents = {0};
    layout.in_strides = {1};
  }
  finish(layout, in, plan->out_shape);
  return layout;
}

result<strided_layout> make_strided_slice_grad_layout(const tensor_shape& x, const tensor_shape& dy,
                                                      const strided_slice_spec& spec,
                                                      const std::string& node_name) {
  auto layout = make_strided_slice_layout(x, spec, node_name);
  if (layout && dy != layout->out_shape)
    return make_error(errc::invalid_argument, "StridedSliceGrad '" + node_name + "': dy has shape " +
                                                dy.to_string() + " but the slice of " +
                                                x.to_string() + " has shape " +
                                                layout->out_shape.to_string());
  return layout;
}

} // namespace actorflow

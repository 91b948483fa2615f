#include "devices/concat_layout.hpp"

namespace actorflow {

result<int> normalize_axis(std::int64_t axis, int rank, const char* what) {
  if (axis < -rank || axis >= rank)
    return make_error(errc::invalid_argument,
                      std::string{what} + " " + std::to_string(axis) + " is out of range for a tensor of rank " +
                        std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

result<gather_layout> make_gather_layout(const tensor_shape& params, const tensor_shape& indices,
                                         std::int64_t axis_attr) {
  auto axis = normalize_axis(axis_attr, params.rank(), "Gather axis");
  if (!axis)
    return axis.error();
  gather_layout layout;
  layout.extent = params.dim(*axis);
  layout.count = indices.num_elements();
  std::vector<std::int64_t> dims;
  for (int i = 0; i < *axis; ++i) {
    layout.outer *= params.dim(i);
    dims.push_back(params.dim(i));
  }
  for (int i = 0; i < indices.rank(); ++i)
    dims.push_back(indices.dim(i));
  for (int i = *axis + 1; i < params.rank(); ++i) {
    layout.inner *= params.dim(i);
    dims.push_back(params.dim(i));
  }
  layout.out_shape = tensor_shape{std::move(dims)};
  return layout;
}

std::string shape_list(const std::vector<tensor_shape>& parts) {
  std::string out;
  for (auto& p : parts)
    out += (out.empty() ? "" : ", ") + p.to_string();
  return out;
}

result<concat_layout> make_concat_layout(const std::string& op,
                                         const std::vector<tensor_shape>& parts,
                                         std::int64_t axis_attr, dtype type) {
  auto& first = parts.front();
  auto rank = first.rank();
  if (rank == 0)
    return make_error(errc::invalid_argument, op + " cannot concatenate scalars");
  auto axis = normalize_axis(axis_attr, rank, (op + " axis").c_str());
  if (!axis)
    return axis.error();
  concat_layout layout;
  std::vector<std::int64_t> dims = first.dims();
  std::int64_t extent = 0;
  for (auto& part : parts) {
    bool fits = part.rank() == rank;
    for (int d = 0; fits && d < rank; ++d)
      fits = d == *axis || part.dim(d) == first.dim(d);
    if (!fits)
      return make_error(errc::invalid_argument,
                        op + " along axis " + std::to_string(*axis) + ": shapes " +
                          shape_list(parts) + " differ in a dimension other than the axis");
    extent += part.dim(*axis);
  }
  dims[static_cast<std::size_t>(*axis)] = extent;
  layout.whole = tensor_shape{dims};
  std::size_t inner = size_of(type);
  for (int d = 0; d < rank; ++d) {
    if (d < *axis)
      layout.outer *= first.dim(d);
    else if (d > *axis)
      inner *= static_cast<std::size_t>(first.dim(d));
  }
  std::size_t offset = 0;
  for (auto& part : parts) {
    auto bytes = static_cast<std::size_t>(part.dim(*axis)) * inner;
    layout.part_row_bytes.push_back(bytes);
    layout.offsets.push_back(offset);
    offset += bytes;
  }
  layout.row_bytes = offset;
  return layout;
}

result<concat_plan> plan_concat(const kernel_context& ctx, std::int64_t axis) {
  auto type = ctx.def().kernel_type;
  if (ctx.num_inputs() == 0)
    return make_error(errc::invalid_argument, "ConcatV2 needs at least one input");
  concat_plan plan;
  std::vector<tensor_shape> shapes;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    AF_RETURN_IF_ERROR(input_status(ctx, i, type));
    shapes.push_back(ctx.input(i).shape());
    plan.parts.push_back(ctx.input(i).raw_data());
  }
  auto layout = make_concat_layout("ConcatV2", shapes, axis, type);
  if (!layout)
    return layout.error();
  plan.layout = std::move(*layout);
  return plan;
}

result<concat_layout> plan_split_to_shapes(const kernel_context& ctx, std::int64_t axis) {
  auto type = ctx.def().kernel_type;
  if (ctx.num_inputs() < 2)
    return make_error(errc::invalid_argument,
                      "SplitToShapesOf needs the gradient and at least one shape input");
  AF_RETURN_IF_ERROR(input_status(ctx, 0, type));
  const tensor& dy = ctx.input(0);
  // Only the shapes of inputs 1.. matter; their values are never read.
  std::vector<tensor_shape> shapes;
  for (int i = 1; i < ctx.num_inputs(); ++i)
    shapes.push_back(ctx.input(i).shape());
  auto layout = make_concat_layout("SplitToShapesOf", shapes, axis, type);
  if (!layout)
    return layout.error();
  if (layout->whole != dy.shape())
    return make_error(errc::invalid_argument,
                      "SplitToShapesOf: a gradient of shape " + dy.shape().to_string() +
                        " cannot be split into shapes " + shape_list(shapes) + " along axis " +
                        std::to_string(axis));
  return layout;
}

} // namespace actorflow

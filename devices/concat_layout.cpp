#include "devices/concat_layout.hpp"

namespace actorflow {

result<int> normalize_axis(std::int64_t axis, int rank, const char* what) {
  if (axis < -rank || axis >= rank)
    return make_error(errc::invalid_argument,
                      std::string{what} + " " + std::to_string(axis) + " is out of range for a tensor of rank " +
                        std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
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

} // namespace actorflow

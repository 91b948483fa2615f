#pragma once
/// Where the parts of a concatenation lie in the whole (and, below, Gather's rows), for
/// ConcatV2 and its gradient SplitToShapesOf on every device: seen as a matrix of `outer` rows (the product of the
/// dimensions before the axis), each part holds one contiguous block of each row of the whole,
/// so a device copies whole blocks (memcpy on the CPU, cudaMemcpy2DAsync on a GPU).
///   auto layout = make_concat_layout("ConcatV2", {a.shape(), b.shape()}, 1, dtype::float32);
///   // part i: layout->part_row_bytes[i] bytes of each row, at byte layout->offsets[i]

#include "devices/kernel.hpp"
#include "graph/dtype.hpp"
#include "graph/status.hpp"
#include "graph/tensor_shape.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace actorflow {

struct concat_layout {
  tensor_shape whole;
  std::int64_t outer = 1;
  /// Bytes of one row of the whole.
  std::size_t row_bytes = 0;
  std::vector<std::size_t> part_row_bytes;
  std::vector<std::size_t> offsets;
};

/// Axis `axis` (negative counts from the end) as an index into a shape of rank `rank`; the
/// error starts with `what` ("ArgMax axis 3 is out of range for a tensor of rank 2").
result<int> normalize_axis(std::int64_t axis, int rank, const char* what);

/// Gather along an axis on every device: params seen as [outer, extent, inner] and the output
/// as [outer, count, inner], out[o, k, i] = params[o, indices[k], i].
struct gather_layout {
  std::int64_t outer = 1;
  std::int64_t extent = 0;
  std::int64_t inner = 1;
  std::int64_t count = 0;
  tensor_shape out_shape;
};

/// The layout of Gather over `params` and `indices` along `axis` (negative counts from the
/// end); an error naming the axis when it is out of range.
result<gather_layout> make_gather_layout(const tensor_shape& params, const tensor_shape& indices,
                                         std::int64_t axis);

/// "[2,3], [2,4]": shapes for messages.
std::string shape_list(const std::vector<tensor_shape>& parts);

/// The layout of `parts` (concrete shapes) concatenated along `axis`; an error, starting with
/// `op`, naming the shapes when they have different ranks or differ other than along the axis.
result<concat_layout> make_concat_layout(const std::string& op,
                                         const std::vector<tensor_shape>& parts,
                                         std::int64_t axis, dtype type);

/// What a ConcatV2 kernel of any device copies: its inputs (at least one, all of the kernel's
/// type, checked) laid out along `axis`, and each input's buffer.
struct concat_plan {
  concat_layout layout;
  std::vector<void*> parts;
};
result<concat_plan> plan_concat(const kernel_context& ctx, std::int64_t axis);

/// What a SplitToShapesOf kernel of any device copies out of its gradient (input 0, of the
/// kernel's type): the layout of the shapes of inputs 1.. along `axis`, whose whole must be the
/// gradient's shape.
result<concat_layout> plan_split_to_shapes(const kernel_context& ctx, std::int64_t axis);

} // namespace actorflow

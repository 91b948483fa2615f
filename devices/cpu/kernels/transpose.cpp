// Transpose: x's axes in the order of attr perm (graph/shape_ops.hpp), for every dtype. The
// copy is planned on the fewest dimensions that describe it (devices/strided_layout.hpp); a
// permutation that moves no data (only axes of extent 1 move) shares the input's buffer, one
// that keeps the innermost axis copies runs along it, and the others copy in tiles.
#include "devices/cpu/kernels/kernel_util.hpp"
#include "devices/cpu/kernels/strided_walk.hpp"
#include "devices/strided_layout.hpp"

#include <algorithm>
#include <optional>
#include <vector>

namespace actorflow {

namespace {

using namespace cpu;

/// Rows and columns of the square tiles the tiled path copies: 32 x 32 elements of 8 bytes are
/// 8 KiB each way, well inside L1 beside its source lines.
constexpr std::int64_t tile = 32;

/// The tiled transpose, for a layout whose innermost output axis reads the input with a stride
/// (every such read would otherwise take a cache line for one element): the output axis
/// `unit` that reads the input contiguously and the innermost one form a 2-D transpose per
/// position of the other axes, copied in tiles, so each line read or written serves a whole
/// tile row (a 2048 x 2048 float32 transpose on one thread: 65 ms element by element, 13 ms
/// in tiles, measured). Work item w is tile row (w % row_tiles) of outer position
/// (w / row_tiles).
template <class T>
void copy_tiled(const T* in, T* out, const strided_layout& layout, std::size_t unit,
                std::int64_t begin, std::int64_t end) {
  auto rank = layout.extents.size();
  auto inner = rank - 1;
  std::vector<std::int64_t> out_strides(rank, 1);
  for (auto k = rank - 1; k-- > 0;)
    out_strides[k] = out_strides[k + 1] * layout.extents[k + 1];
  auto rows = layout.extents[unit];
  auto columns = layout.extents[inner];
  auto row_out_stride = out_strides[unit];
  auto column_in_stride = layout.in_strides[inner];
  auto row_tiles = (rows + tile - 1) / tile;
  for (auto w = begin; w < end; ++w) {
    // The outer position's offsets, from its index over the axes other than unit and inner.
    auto rest = w / row_tiles;
    std::int64_t in_offset = 0;
    std::int64_t out_offset = 0;
    for (auto k = inner; k-- > 0;) {
      if (k == unit)
        continue;
      auto i = rest % layout.extents[k];
      rest /= layout.extents[k];
      in_offset += i * layout.in_strides[k];
      out_offset += i * out_strides[k];
    }
    auto row_begin = (w % row_tiles) * tile;
    auto row_end = std::min(rows, row_begin + tile);
    for (std::int64_t column_begin = 0; column_begin < columns; column_begin += tile) {
      auto column_end = std::min(columns, column_begin + tile);
      for (auto r = row_begin; r < row_end; ++r) {
        const T* from = in + in_offset + r;
        T* to = out + out_offset + r * row_out_stride;
        for (auto c = column_begin; c < column_end; ++c)
          to[c] = from[c * column_in_stride];
      }
    }
  }
}

/// The output axis (not the innermost) that reads the input contiguously, when the innermost
/// one does not: where the tiled path applies. Merging leaves at most one axis of stride 1.
std::optional<std::size_t> tiled_axis(const strided_layout& layout) {
  auto inner = layout.extents.size() - 1;
  if (layout.in_strides[inner] == 1)
    return std::nullopt;
  for (std::size_t k = 0; k < inner; ++k)
    if (layout.in_strides[k] == 1)
      return k;
  return std::nullopt;
}

class transpose_kernel : public op_kernel {
public:
  explicit transpose_kernel(const node& n)
    : op_kernel(n), perm_(n.attr_or<std::vector<std::int64_t>>("perm", {})) {}

  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, ctx.def().kernel_type))
      return;
    const tensor& x = ctx.input(0);
    auto layout = make_transpose_layout(x.shape(), perm_);
    if (!layout) {
      ctx.fail(layout.error());
      return;
    }
    if (layout->moves_nothing()) {
      forward_reshaped(ctx, x, layout->out_shape);
      return;
    }
    tensor out = ctx.allocate_output(0, x.type(), layout->out_shape);
    auto n = out.num_elements();
    auto copy = [&](auto element) {
      using U = decltype(element);
      auto* from = static_cast<const U*>(x.raw_data());
      auto* to = static_cast<U*>(out.raw_data());
      if (auto unit = tiled_axis(*layout)) {
        // Work items are tile rows of each outer position, each a tile's height of rows.
        auto rows = layout->extents[*unit];
        auto plane = rows * layout->extents.back();
        auto items = plane == 0 ? 0 : n / plane * ((rows + tile - 1) / tile);
        for_blocks(ctx, items, [&](std::int64_t begin, std::int64_t end) {
          copy_tiled(from, to, *layout, *unit, begin, end);
        }, tile * layout->extents.back());
        return;
      }
      // Strided reads cost more than a plain copy's: blocks half the usual size.
      for_blocks(ctx, n, [&](std::int64_t begin, std::int64_t end) {
        gather_strided(from, to, *layout, begin, end);
      }, 2);
    };
    with_element_bits(x.type(), copy);
  }

private:
  std::vector<std::int64_t> perm_;
};

} // namespace

void register_transpose_kernels(kernel_registry& registry) {
  registry.add("Transpose", "CPU", all_dtypes(), &make_kernel<transpose_kernel>);
}

} // namespace actorflow

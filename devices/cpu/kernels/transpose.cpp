// Transpose: x's axes in the order of attr perm (graph/shape_ops.hpp), for every dtype. The
// copy is planned on the fewest dimensions that describe it (devices/transpose_layout.hpp); a
// permutation that moves no data (only axes of extent 1 move) shares the input's buffer, one
// that keeps the innermost axis copies runs along it, and the others copy in tiles.
#include "devices/cpu/kernels/kernel_util.hpp"
#include "devices/transpose_layout.hpp"

#include <algorithm>
#include <optional>
#include <vector>

namespace actorflow {

namespace {

using namespace cpu;

/// Output elements [begin, end) of the transpose `layout` describes, from `in` to `out`.
/// Elements are moved as unsigned integers of their size: a transpose never looks at values.
template <class T>
void copy_permuted(const T* in, T* out, const transpose_layout& layout, std::int64_t begin,
                   std::int64_t end) {
  auto rank = layout.extents.size();
  auto& extents = layout.extents;
  auto& strides = layout.in_strides;
  // The output position `begin` as an index per axis, and where it reads in the input.
  std::vector<std::int64_t> index(rank);
  std::int64_t offset = 0;
  auto rest = begin;
  for (auto k = rank; k-- > 0;) {
    index[k] = rest % extents[k];
    rest /= extents[k];
    offset += index[k] * strides[k];
  }
  auto inner = rank - 1;
  auto inner_extent = extents[inner];
  auto inner_stride = strides[inner];
  for (auto i = begin; i < end;) {
    // One run along the innermost output axis, then carry into the outer ones.
    auto run = std::min(inner_extent - index[inner], end - i);
    const T* from = in + offset;
    T* to = out + i;
    for (std::int64_t j = 0; j < run; ++j)
      to[j] = from[j * inner_stride];
    i += run;
    index[inner] += run;
    offset += run * inner_stride;
    if (index[inner] < inner_extent || i >= end)
      continue;
    offset -= inner_extent * inner_stride;
    index[inner] = 0;
    for (auto k = inner; k-- > 0;) {
      ++index[k];
      offset += strides[k];
      if (index[k] < extents[k])
        break;
      offset -= extents[k] * strides[k];
      index[k] = 0;
    }
  }
}

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
void copy_tiled(const T* in, T* out, const transpose_layout& layout, std::size_t unit,
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
std::optional<std::size_t> tiled_axis(const transpose_layout& layout) {
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
      auto same = x.reshaped(layout->out_shape);
      if (same)
        ctx.set_output(0, std::move(*same));
      else
        ctx.fail(same.error());
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
        copy_permuted(from, to, *layout, begin, end);
      }, 2);
    };
    switch (size_of(x.type())) {
      case 1:
        copy(std::uint8_t{});
        break;
      case 2:
        copy(std::uint16_t{});
        break;
      case 4:
        copy(std::uint32_t{});
        break;
      default:
        copy(std::uint64_t{});
        break;
    }
  }

private:
  std::vector<std::int64_t> perm_;
};

} // namespace

void register_transpose_kernels(kernel_registry& registry) {
  registry.add("Transpose", "CPU", all_dtypes(), &make_kernel<transpose_kernel>);
}

} // namespace actorflow

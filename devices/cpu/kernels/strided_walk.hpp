#pragma once
/// Walks the output of a strided copy (devices/strided_layout.hpp: a Transpose or a
/// StridedSlice) in runs along its innermost axis, for the CPU kernels that gather from or
/// scatter into the strided side.
///   for_each_strided_run(layout, begin, end, [&](std::int64_t i, std::int64_t at, std::int64_t n) {
///     for (std::int64_t j = 0; j < n; ++j) out[i + j] = in[at + j * layout.in_strides.back()];
///   });

#include "devices/kernel.hpp"
#include "devices/strided_layout.hpp"
#include "graph/dtype.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace actorflow::cpu {

/// A strided copy that moves nothing (layout.moves_nothing()): output 0 is `t`'s buffer under
/// `shape`, no copy, or the kernel fails.
inline void forward_reshaped(kernel_context& ctx, const tensor& t, const tensor_shape& shape) {
  auto same = t.reshaped(shape);
  if (same)
    ctx.set_output(0, std::move(*same));
  else
    ctx.fail(same.error());
}

/// Calls run(out_index, in_offset, count) for the runs that cover output elements [begin, end):
/// output elements out_index .. out_index + count - 1 lie in the input at in_offset + j *
/// layout.in_strides.back() (layout.in_offset included).
template <class F>
void for_each_strided_run(const strided_layout& layout, std::int64_t begin, std::int64_t end,
                          F&& run) {
  auto rank = layout.extents.size();
  auto& extents = layout.extents;
  auto& strides = layout.in_strides;
  // The output position `begin` as an index per axis, and where it lies in the input.
  std::vector<std::int64_t> index(rank);
  auto offset = layout.in_offset;
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
    // One run along the innermost axis, then carry into the outer ones.
    auto count = std::min(inner_extent - index[inner], end - i);
    run(i, offset, count);
    i += count;
    index[inner] += count;
    offset += count * inner_stride;
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

/// Output elements [begin, end) of `layout` gathered from `in` into `out`.
template <class T>
void gather_strided(const T* in, T* out, const strided_layout& layout, std::int64_t begin,
                    std::int64_t end) {
  auto stride = layout.in_strides.back();
  for_each_strided_run(layout, begin, end, [&](std::int64_t i, std::int64_t at, std::int64_t count) {
    if (stride == 1) {
      std::copy(in + at, in + at + count, out + i);
      return;
    }
    for (std::int64_t j = 0; j < count; ++j)
      out[i + j] = in[at + j * stride];
  });
}

/// Output elements [begin, end) of `layout` taken from `values` and written where they lie in
/// `into` (a StridedSlice's gradient; no two output elements share an input position).
template <class T>
void scatter_strided(const T* values, T* into, const strided_layout& layout, std::int64_t begin,
                     std::int64_t end) {
  auto stride = layout.in_strides.back();
  for_each_strided_run(layout, begin, end, [&](std::int64_t i, std::int64_t at, std::int64_t count) {
    if (stride == 1) {
      std::copy(values + i, values + i + count, into + at);
      return;
    }
    for (std::int64_t j = 0; j < count; ++j)
      into[at + j * stride] = values[i + j];
  });
}

/// Calls copy(U{}) with U the unsigned integer of `type`'s size: copies never look at values.
template <class F>
void with_element_bits(dtype type, F&& copy) {
  switch (size_of(type)) {
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

} // namespace actorflow::cpu

#pragma once
/// Helpers shared by the CPU kernels (internal to devices/cpu/kernels/): Eigen views of tensor
/// memory, parallel loops over contiguous blocks, attribute reading, per-dtype registration and
/// numpy broadcast iteration.
///   add_typed_kernels<relu_kernel, float, double>(registry, "Relu");
///   for_blocks(ctx, n, [&](std::int64_t begin, std::int64_t end) { out(begin, end) = ...; });
///   auto plan = make_broadcast_plan(a.shape(), b.shape());   // then for_each_broadcast_row
/// Only Eigen/Core is used: the Eigen Tensor module would multiply compile times.

#include "devices/concat_layout.hpp"
#include "devices/kernel_attrs.hpp"
#include "devices/cpu/kernels/cpu_kernels.hpp"
#include "devices/kernel.hpp"
#include "devices/thread_pool.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace actorflow::cpu {

// --- Eigen views ---------------------------------------------------------------------------

template <class T>
using array = Eigen::Array<T, Eigen::Dynamic, 1>;
template <class T>
using array_map = Eigen::Map<array<T>>;
template <class T>
using const_array_map = Eigen::Map<const array<T>>;

/// A writable 1-D view of `count` elements at `data`; valid while the memory lives.
template <class T>
array_map<T> view(T* data, std::int64_t count) {
  return array_map<T>(data, static_cast<Eigen::Index>(count));
}
template <class T>
const_array_map<T> view(const T* data, std::int64_t count) {
  return const_array_map<T>(data, static_cast<Eigen::Index>(count));
}
/// A view of elements [begin, end) of a tensor of element type T.
template <class T>
array_map<T> view(const tensor& t, std::int64_t begin, std::int64_t end) {
  return view(t.data<T>() + begin, end - begin);
}
template <class T>
const_array_map<T> const_view(const tensor& t, std::int64_t begin, std::int64_t end) {
  return view(static_cast<const T*>(t.data<T>()) + begin, end - begin);
}

// --- parallel loops ------------------------------------------------------------------------

/// Below this many elements a loop runs inline: handing blocks to the pool costs more than it
/// saves for cheap per-element work.
inline constexpr std::int64_t parallel_threshold = 32 * 1024;

/// Runs fn(begin, end) over contiguous blocks covering [0, n), on the intra-op pool when
/// `n * cost` (cost: rough work per item in elements) reaches parallel_threshold.
template <class F>
void for_blocks(kernel_context& ctx, std::int64_t n, F&& fn, std::int64_t cost = 1) {
  if (n <= 0)
    return;
  if (n * cost < parallel_threshold || n < 2) {
    fn(std::int64_t{0}, n);
    return;
  }
  auto min_block = std::max<std::int64_t>(1, parallel_threshold / 2 / std::max<std::int64_t>(1, cost));
  ctx.intra_op_pool().parallel_for(
    n, [&](std::int64_t begin, std::int64_t end) { fn(begin, end); }, min_block);
}

/// How many pieces a reduction over `n` elements should be split into (1 when small).
inline std::int64_t reduction_chunks(kernel_context& ctx, std::int64_t n) {
  if (n < parallel_threshold)
    return 1;
  auto by_size = n / (parallel_threshold / 2);
  return std::max<std::int64_t>(1, std::min<std::int64_t>(ctx.intra_op_pool().num_threads() + 1, by_size));
}

// --- input checks --------------------------------------------------------------------------

/// Fails the kernel unless input `i` exists, is initialised and has type `expected`
/// (input_status in devices/kernel.hpp).
inline bool check_input(kernel_context& ctx, int i, dtype expected) {
  auto s = input_status(ctx, i, expected);
  if (s.ok())
    return true;
  ctx.fail(std::move(s));
  return false;
}

/// check_input for inputs 0 .. count-1, all of type `expected`.
inline bool check_inputs(kernel_context& ctx, int count, dtype expected) {
  for (int i = 0; i < count; ++i)
    if (!check_input(ctx, i, expected))
      return false;
  return true;
}

// --- registration --------------------------------------------------------------------------

/// Registers Kernel<T> under (op, "CPU", dtype_of<T>()) for each listed T; only those
/// instantiations are compiled.
template <template <class> class Kernel, class... Ts>
void add_typed_kernels(kernel_registry& registry, const std::string& op) {
  (registry.add(kernel_key{op, "CPU", dtype_of<Ts>()}, &make_kernel<Kernel<Ts>>), ...);
}


// --- attributes ----------------------------------------------------------------------------

/// Which dimensions of a rank-`rank` tensor the reduction attr `axes` names (all of them when
/// `axes` is empty); an error for an axis out of range.
inline result<std::vector<bool>> reduced_dimensions(const std::vector<std::int64_t>& axes, int rank) {
  std::vector<bool> reduced(static_cast<std::size_t>(rank), axes.empty());
  for (auto axis : axes) {
    auto a = normalize_axis(axis, rank, "Invalid reduction dimension");
    if (!a)
      return a.error();
    reduced[static_cast<std::size_t>(*a)] = true;
  }
  return reduced;
}

// --- broadcasting --------------------------------------------------------------------------

/// How to walk two broadcast operands in output order. Output dimensions of size 1 are dropped
/// and neighbouring dimensions that broadcast the same way are merged, so that the innermost
/// dimension is as long as possible; inner strides are then 0 (broadcast) or 1 (contiguous),
/// which lets each row run as one vectorised Eigen expression.
struct broadcast_plan {
  tensor_shape out_shape;
  /// Merged output dimensions; at least one.
  std::vector<std::int64_t> dims;
  /// Element strides of each operand per merged dimension; 0 where it broadcasts.
  std::vector<std::int64_t> a_strides;
  std::vector<std::int64_t> b_strides;

  std::int64_t inner() const { return dims.back(); }
  /// Number of innermost rows.
  std::int64_t rows() const {
    std::int64_t r = 1;
    for (std::size_t i = 0; i + 1 < dims.size(); ++i)
      r *= dims[i];
    return r;
  }
};

/// The element strides of an operand of shape `s` against a rank-`rank` broadcast output
/// (numpy aligns trailing dimensions): 0 where it broadcasts.
inline std::vector<std::int64_t> aligned_strides(const tensor_shape& s, int rank) {
  std::vector<std::int64_t> strides(static_cast<std::size_t>(rank), 0);
  std::int64_t stride = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    auto d = s.dim(i);
    strides[static_cast<std::size_t>(rank - s.rank() + i)] = d == 1 ? 0 : stride;
    stride *= d;
  }
  return strides;
}

/// The plan for a op b; an invalid_argument error naming both shapes when they do not broadcast.
inline result<broadcast_plan> make_broadcast_plan(const tensor_shape& a, const tensor_shape& b) {
  auto out = broadcast_shapes(a, b);
  if (!out)
    return out.error();
  broadcast_plan plan;
  plan.out_shape = *out;
  auto rank = out->rank();
  auto sa = aligned_strides(a, rank);
  auto sb = aligned_strides(b, rank);
  for (int i = 0; i < rank; ++i) {
    auto d = out->dim(i);
    if (d == 1)
      continue;
    auto ai = sa[static_cast<std::size_t>(i)];
    auto bi = sb[static_cast<std::size_t>(i)];
    if (!plan.dims.empty() && (ai == 0) == (plan.a_strides.back() == 0) &&
        (bi == 0) == (plan.b_strides.back() == 0)) {
      // Same broadcast pattern as the dimension before: merge (contiguous by construction).
      plan.dims.back() *= d;
      plan.a_strides.back() = ai;
      plan.b_strides.back() = bi;
      continue;
    }
    plan.dims.push_back(d);
    plan.a_strides.push_back(ai);
    plan.b_strides.push_back(bi);
  }
  if (plan.dims.empty()) {
    plan.dims = {1};
    plan.a_strides = {0};
    plan.b_strides = {0};
  }
  return plan;
}

/// Calls fn(out_offset, a_offset, b_offset) for innermost rows [row_begin, row_end) of `plan`;
/// each row has plan.inner() elements with the plan's inner strides.
template <class F>
void for_each_broadcast_row(const broadcast_plan& plan, std::int64_t row_begin,
                            std::int64_t row_end, F&& fn) {
  auto outer_rank = plan.dims.size() - 1;
  // Odometer over the outer dimensions, started at row_begin.
  std::vector<std::int64_t> index(outer_rank, 0);
  std::int64_t a_offset = 0;
  std::int64_t b_offset = 0;
  auto rest = row_begin;
  for (std::size_t i = outer_rank; i-- > 0;) {
    index[i] = rest % plan.dims[i];
    rest /= plan.dims[i];
    a_offset += index[i] * plan.a_strides[i];
    b_offset += index[i] * plan.b_strides[i];
  }
  auto inner = plan.inner();
  for (auto row = row_begin; row < row_end; ++row) {
    fn(row * inner, a_offset, b_offset);
    for (std::size_t i = outer_rank; i-- > 0;) {
      a_offset += plan.a_strides[i];
      b_offset += plan.b_strides[i];
      if (++index[i] < plan.dims[i])
        break;
      a_offset -= index[i] * plan.a_strides[i];
      b_offset -= index[i] * plan.b_strides[i];
      index[i] = 0;
    }
  }
}

} // namespace actorflow::cpu

#pragma once
/// Reductions over any set of axes for the GPU kernels: the input's dimensions become groups
/// (size-1 dimensions dropped, neighbours of the same kind merged, as the CPU's reduction
/// does), kept groups index the outputs and reduced groups the elements each output combines.
///   auto plan = make_reduction_plan(x.shape(), reduced);   // host; reduced[i]: axis i goes
///   auto base = output_base(plan, o);                     // host or device
///   for (r = 0; r < plan.reduced_count; ++r) acc += x[base + reduced_offset(plan, r)];
/// No CUDA headers: the unit tests run this very code on the CPU.

#include "devices/cuda/host_device.hpp"
#include "graph/tensor_shape.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace actorflow::cuda {

/// Kept and reduced groups with their input strides. Plain data: the kernels get it by value.
struct reduction_plan {
  /// Groups of one kind there can be at most (kept and reduced groups alternate, so a rank-16
  /// input is always within it).
  static constexpr int max_groups = 8;
  int kept_rank = 0;
  std::int64_t kept_dims[max_groups] = {};
  std::int64_t kept_strides[max_groups] = {};
  int reduced_rank = 0;
  std::int64_t reduced_dims[max_groups] = {};
  std::int64_t reduced_strides[max_groups] = {};
  /// Outputs (product of kept_dims) and elements per output (product of reduced_dims).
  std::int64_t out_count = 1;
  std::int64_t reduced_count = 1;
  /// Whether the innermost input dimension is kept: neighbouring outputs then read
  /// neighbouring inputs, so one thread per output reads memory coalesced.
  bool inner_kept = true;
};

/// Input offset of output `out_index`'s first element.
AF_HOST_DEVICE inline std::int64_t output_base(const reduction_plan& p, std::int64_t out_index) {
  std::int64_t offset = 0;
  for (int i = p.kept_rank - 1; i >= 0; --i) {
    offset += (out_index % p.kept_dims[i]) * p.kept_strides[i];
    out_index /= p.kept_dims[i];
  }
  return offset;
}

/// Offset, relative to an output's base, of the `reduced_index`-th element it combines.
AF_HOST_DEVICE inline std::int64_t reduced_offset(const reduction_plan& p,
                                                  std::int64_t reduced_index) {
  std::int64_t offset = 0;
  for (int i = p.reduced_rank - 1; i >= 0; --i) {
    offset += (reduced_index % p.reduced_dims[i]) * p.reduced_strides[i];
    reduced_index /= p.reduced_dims[i];
  }
  return offset;
}

/// The plan for reducing a tensor of `shape` over the dimensions `reduced` marks (one flag per
/// dimension); an invalid_argument error when the groups exceed max_groups.
inline result<reduction_plan> make_reduction_plan(const tensor_shape& shape,
                                                  const std::vector<bool>& reduced) {
  reduction_plan p;
  std::int64_t stride = 1;
  bool last_reduced = false;
  bool any = false;
  // Innermost first, so each group's stride is that of its innermost dimension.
  std::vector<std::int64_t> dims[2], strides[2];
  for (int i = shape.rank() - 1; i >= 0; --i) {
    auto d = shape.dim(i);
    bool r = reduced[static_cast<std::size_t>(i)];
    if (d != 1) {
      if (!any)
        p.inner_kept = !r;
      if (any && r == last_reduced) {
        dims[r].back() *= d;
      } else {
        dims[r].push_back(d);
        strides[r].push_back(stride);
      }
      any = true;
      last_reduced = r;
    }
    stride *= d;
  }
  for (int kind = 0; kind < 2; ++kind)
    if (dims[kind].size() > static_cast<std::size_t>(reduction_plan::max_groups))
      return make_error(errc::invalid_argument,
                        "reducing shape " + shape.to_string() + " alternates between kept and "
                        "reduced axes more often than the GPU kernels handle");
  // Back to outermost first.
  auto fill = [](const std::vector<std::int64_t>& from, std::int64_t* to) {
    for (std::size_t i = 0; i < from.size(); ++i)
      to[i] = from[from.size() - 1 - i];
  };
  p.kept_rank = static_cast<int>(dims[0].size());
  fill(dims[0], p.kept_dims);
  fill(strides[0], p.kept_strides);
  p.reduced_rank = static_cast<int>(dims[1].size());
  fill(dims[1], p.reduced_dims);
  fill(strides[1], p.reduced_strides);
  for (int i = 0; i < p.kept_rank; ++i)
    p.out_count *= p.kept_dims[i];
  for (int i = 0; i < p.reduced_rank; ++i)
    p.reduced_count *= p.reduced_dims[i];
  return p;
}

} // namespace actorflow::cuda

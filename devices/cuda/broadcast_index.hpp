#pragma once
/// Numpy broadcasting for the GPU's elementwise kernels: where output element i finds its
/// operands. The host merges dimensions once per launch (size-1 output dimensions dropped,
/// neighbours that broadcast alike merged, as the CPU's broadcast_plan does) into a small
/// fixed-size struct passed by value to the kernel, which maps each output index to operand
/// offsets.
///   auto s = make_broadcast_strides(a.shape(), b.shape());   // host; error if incompatible
///   std::int64_t ia, ib;
///   operand_offsets(*s, i, ia, ib);                          // host or device: out[i] = a[ia] op b[ib]
/// No CUDA headers: the unit tests run this very code on the CPU.

#include "devices/cuda/host_device.hpp"
#include "graph/tensor_shape.hpp"

#include <cstdint>
#include <string>

namespace actorflow::cuda {

/// The merged output dimensions and each operand's element stride per dimension (0 where it
/// broadcasts). Plain data: the kernels get it by value.
struct broadcast_strides {
  /// Merged dimensions there can be at most; shapes that need more are refused (it takes a
  /// rank-17 pattern of alternating broadcasts to get there).
  static constexpr int max_rank = 8;
  int rank = 0;
  std::int64_t dims[max_rank] = {};
  std::int64_t a_strides[max_rank] = {};
  std::int64_t b_strides[max_rank] = {};
  /// Output elements.
  std::int64_t count = 1;
};

/// Offsets into a and b of output element `index` (row-major over s.dims).
AF_HOST_DEVICE inline void operand_offsets(const broadcast_strides& s, std::int64_t index,
                                           std::int64_t& a, std::int64_t& b) {
  a = 0;
  b = 0;
  for (int i = s.rank - 1; i >= 0; --i) {
    auto d = s.dims[i];
    auto coordinate = index % d;
    index /= d;
    a += coordinate * s.a_strides[i];
    b += coordinate * s.b_strides[i];
  }
}

/// The strides for a op b (the output shape is broadcast_shapes(a, b)); an invalid_argument
/// error naming both shapes when they do not broadcast, or when merging leaves more than
/// max_rank dimensions.
inline result<broadcast_strides> make_broadcast_strides(const tensor_shape& a,
                                                        const tensor_shape& b) {
  auto out = broadcast_shapes(a, b);
  if (!out)
    return out.error();
  auto rank = out->rank();
  // Each operand's strides aligned to the output's trailing dimensions; 0 where it has 1.
  auto aligned = [rank](const tensor_shape& s, int i) {
    auto own = i - (rank - s.rank());
    if (own < 0 || s.dim(own) == 1)
      return std::int64_t{0};
    std::int64_t stride = 1;
    for (int j = s.rank() - 1; j > own; --j)
      stride *= s.dim(j);
    return stride;
  };
  broadcast_strides s;
  s.count = out->num_elements();
  for (int i = 0; i < rank; ++i) {
    auto d = out->dim(i);
    if (d == 1)
      continue;
    auto sa = aligned(a, i);
    auto sb = aligned(b, i);
    if (s.rank > 0 && (sa == 0) == (s.a_strides[s.rank - 1] == 0) &&
        (sb == 0) == (s.b_strides[s.rank - 1] == 0)) {
      // Broadcasts like the dimension before it: one longer dimension with the inner strides.
      s.dims[s.rank - 1] *= d;
      s.a_strides[s.rank - 1] = sa;
      s.b_strides[s.rank - 1] = sb;
      continue;
    }
    if (s.rank == broadcast_strides::max_rank)
      return make_error(errc::invalid_argument,
                        "broadcasting shapes " + a.to_string() + " and " + b.to_string() +
                          " needs more than " + std::to_string(broadcast_strides::max_rank) +
                          " merged dimensions, more than the GPU kernels handle");
    s.dims[s.rank] = d;
    s.a_strides[s.rank] = sa;
    s.b_strides[s.rank] = sb;
    ++s.rank;
  }
  return s;
}

} // namespace actorflow::cuda

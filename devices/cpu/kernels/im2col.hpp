#pragma once
/// conv.cpp's im2col for the other convolution kernels (fused_conv.cpp); internal to the CPU
/// kernels. unroll_windows(s, x, first, count, col) writes images [first, first + count) of x
/// as col [count * positions, row]; images_per_chunk(s) bounds such a chunk's scratch.

#include "graph/conv_geometry.hpp"

#include <cstdint>

namespace actorflow::cpu {

template <class T>
void unroll_windows(const conv_sizes& s, const T* x, std::int64_t first, std::int64_t count, T* col);

std::int64_t conv_images_per_chunk(const conv_sizes& s);

} // namespace actorflow::cpu

#pragma once
/// The window arithmetic of the GPU's convolution and pooling kernels (devices/cuda/kernels/
/// conv.cu), on top of graph/conv_geometry.hpp's TensorFlow rules:
///   auto p = make_cudnn_padding(*conv_geometry::make(6, 6, 2, 2, 1, 1, "SAME"));
///   // p.pad_h 0, p.extra_h 1: cuDNN pads 0 on both sides of a copy with one zero row appended
///   dx[i] = pool_gradient_element<true>(x, dy, g, channels, i);   // AvgPoolGrad; host or device
/// No CUDA headers: the unit tests (tests/devices/cuda_conv_geometry.test.cpp) run this very
/// code on the CPU.

#include "devices/cuda/host_device.hpp"
#include "devices/kernel_attrs.hpp"
#include "graph/conv_geometry.hpp"
#include "graph/graph.hpp"
#include "graph/tensor_shape.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace actorflow::cuda {

// Attributes, shapes and sizes: graph/conv_geometry.hpp (window_attr, make_conv_sizes,
// make_pool_geometry), shared with shape inference and the CPU kernels.

// --- cuDNN's padding -------------------------------------------------------------------------

/// How a convolution of geometry g runs on cuDNN, which only pads symmetrically. TensorFlow's
/// SAME pads (out - 1) * stride + k - in rows in all and puts an odd one at the bottom (columns:
/// at the right); cuDNN then gets pad_top on both sides of a copy of the input that has
/// extra_h (0 or 1) rows of zeros appended at the bottom (and extra_w columns at the right), so
/// that its windows are TensorFlow's. VALID, and SAME with an even total, need no copy.
struct cudnn_padding {
  /// cuDNN's symmetric padding: graph/conv_geometry.hpp's pad_top and pad_left.
  std::int64_t pad_h = 0, pad_w = 0;
  /// Zero rows (columns) appended at the bottom (right) of the copy; 0 or 1.
  std::int64_t extra_h = 0, extra_w = 0;
  /// The height and width of what cuDNN sees as the input: the input's plus the extra.
  std::int64_t padded_h = 0, padded_w = 0;

  /// Whether cuDNN needs the padded copy instead of the input itself.
  bool needs_copy() const { return extra_h != 0 || extra_w != 0; }
};

/// The padding rows TensorFlow adds in all along one dimension (0 for VALID, whose windows
/// never pass the end).
inline std::int64_t total_padding(std::int64_t in, std::int64_t out, std::int64_t k,
                                  std::int64_t stride) {
  return std::max<std::int64_t>((out - 1) * stride + k - in, 0);
}

/// cuDNN's arguments for geometry g.
inline cudnn_padding make_cudnn_padding(const conv_geometry& g) {
  cudnn_padding p;
  p.pad_h = g.pad_top;
  p.pad_w = g.pad_left;
  p.extra_h = total_padding(g.in_h, g.out_h, g.k_h, g.stride_h) - 2 * g.pad_top;
  p.extra_w = total_padding(g.in_w, g.out_w, g.k_w, g.stride_w) - 2 * g.pad_left;
  p.padded_h = g.in_h + p.extra_h;
  p.padded_w = g.in_w + p.extra_w;
  return p;
}

/// The output size cuDNN computes (cudnnGetConvolution2dForwardOutputDim) for an input of `in`
/// padded by `pad` on both sides; make_cudnn_padding makes it TensorFlow's.
inline std::int64_t cudnn_output_size(std::int64_t in, std::int64_t pad, std::int64_t k,
                                      std::int64_t stride) {
  return (in + 2 * pad - k) / stride + 1;
}

// --- pooling windows -------------------------------------------------------------------------

/// A half-open range of indices.
struct index_range {
  std::int64_t begin = 0, end = 0;
};

/// The input rows [begin, end) that output row `o`'s window covers inside an input of `in`
/// rows (the CPU kernels' for_each_window, devices/cpu/kernels/conv.cpp); columns alike.
AF_HOST_DEVICE inline index_range window_inside(std::int64_t o, std::int64_t stride,
                                                std::int64_t pad, std::int64_t k, std::int64_t in) {
  auto first = o * stride - pad;
  return {first < 0 ? 0 : first, first + k < in ? first + k : in};
}

/// The output rows [begin, end) whose windows cover input row `i` (of `out` output rows): the
/// rows o with o * stride - pad <= i < o * stride - pad + k. Empty where none does.
AF_HOST_DEVICE inline index_range windows_containing(std::int64_t i, std::int64_t stride,
                                                     std::int64_t pad, std::int64_t k,
                                                     std::int64_t out) {
  auto lowest = i + pad - k + 1; // o * stride must reach this
  auto begin = lowest <= 0 ? 0 : (lowest + stride - 1) / stride;
  auto end = (i + pad) / stride + 1;
  return {begin, end < out ? end : out};
}

/// Where flat NHWC index i of a [batch, h, w, c] tensor is.
struct nhwc_position {
  std::int64_t n, h, w, c;
};

AF_HOST_DEVICE inline nhwc_position position_of(std::int64_t i, std::int64_t h, std::int64_t w,
                                                std::int64_t c) {
  nhwc_position p;
  p.c = i % c;
  i /= c;
  p.w = i % w;
  i /= w;
  p.h = i % h;
  p.n = i / h;
  return p;
}

/// Output element i of MaxPool (Average false) or AvgPool of x [batch, in_h, in_w, c]: the
/// window's elements inside the input visited row by row, as the CPU kernel does, so that the
/// sums round alike. `lowest` is -infinity.
template <bool Average, class T>
AF_HOST_DEVICE T pooled_element(const T* x, const conv_geometry& g, std::int64_t c,
                                std::int64_t i, T lowest) {
  auto p = position_of(i, g.out_h, g.out_w, c);
  auto rows = window_inside(p.h, g.stride_h, g.pad_top, g.k_h, g.in_h);
  auto cols = window_inside(p.w, g.stride_w, g.pad_left, g.k_w, g.in_w);
  T acc = Average ? T(0) : lowest;
  for (auto ih = rows.begin; ih < rows.end; ++ih)
    for (auto iw = cols.begin; iw < cols.end; ++iw) {
      T v = x[((p.n * g.in_h + ih) * g.in_w + iw) * c + p.c];
      // The CPU's std::max(acc, v), so that NaNs are treated alike.
      acc = Average ? acc + v : (acc < v ? v : acc);
    }
  if (Average)
    acc /= static_cast<T>((rows.end - rows.begin) * (cols.end - cols.begin));
  return acc;
}

/// Input element i's gradient under MaxPoolGrad (Average false) or AvgPoolGrad: dy summed over
/// the windows that cover it in the CPU kernel's order (output rows, then columns), so that the
/// sums round as the CPU's do; MaxPoolGrad counts a window only where this element is its first
/// maximum (TensorFlow's choice, the CPU's scan). A gather, so the GPU needs no atomics and is
/// deterministic.
template <bool Average, class T>
AF_HOST_DEVICE T pool_gradient_element(const T* x, const T* dy, const conv_geometry& g,
                                       std::int64_t c, std::int64_t i) {
  auto p = position_of(i, g.in_h, g.in_w, c);
  auto out_rows = windows_containing(p.h, g.stride_h, g.pad_top, g.k_h, g.out_h);
  auto out_cols = windows_containing(p.w, g.stride_w, g.pad_left, g.k_w, g.out_w);
  const T* image = x + p.n * g.in_h * g.in_w * c + p.c;
  T acc = T(0);
  for (auto oh = out_rows.begin; oh < out_rows.end; ++oh) {
    auto rows = window_inside(oh, g.stride_h, g.pad_top, g.k_h, g.in_h);
    for (auto ow = out_cols.begin; ow < out_cols.end; ++ow) {
      auto cols = window_inside(ow, g.stride_w, g.pad_left, g.k_w, g.in_w);
      T d = dy[((p.n * g.out_h + oh) * g.out_w + ow) * c + p.c];
      if (Average) {
        acc += d / static_cast<T>((rows.end - rows.begin) * (cols.end - cols.begin));
        continue;
      }
      auto best_h = rows.begin;
      auto best_w = cols.begin;
      T best = image[(best_h * g.in_w + best_w) * c];
      for (auto ih = rows.begin; ih < rows.end; ++ih)
        for (auto iw = cols.begin; iw < cols.end; ++iw) {
          T v = image[(ih * g.in_w + iw) * c];
          if (v > best) {
            best = v;
            best_h = ih;
            best_w = iw;
          }
        }
      if (best_h == p.h && best_w == p.w)
        acc += d;
    }
  }
  return acc;
}

} // namespace actorflow::cuda

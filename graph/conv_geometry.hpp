#pragma once
/// The geometry of a 2-D convolution or pooling window over NHWC tensors, TensorFlow's rules:
///   VALID: out = ceil((in - k + 1) / stride), no padding;
///   SAME:  out = ceil(in / stride), padding (out - 1) * stride + k - in split with the extra
///          row/column after (bottom/right), as TensorFlow does.
/// Shape inference and every device's kernels use this one definition.
///   auto g = conv_geometry::make(28, 28, 5, 5, 1, 1, "SAME");   // out 28x28, pad 2 / 2

#include "graph/graph.hpp"
#include "graph/status.hpp"
#include "graph/tensor_shape.hpp"

#include <cstdint>
#include <string>
#include <utility>

namespace actorflow {

struct conv_geometry {
  std::int64_t in_h = 0, in_w = 0;
  std::int64_t k_h = 0, k_w = 0;
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t out_h = 0, out_w = 0;
  /// Rows above and columns left of the input that the window sees as padding.
  std::int64_t pad_top = 0, pad_left = 0;

  /// An error names what is wrong: a window larger than a VALID input, a stride below 1, a
  /// padding other than "SAME" or "VALID".
  static result<conv_geometry> make(std::int64_t in_h, std::int64_t in_w, std::int64_t k_h,
                                    std::int64_t k_w, std::int64_t stride_h, std::int64_t stride_w,
                                    const std::string& padding);
};

/// attr `name` [1, h, w, 1] of node n (strides, ksize) as (h, w); an error naming the
/// attribute when it is missing or of another form.
result<std::pair<std::int64_t, std::int64_t>> window_attr(const node& n, const char* name);

/// Ok when `shape` (of `what`, "the input") has rank 4 (NHWC) or an unknown rank.
status expect_rank4(const tensor_shape& shape, const char* what);

/// A convolution's sizes: input x [batch, in_h, in_w, channels], filter HWIO
/// [k_h, k_w, channels, filters], output [batch, out_h, out_w, filters].
struct conv_sizes {
  std::int64_t batch = 0, channels = 0, filters = 0;
  conv_geometry g;

  tensor_shape output_shape() const { return tensor_shape{batch, g.out_h, g.out_w, filters}; }
  /// Whether the convolution sums nothing or makes nothing (a zero dimension anywhere).
  bool empty() const {
    return batch == 0 || channels == 0 || filters == 0 || g.out_h == 0 || g.out_w == 0 ||
           g.in_h == 0 || g.in_w == 0;
  }
  /// Elements of one unrolled (im2col) row.
  std::int64_t row() const { return g.k_h * g.k_w * channels; }
  /// Output positions per image.
  std::int64_t positions() const { return g.out_h * g.out_w; }
};

/// The sizes of node n's convolution of x by filter (concrete shapes), checked: the errors of
/// every device's kernels.
result<conv_sizes> make_conv_sizes(const node& n, const tensor_shape& x,
                                   const tensor_shape& filter);

/// The window geometry of node n's pooling of x (a concrete shape), checked.
result<conv_geometry> make_pool_geometry(const node& n, const tensor_shape& x);

} // namespace actorflow

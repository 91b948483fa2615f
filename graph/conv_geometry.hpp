#pragma once
/// The geometry of a 2-D convolution or pooling window over NHWC tensors, TensorFlow's rules:
///   VALID: out = ceil((in - k + 1) / stride), no padding;
///   SAME:  out = ceil(in / stride), padding (out - 1) * stride + k - in split with the extra
///          row/column after (bottom/right), as TensorFlow does.
/// Shape inference and every device's kernels use this one definition.
///   auto g = conv_geometry::make(28, 28, 5, 5, 1, 1, "SAME");   // out 28x28, pad 2 / 2

#include "graph/status.hpp"

#include <cstdint>
#include <string>

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

} // namespace actorflow

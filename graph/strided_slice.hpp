#pragma once
/// TensorFlow's StridedSlice: numpy's basic indexing (x[1:5:2, ..., tf.newaxis, 3]) as one op,
/// and its gradient.
///   auto rows = ops::strided_slice(x, {1}, {5}, {2});            // x[1:5:2]
///   strided_slice_spec last;                                     // x[..., -1]
///   last.begin = {0, -1}; last.end = {0, 0}; last.strides = {1, 1};
///   last.ellipsis_mask = 1; last.shrink_axis_mask = 2;
///   auto y = ops::strided_slice(x, last);
/// Entry i of begin/end/strides is one index of the subscript; bit i of a mask says how to read
/// it: begin_mask/end_mask (that bound is left out, as in `:5` or `1:`), ellipsis_mask (`...`:
/// as many whole axes as the other entries leave), new_axis_mask (tf.newaxis: an axis of 1) and
/// shrink_axis_mask (an integer index: that axis taken at begin and dropped). Without an
/// ellipsis the axes after the last entry are taken whole. Bounds clamp and negative ones count
/// from the end, as Python's do; a shrinking index out of range is an error.
/// Unlike TensorFlow, begin, end and strides are attributes (int64 lists, like Transpose's
/// perm), so shape inference knows them; an index that is a tensor is a Gather.

#include "graph/graph.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace actorflow {

class op_registry;
class gradient_registry;

/// A StridedSlice's subscript: its attributes.
struct strided_slice_spec {
  std::vector<std::int64_t> begin;
  std::vector<std::int64_t> end;
  std::vector<std::int64_t> strides;
  std::int64_t begin_mask = 0;
  std::int64_t end_mask = 0;
  std::int64_t ellipsis_mask = 0;
  std::int64_t new_axis_mask = 0;
  std::int64_t shrink_axis_mask = 0;

  /// The spec a StridedSlice or StridedSliceGrad node carries.
  static strided_slice_spec of(const node& n);
  /// The node attributes that carry it.
  std::map<std::string, attr_value> attrs() const;
};

/// What a subscript takes from one input axis.
struct sliced_axis {
  /// The first index taken; meaningful when length > 0.
  std::int64_t start = 0;
  /// The step between indices taken (never 0; negative walks backwards).
  std::int64_t stride = 1;
  /// How many indices are taken; -1 when the axis's size is not known.
  std::int64_t length = -1;
  /// Taken at the single index `start` and dropped from the output.
  bool shrink = false;
};

/// A subscript resolved against an input shape.
struct strided_slice_plan {
  /// One per input axis; empty when the input's rank is not known.
  std::vector<sliced_axis> axes;
  /// The output shape (new axes in, shrunk ones out); of unknown rank when the input's is.
  tensor_shape out_shape;
};

/// `spec` applied to a (possibly partial) input shape. An invalid_argument error names
/// `node_name`, the entry at fault and the shape: lists of different lengths, a stride of 0,
/// two ellipses, more indices than axes, a shrinking index out of range.
result<strided_slice_plan> plan_strided_slice(const tensor_shape& in, const strided_slice_spec& spec,
                                              const std::string& node_name);

/// StridedSlice and StridedSliceGrad (graph/standard_ops.cpp calls it).
void register_strided_slice_ops(op_registry& registry);
/// Their gradients (graph/gradients.cpp calls it).
void register_strided_slice_gradients(gradient_registry& registry);

namespace ops {

/// "StridedSlice": x[spec], any dtype.
output strided_slice(output x, const strided_slice_spec& spec,
                     const std::string& name = "strided_slice");
/// x[begin[0]:end[0]:strides[0], ...] on the leading axes (strides empty: all 1).
output strided_slice(output x, std::vector<std::int64_t> begin, std::vector<std::int64_t> end,
                     std::vector<std::int64_t> strides = {},
                     const std::string& name = "strided_slice");

/// "StridedSliceGrad": zeros of x's shape (x is read only for its run-time shape) with dy at the
/// elements StridedSlice(x, spec) takes; dy has that slice's shape and x's dtype. TensorFlow's
/// takes the shape as a tensor and the subscript as inputs.
output strided_slice_grad(output x, output dy, const strided_slice_spec& spec,
                          const std::string& name = "StridedSliceGrad");

} // namespace ops

} // namespace actorflow

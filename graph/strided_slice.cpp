// StridedSlice and StridedSliceGrad: the subscript's meaning, shape inference, builders and
// gradients (graph/strided_slice.hpp).
#include "graph/strided_slice.hpp"

#include "graph/gradients.hpp"
#include "graph/op_registry.hpp"
#include "graph/ops.hpp"

#include <algorithm>

namespace actorflow {

namespace {

/// Masks are int64 attributes: a subscript has at most this many entries.
constexpr std::size_t max_entries = 63;

bool bit(std::int64_t mask, std::size_t i) { return ((mask >> i) & 1) != 0; }

std::string list_string(const std::vector<std::int64_t>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i)
    out += (i > 0 ? "," : "") + std::to_string(values[i]);
  return out + "]";
}

/// A bound of a stepping (not shrinking) entry on an axis of known size `dim`, as Python's
/// slice.indices resolves it: negative counts from the end, then clamped to the indices a walk
/// in the stride's direction can start or stop at.
std::int64_t resolve_bound(std::int64_t bound, std::int64_t dim, std::int64_t stride) {
  if (bound < 0)
    bound += dim;
  return stride > 0 ? std::clamp<std::int64_t>(bound, 0, dim)
                    : std::clamp<std::int64_t>(bound, -1, dim - 1);
}

/// The entry's indices on an axis of `dim` (-1: unknown) for the entry at `i`.
result<sliced_axis> slice_axis(const strided_slice_spec& spec, std::size_t i, std::int64_t dim,
                               int axis, const tensor_shape& in, const std::string& node_name) {
  sliced_axis taken;
  taken.stride = spec.strides[i];
  auto where = [&] {
    return "StridedSlice '" + node_name + "': entry " + std::to_string(i) + " (dimension " +
           std::to_string(axis) + " of input shape " + in.to_string() + ")";
  };
  if (taken.stride == 0)
    return make_error(errc::invalid_argument, where() + " has stride 0");
  if (bit(spec.shrink_axis_mask, i)) {
    taken.shrink = true;
    taken.stride = 1;
    taken.length = 1;
    auto index = bit(spec.begin_mask, i) ? 0 : spec.begin[i];
    if (dim < 0) {
      taken.start = index;
      return taken;
    }
    if (index < -dim || index >= dim)
      return make_error(errc::invalid_argument,
                        where() + ": index " + std::to_string(index) + " is out of bounds");
    taken.start = index < 0 ? index + dim : index;
    return taken;
  }
  if (dim < 0)
    return taken;
  auto forward = taken.stride > 0;
  auto first = bit(spec.begin_mask, i) ? (forward ? 0 : dim - 1)
                                       : resolve_bound(spec.begin[i], dim, taken.stride);
  auto stop = bit(spec.end_mask, i) ? (forward ? dim : -1)
                                    : resolve_bound(spec.end[i], dim, taken.stride);
  auto span = forward ? stop - first : first - stop;
  auto step = forward ? taken.stride : -taken.stride;
  taken.start = first;
  taken.length = span <= 0 ? 0 : (span + step - 1) / step;
  return taken;
}

sliced_axis whole_axis(std::int64_t dim) {
  sliced_axis taken;
  taken.length = dim;
  return taken;
}

status strided_slice_shape(shape_context& c) {
  auto plan = plan_strided_slice(c.input_shapes[0], strided_slice_spec::of(c.n), c.n.name);
  if (!plan)
    return plan.error();
  c.set_output(0, c.input_types[0], plan->out_shape);
  return {};
}

status strided_slice_grad_shape(shape_context& c) {
  // The subscript is checked against x's shape here, as the forward op's was.
  auto plan = plan_strided_slice(c.input_shapes[0], strided_slice_spec::of(c.n), c.n.name);
  if (!plan)
    return plan.error();
  if (c.input_types[1] != c.input_types[0])
    return make_error(errc::invalid_argument, "StridedSliceGrad '" + c.n.name + "': dy is " +
                                                to_string(c.input_types[1]) + " but x is " +
                                                to_string(c.input_types[0]));
  if (!plan->out_shape.is_compatible_with(c.input_shapes[1]))
    return make_error(errc::invalid_argument,
                      "StridedSliceGrad '" + c.n.name + "': dy has shape " +
                        c.input_shapes[1].to_string() + " but the slice of " +
                        c.input_shapes[0].to_string() + " has shape " + plan->out_shape.to_string());
  c.set_output(0, c.input_types[1], c.input_shapes[0]);
  return {};
}

status strided_slice_grad(graph& g, const node& op, const std::vector<output>& dy,
                          std::vector<output>& dx) {
  dx[0] = ops::strided_slice_grad(input_of(g, op, 0), dy[0], strided_slice_spec::of(op), "StridedSliceGrad");
  return {};
}

status strided_slice_grad_grad(graph&, const node& op, const std::vector<output>& dy,
                               std::vector<output>& dx) {
  // Linear in dy: its gradient slices the incoming one. x gives only its shape.
  dx[1] = ops::strided_slice(dy[0], strided_slice_spec::of(op), "strided_slice");
  return {};
}

} // namespace

strided_slice_spec strided_slice_spec::of(const node& n) {
  strided_slice_spec spec;
  spec.begin = n.attr_or<std::vector<std::int64_t>>("begin", {});
  spec.end = n.attr_or<std::vector<std::int64_t>>("end", {});
  spec.strides = n.attr_or<std::vector<std::int64_t>>("strides", {});
  spec.begin_mask = n.attr_or<std::int64_t>("begin_mask", 0);
  spec.end_mask = n.attr_or<std::int64_t>("end_mask", 0);
  spec.ellipsis_mask = n.attr_or<std::int64_t>("ellipsis_mask", 0);
  spec.new_axis_mask = n.attr_or<std::int64_t>("new_axis_mask", 0);
  spec.shrink_axis_mask = n.attr_or<std::int64_t>("shrink_axis_mask", 0);
  return spec;
}

std::map<std::string, attr_value> strided_slice_spec::attrs() const {
  return {{"begin", begin},
          {"end", end},
          {"strides", strides},
          {"begin_mask", begin_mask},
          {"end_mask", end_mask},
          {"ellipsis_mask", ellipsis_mask},
          {"new_axis_mask", new_axis_mask},
          {"shrink_axis_mask", shrink_axis_mask}};
}

result<strided_slice_plan> plan_strided_slice(const tensor_shape& in, const strided_slice_spec& spec,
                                              const std::string& node_name) {
  auto fail = [&](const std::string& what) {
    return make_error(errc::invalid_argument, "StridedSlice '" + node_name + "': " + what);
  };
  auto entries = spec.begin.size();
  if (spec.end.size() != entries || spec.strides.size() != entries)
    return fail("begin " + list_string(spec.begin) + ", end " + list_string(spec.end) +
                " and strides " + list_string(spec.strides) + " must have one length");
  if (entries > max_entries)
    return fail(std::to_string(entries) + " indices; a subscript takes at most " +
                std::to_string(max_entries));
  std::size_t ellipses = 0;
  std::size_t indexing = 0;  // entries that take an input axis each
  for (std::size_t i = 0; i < entries; ++i) {
    if (bit(spec.ellipsis_mask, i))
      ++ellipses;
    else if (!bit(spec.new_axis_mask, i))
      ++indexing;
  }
  if (ellipses > 1)
    return fail("a subscript takes at most one ellipsis, ellipsis_mask is " +
                std::to_string(spec.ellipsis_mask));
  strided_slice_plan plan;
  if (!in.rank_known()) {
    for (std::size_t i = 0; i < entries; ++i)
      if (spec.strides[i] == 0 && !bit(spec.ellipsis_mask, i) && !bit(spec.new_axis_mask, i))
        return fail("entry " + std::to_string(i) + " has stride 0");
    plan.out_shape = tensor_shape::unknown();
    return plan;
  }
  auto rank = static_cast<std::size_t>(in.rank());
  if (indexing > rank)
    return fail(std::to_string(indexing) + " indices for input shape " + in.to_string() +
                " of rank " + std::to_string(rank));
  std::vector<std::int64_t> out_dims;
  auto take_whole = [&](std::size_t count) {
    for (std::size_t k = 0; k < count; ++k) {
      auto dim = in.dim(static_cast<int>(plan.axes.size()));
      plan.axes.push_back(whole_axis(dim));
      out_dims.push_back(dim);
    }
  };
  for (std::size_t i = 0; i < entries; ++i) {
    if (bit(spec.ellipsis_mask, i)) {
      take_whole(rank - indexing);
      continue;
    }
    if (bit(spec.new_axis_mask, i)) {
      out_dims.push_back(1);
      continue;
    }
    auto axis = static_cast<int>(plan.axes.size());
    auto taken = slice_axis(spec, i, in.dim(axis), axis, in, node_name);
    if (!taken)
      return taken.error();
    plan.axes.push_back(*taken);
    if (!taken->shrink)
      out_dims.push_back(taken->length);
  }
  take_whole(rank - plan.axes.size());
  plan.out_shape = tensor_shape{out_dims};
  return plan;
}

void register_strided_slice_ops(op_registry& r) {
  r.add(op_def{"StridedSlice", 1, false, false, strided_slice_shape});
  op_def grad{"StridedSliceGrad", 2, false, false, strided_slice_grad_shape};
  grad.shape_only_inputs = {0};
  r.add(std::move(grad));
}

void register_strided_slice_gradients(gradient_registry& r) {
  r.add("StridedSlice", strided_slice_grad);
  r.add("StridedSliceGrad", strided_slice_grad_grad);
}

namespace ops {

output strided_slice(output x, const strided_slice_spec& spec, const std::string& name) {
  return make(*x.owner, "StridedSlice", name, {x}, spec.attrs());
}

output strided_slice(output x, std::vector<std::int64_t> begin, std::vector<std::int64_t> end,
                     std::vector<std::int64_t> strides, const std::string& name) {
  strided_slice_spec spec;
  if (strides.empty())
    strides.assign(begin.size(), 1);
  spec.begin = std::move(begin);
  spec.end = std::move(end);
  spec.strides = std::move(strides);
  return strided_slice(x, spec, name);
}

output strided_slice_grad(output x, output dy, const strided_slice_spec& spec,
                          const std::string& name) {
  return make(*x.owner, "StridedSliceGrad", name, {x, dy}, spec.attrs());
}

} // namespace ops

} // namespace actorflow

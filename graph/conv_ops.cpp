// Convolution and pooling ops over NHWC tensors (TensorFlow's layout; filters HWIO):
//   Conv2D(x, filter)                     attrs strides [1, sh, sw, 1], padding "SAME"/"VALID"
//   Conv2DBackpropInput(x, filter, dy)    the gradient for x (x gives only its shape: where
//                                         TensorFlow passes input_sizes, as SumToShapeOf does)
//   Conv2DBackpropFilter(x, filter, dy)   the gradient for the filter (filter gives its shape)
//   MaxPool(x), AvgPool(x)                attrs ksize [1, kh, kw, 1], strides, padding
//   MaxPoolGrad(x, y, dy)                 dy routed to each window's first maximum in x
//   AvgPoolGrad(x, dy)                    dy spread evenly over each window's real elements
#include "graph/conv_geometry.hpp"
#include "graph/op_registry.hpp"

#include <algorithm>
#include <functional>

namespace actorflow {

result<conv_geometry> conv_geometry::make(std::int64_t in_h, std::int64_t in_w, std::int64_t k_h,
                                          std::int64_t k_w, std::int64_t stride_h,
                                          std::int64_t stride_w, const std::string& padding) {
  if (stride_h < 1 || stride_w < 1)
    return make_error(errc::invalid_argument, "strides must be at least 1, got " +
                                                std::to_string(stride_h) + "x" +
                                                std::to_string(stride_w));
  if (k_h < 1 || k_w < 1)
    return make_error(errc::invalid_argument, "the window must be at least 1x1, got " +
                                                std::to_string(k_h) + "x" + std::to_string(k_w));
  conv_geometry g;
  g.in_h = in_h;
  g.in_w = in_w;
  g.k_h = k_h;
  g.k_w = k_w;
  g.stride_h = stride_h;
  g.stride_w = stride_w;
  if (padding == "VALID") {
    if (in_h < k_h || in_w < k_w)
      return make_error(errc::invalid_argument,
                        "a " + std::to_string(k_h) + "x" + std::to_string(k_w) +
                          " window does not fit a " + std::to_string(in_h) + "x" +
                          std::to_string(in_w) + " input with VALID padding");
    g.out_h = (in_h - k_h) / stride_h + 1;
    g.out_w = (in_w - k_w) / stride_w + 1;
  } else if (padding == "SAME") {
    g.out_h = (in_h + stride_h - 1) / stride_h;
    g.out_w = (in_w + stride_w - 1) / stride_w;
    g.pad_top = std::max<std::int64_t>((g.out_h - 1) * stride_h + k_h - in_h, 0) / 2;
    g.pad_left = std::max<std::int64_t>((g.out_w - 1) * stride_w + k_w - in_w, 0) / 2;
  } else {
    return make_error(errc::invalid_argument,
                      "padding must be \"SAME\" or \"VALID\", got \"" + padding + "\"");
  }
  return g;
}

result<std::pair<std::int64_t, std::int64_t>> window_attr(const node& n, const char* name) {
  auto* v = n.attr<std::vector<std::int64_t>>(name);
  if (v == nullptr || v->size() != 4 || (*v)[0] != 1 || (*v)[3] != 1)
    return make_error(errc::invalid_argument,
                      std::string{"attribute '"} + name +
                        "' must be [1, height, width, 1] (NHWC; no batch or channel strides)");
  return std::make_pair((*v)[1], (*v)[2]);
}

status expect_rank4(const tensor_shape& shape, const char* what) {
  if (shape.rank_known() && shape.rank() != 4)
    return make_error(errc::invalid_argument, std::string{what} +
                                                " must have rank 4 (NHWC), got " +
                                                shape.to_string());
  return {};
}

result<conv_sizes> make_conv_sizes(const node& n, const tensor_shape& x,
                                   const tensor_shape& filter) {
  AF_RETURN_IF_ERROR(expect_rank4(x, "the input"));
  if (filter.rank() != 4)
    return make_error(errc::invalid_argument,
                      "the filter must have rank 4 ([height, width, in, out]), got " +
                        filter.to_string());
  if (x.dim(3) != filter.dim(2))
    return make_error(errc::invalid_argument,
                      "the input " + x.to_string() + " has " + std::to_string(x.dim(3)) +
                        " channels but the filter " + filter.to_string() + " expects " +
                        std::to_string(filter.dim(2)));
  auto strides = window_attr(n, "strides");
  if (!strides)
    return strides.error();
  auto g = conv_geometry::make(x.dim(1), x.dim(2), filter.dim(0), filter.dim(1), strides->first,
                               strides->second, n.attr_or<std::string>("padding", ""));
  if (!g)
    return g.error();
  return conv_sizes{x.dim(0), x.dim(3), filter.dim(3), *g};
}

result<conv_geometry> make_pool_geometry(const node& n, const tensor_shape& x) {
  AF_RETURN_IF_ERROR(expect_rank4(x, "the input"));
  auto ksize = window_attr(n, "ksize");
  if (!ksize)
    return ksize.error();
  auto strides = window_attr(n, "strides");
  if (!strides)
    return strides.error();
  return conv_geometry::make(x.dim(1), x.dim(2), ksize->first, ksize->second, strides->first,
                             strides->second, n.attr_or<std::string>("padding", ""));
}

namespace {

status error(const std::string& message) { return make_error(errc::invalid_argument, message); }

std::string padding_of(const node& n) { return n.attr_or<std::string>("padding", ""); }

status require_float(const shape_context& c) {
  for (auto t : c.input_types)
    if (t != c.input_types[0])
      return error(std::string{"inputs have different dtypes: "} + to_string(c.input_types[0]) +
                   " and " + to_string(t));
  if (!is_floating(c.input_types[0]))
    return error(std::string{"expects float32 or float64 inputs, got "} +
                 to_string(c.input_types[0]));
  return {};
}

/// Output height and width for an input of `s` (unknown stays unknown).
result<std::pair<std::int64_t, std::int64_t>> out_size(const tensor_shape& s, std::int64_t kh,
                                                      std::int64_t kw, std::int64_t sh,
                                                      std::int64_t sw, const std::string& padding) {
  if (!s.rank_known() || s.dim(1) < 0 || s.dim(2) < 0) {
    // Still check what can be checked.
    auto probe = conv_geometry::make(kh, kw, kh, kw, sh, sw, padding);
    if (!probe)
      return probe.error();
    return std::make_pair(std::int64_t{-1}, std::int64_t{-1});
  }
  auto g = conv_geometry::make(s.dim(1), s.dim(2), kh, kw, sh, sw, padding);
  if (!g)
    return g.error();
  return std::make_pair(g->out_h, g->out_w);
}

status conv2d(shape_context& c) {
  AF_RETURN_IF_ERROR(require_float(c));
  auto& x = c.input_shapes[0];
  auto& f = c.input_shapes[1];
  AF_RETURN_IF_ERROR(expect_rank4(x, "the input"));
  if (f.rank_known() && f.rank() != 4)
    return error("the filter must have rank 4 ([height, width, in, out]), got " + f.to_string());
  auto strides = window_attr(c.n, "strides");
  if (!strides)
    return strides.error();
  if (!f.rank_known() || f.dim(0) < 0 || f.dim(1) < 0)
    return error("Conv2D needs the filter's height and width, got " + f.to_string());
  if (x.rank_known() && x.dim(3) >= 0 && f.dim(2) >= 0 && x.dim(3) != f.dim(2))
    return error("the input has " + std::to_string(x.dim(3)) + " channels but the filter expects " +
                 std::to_string(f.dim(2)));
  auto out = out_size(x, f.dim(0), f.dim(1), strides->first, strides->second, padding_of(c.n));
  if (!out)
    return out.error();
  c.set_output(0, c.input_types[0],
               tensor_shape{x.rank_known() ? x.dim(0) : -1, out->first, out->second, f.dim(3)});
  return {};
}

status pool(shape_context& c) {
  AF_RETURN_IF_ERROR(require_float(c));
  auto& x = c.input_shapes[0];
  AF_RETURN_IF_ERROR(expect_rank4(x, "the input"));
  auto ksize = window_attr(c.n, "ksize");
  if (!ksize)
    return ksize.error();
  auto strides = window_attr(c.n, "strides");
  if (!strides)
    return strides.error();
  auto out = out_size(x, ksize->first, ksize->second, strides->first, strides->second,
                      padding_of(c.n));
  if (!out)
    return out.error();
  c.set_output(0, c.input_types[0],
               tensor_shape{x.rank_known() ? x.dim(0) : -1, out->first, out->second,
                            x.rank_known() ? x.dim(3) : -1});
  return {};
}

/// Output 0: input `from`'s dtype and shape (the gradient ops).
std::function<status(shape_context&)> like_input(int from) {
  return [from](shape_context& c) {
    AF_RETURN_IF_ERROR(require_float(c));
    c.set_output(0, c.input_types[0], c.input_shapes[static_cast<std::size_t>(from)]);
    return status{};
  };
}

} // namespace

void register_conv_ops(op_registry& r) {
  op_def forward{"Conv2D", 2, false, false, conv2d};
  forward.bf16_compute = true;
  r.add(std::move(forward));
  op_def backprop_input{"Conv2DBackpropInput", 3, false, false, like_input(0)};
  backprop_input.shape_only_inputs = {0};
  backprop_input.bf16_compute = true;
  r.add(std::move(backprop_input));
  op_def backprop_filter{"Conv2DBackpropFilter", 3, false, false, like_input(1)};
  backprop_filter.bf16_compute = true;
  r.add(std::move(backprop_filter));
  r.add(op_def{"MaxPool", 1, false, false, pool});
  r.add(op_def{"AvgPool", 1, false, false, pool});
  r.add(op_def{"MaxPoolGrad", 3, false, false, like_input(0)});
  r.add(op_def{"AvgPoolGrad", 2, false, false, like_input(0)});
}

} // namespace actorflow

#pragma once
/// Reading kernels' attributes, for the kernels of every device (no Eigen, no CUDA here):
///   auto shape = concrete_shape_attr(n, "shape");   // or "node 'x' (Fill): attribute 'shape'
///   if (!shape) return shape.error();               //     must be a fully defined shape"

#include "devices/kernel.hpp"
#include "graph/graph.hpp"
#include "graph/status.hpp"
#include "graph/tensor_shape.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace actorflow {

/// A shape attribute stored either as a tensor_shape or as a list of dimensions; nullopt when
/// absent or of another type.
inline std::optional<tensor_shape> shape_attr(const node& n, const std::string& key) {
  if (auto* s = n.attr<tensor_shape>(key))
    return *s;
  if (auto* dims = n.attr<std::vector<std::int64_t>>(key))
    return tensor_shape{*dims};
  return std::nullopt;
}

/// An error for a missing or malformed attribute, naming the node and the attribute.
inline status bad_attr(const node& n, const std::string& key, const std::string& expected) {
  return make_error(errc::invalid_argument, "node '" + n.name + "' (" + n.op +
                                              "): attribute '" + key + "' must be " + expected);
}

/// A concrete output shape from an attribute: fully defined, no negative dimension.
inline result<tensor_shape> concrete_shape_attr(const node& n, const std::string& key) {
  auto s = shape_attr(n, key);
  if (!s || !s->fully_defined())
    return bad_attr(n, key, "a fully defined shape");
  return *s;
}

/// Makes a Kernel(node, axis) once the required integer attribute "axis" is read (ConcatV2 and
/// SplitToShapesOf on every device).
template <class Kernel>
result<std::unique_ptr<op_kernel>> make_with_axis(const node& n) {
  auto* axis = n.attr<std::int64_t>("axis");
  if (axis == nullptr)
    return bad_attr(n, "axis", "an integer");
  return std::unique_ptr<op_kernel>{std::make_unique<Kernel>(n, *axis)};
}

} // namespace actorflow

// Transpose, Shape, Size and Rank: definitions, shape inference, builders and gradients
// (graph/shape_ops.hpp).
#include "graph/shape_ops.hpp"

#include "graph/gradients.hpp"
#include "graph/op_registry.hpp"
#include "graph/ops.hpp"

namespace actorflow {

namespace {

status error(const std::string& message) { return make_error(errc::invalid_argument, message); }

std::string list_string(const std::vector<std::int64_t>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i)
    out += (i > 0 ? "," : "") + std::to_string(values[i]);
  return out + "]";
}

std::vector<std::int64_t> perm_of(const node& n) {
  return n.attr_or<std::vector<std::int64_t>>("perm", {});
}

status transpose_shape(shape_context& c) {
  auto perm = perm_of(c.n);
  auto& in = c.input_shapes[0];
  if (!in.rank_known()) {
    // A given perm fixes the rank; the reversal of an unknown rank does not.
    if (perm.empty()) {
      c.set_output(0, c.input_types[0], tensor_shape::unknown());
      return {};
    }
    AF_RETURN_IF_ERROR(transpose_permutation(perm, static_cast<int>(perm.size())).error());
    c.set_output(0, c.input_types[0], tensor_shape{std::vector<std::int64_t>(perm.size(), -1)});
    return {};
  }
  auto axes = transpose_permutation(perm, in.rank());
  if (!axes)
    return axes.error();
  std::vector<std::int64_t> dims;
  for (auto axis : *axes)
    dims.push_back(in.dim(axis));
  c.set_output(0, c.input_types[0], tensor_shape{dims});
  return {};
}

result<dtype> index_type(const node& n) {
  auto type = n.attr_or<dtype>("out_type", dtype::int32);
  if (type != dtype::int32 && type != dtype::int64)
    return error(n.op + ": out_type must be int32 or int64, not " + to_string(type));
  return type;
}

status shape_shape(shape_context& c) {
  auto type = index_type(c.n);
  if (!type)
    return type.error();
  auto& in = c.input_shapes[0];
  c.set_output(0, *type, tensor_shape{in.rank_known() ? std::int64_t{in.rank()} : -1});
  return {};
}

status size_shape(shape_context& c) {
  auto type = index_type(c.n);
  if (!type)
    return type.error();
  c.set_output(0, *type, tensor_shape{});
  return {};
}

status rank_shape(shape_context& c) {
  c.set_output(0, dtype::int32, tensor_shape{});
  return {};
}

status transpose_grad(graph&, const node& op, const std::vector<output>& dy,
                      std::vector<output>& dx) {
  dx[0] = ops::transpose(dy[0], inverse_permutation(perm_of(op)), "transpose");
  return {};
}

} // namespace

result<std::vector<int>> transpose_permutation(const std::vector<std::int64_t>& perm, int rank) {
  std::vector<int> axes;
  if (perm.empty()) {
    for (int i = rank - 1; i >= 0; --i)
      axes.push_back(i);
    return axes;
  }
  if (static_cast<std::int64_t>(perm.size()) != rank)
    return error("Transpose: perm " + list_string(perm) + " has " + std::to_string(perm.size()) +
                 " entries for an input of rank " + std::to_string(rank));
  std::vector<bool> seen(static_cast<std::size_t>(rank), false);
  for (auto p : perm) {
    if (p < 0 || p >= rank)
      return error("Transpose: perm " + list_string(perm) + ": " + std::to_string(p) +
                   " is out of range [0 .. " + std::to_string(rank) + ")");
    if (seen[static_cast<std::size_t>(p)])
      return error("Transpose: perm " + list_string(perm) + " names axis " + std::to_string(p) +
                   " twice");
    seen[static_cast<std::size_t>(p)] = true;
    axes.push_back(static_cast<int>(p));
  }
  return axes;
}

std::vector<std::int64_t> inverse_permutation(const std::vector<std::int64_t>& perm) {
  std::vector<std::int64_t> inverse(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i)
    inverse[static_cast<std::size_t>(perm[i])] = static_cast<std::int64_t>(i);
  return inverse;
}

void register_shape_ops(op_registry& r) {
  r.add(op_def{"Transpose", 1, false, false, transpose_shape});
  // Shape, Size and Rank never read their input's values, only its shape.
  for (auto [name, infer] : {std::pair<const char*, status (*)(shape_context&)>{"Shape", shape_shape},
                             {"Size", size_shape},
                             {"Rank", rank_shape}}) {
    op_def def{name, 1, false, false, infer};
    def.shape_only_inputs = {0};
    r.add(std::move(def));
  }
}

void register_shape_gradients(gradient_registry& r) {
  r.add("Transpose", transpose_grad);
  for (auto op : {"Shape", "Size", "Rank"})
    r.add_not_differentiable(op);
}

namespace ops {

output transpose(output x, std::vector<std::int64_t> perm, const std::string& name) {
  return make(*x.owner, "Transpose", name, {x}, {{"perm", std::move(perm)}});
}

output shape(output x, dtype out_type, const std::string& name) {
  return make(*x.owner, "Shape", name, {x}, {{"out_type", out_type}});
}

output size(output x, dtype out_type, const std::string& name) {
  return make(*x.owner, "Size", name, {x}, {{"out_type", out_type}});
}

output rank(output x, const std::string& name) { return make(*x.owner, "Rank", name, {x}); }

} // namespace ops

} // namespace actorflow

// Definitions and shape inference of the standard ops. Names and attributes follow
// TensorFlow; graph/ops.hpp documents each one's attributes.
#include "graph/hash_embedding.hpp"
#include "graph/op_registry.hpp"
#include "graph/sampled_losses.hpp"
#include "graph/shape_ops.hpp"
#include "graph/checkpoint_ops.hpp"
#include "graph/variable_gather.hpp"
#include "graph/strided_slice.hpp"

#include <algorithm>

namespace actorflow {

namespace {

status error(const std::string& message) { return make_error(errc::invalid_argument, message); }

template <class T>
T attr_or_default(const node& n, const std::string& key, T fallback) {
  return n.attr_or<T>(key, std::move(fallback));
}

status require_attr(const node& n, const std::string& key) {
  if (!n.has_attr(key))
    return error("missing attribute '" + key + "'");
  return {};
}

tensor_shape shape_from_attr(const node& n, const std::string& key) {
  if (auto* s = n.attr<tensor_shape>(key))
    return *s;
  if (auto* dims = n.attr<std::vector<std::int64_t>>(key))
    return tensor_shape{*dims};
  return tensor_shape::unknown();
}

status same_type_inputs(const shape_context& c) {
  for (std::size_t i = 1; i < c.input_types.size(); ++i)
    if (c.input_types[i] != c.input_types[0])
      return error(std::string{"inputs have different dtypes: "} + to_string(c.input_types[0]) +
                   " and " + to_string(c.input_types[i]));
  return {};
}

status unary_same(shape_context& c) {
  c.set_output(0, c.input_types[0], c.input_shapes[0]);
  return {};
}

status unary_float(shape_context& c) {
  if (!is_floating(c.input_types[0]))
    return error(std::string{"expects a float32 or float64 input, got "} + to_string(c.input_types[0]));
  return unary_same(c);
}

status binary_broadcast(shape_context& c, std::optional<dtype> out_type) {
  AF_RETURN_IF_ERROR(same_type_inputs(c));
  auto shape = broadcast_shapes(c.input_shapes[0], c.input_shapes[1]);
  if (!shape)
    return shape.error();
  c.set_output(0, out_type.value_or(c.input_types[0]), *shape);
  return {};
}

/// Normalised, sorted reduction axes; empty attr means all axes.
result<std::vector<int>> reduction_axes(const node& n, int rank) {
  auto axes = attr_or_default<std::vector<std::int64_t>>(n, "axes", {});
  std::vector<int> out;
  if (axes.empty()) {
    for (int i = 0; i < rank; ++i)
      out.push_back(i);
    return out;
  }
  for (auto a : axes) {
    auto axis = a < 0 ? a + rank : a;
    if (axis < 0 || axis >= rank)
      return error("reduction axis " + std::to_string(a) + " is out of range for rank " +
                   std::to_string(rank));
    out.push_back(static_cast<int>(axis));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

status reduction(shape_context& c) {
  auto& in = c.input_shapes[0];
  if (!in.rank_known()) {
    c.set_output(0, c.input_types[0], tensor_shape::unknown());
    return {};
  }
  auto axes = reduction_axes(c.n, in.rank());
  if (!axes)
    return axes.error();
  bool keep = attr_or_default(c.n, "keep_dims", false);
  std::vector<std::int64_t> dims;
  for (int i = 0; i < in.rank(); ++i) {
    bool reduced = std::find(axes->begin(), axes->end(), i) != axes->end();
    if (!reduced)
      dims.push_back(in.dim(i));
    else if (keep)
      dims.push_back(1);
  }
  c.set_output(0, c.input_types[0], tensor_shape{dims});
  return {};
}

/// SelectV2(condition, t, e): a bool condition, t and e of one dtype, the three shapes
/// broadcast together.
status select(shape_context& c) {
  if (c.input_types[0] != dtype::boolean)
    return error(std::string{"SelectV2 needs a bool condition, got "} + to_string(c.input_types[0]));
  if (c.input_types[1] != c.input_types[2])
    return error(std::string{"SelectV2's branches have different dtypes: "} +
                 to_string(c.input_types[1]) + " and " + to_string(c.input_types[2]));
  auto branches = broadcast_shapes(c.input_shapes[1], c.input_shapes[2]);
  if (!branches)
    return branches.error();
  auto shape = broadcast_shapes(c.input_shapes[0], *branches);
  if (!shape)
    return shape.error();
  c.set_output(0, c.input_types[1], *shape);
  return {};
}

status source_from_attrs(shape_context& c) {
  AF_RETURN_IF_ERROR(require_attr(c.n, "dtype"));
  c.set_output(0, *c.n.attr<dtype>("dtype"), shape_from_attr(c.n, "shape"));
  return {};
}

status matmul(shape_context& c) {
  AF_RETURN_IF_ERROR(same_type_inputs(c));
  auto& a = c.input_shapes[0];
  auto& b = c.input_shapes[1];
  if ((a.rank_known() && a.rank() != 2) || (b.rank_known() && b.rank() != 2))
    return error("MatMul needs rank-2 inputs, got " + a.to_string() + " and " + b.to_string());
  bool ta = attr_or_default(c.n, "transpose_a", false);
  bool tb = attr_or_default(c.n, "transpose_b", false);
  std::int64_t m = -1, ka = -1, kb = -1, n = -1;
  if (a.rank_known()) {
    m = a.dim(ta ? 1 : 0);
    ka = a.dim(ta ? 0 : 1);
  }
  if (b.rank_known()) {
    kb = b.dim(tb ? 1 : 0);
    n = b.dim(tb ? 0 : 1);
  }
  if (ka >= 0 && kb >= 0 && ka != kb)
    return error("MatMul inner dimensions differ: " + a.to_string() +
                 (ta ? " (transposed)" : "") + " and " + b.to_string() + (tb ? " (transposed)" : ""));
  c.set_output(0, c.input_types[0], tensor_shape{m, n});
  return {};
}

status reshape(shape_context& c) {
  AF_RETURN_IF_ERROR(require_attr(c.n, "shape"));
  auto dims = *c.n.attr<std::vector<std::int64_t>>("shape");
  int unknown = 0;
  std::int64_t known_product = 1;
  for (auto d : dims) {
    if (d == -1)
      ++unknown;
    else if (d < 0)
      return error("Reshape: invalid dimension " + std::to_string(d));
    else
      known_product *= d;
  }
  if (unknown > 1)
    return error("Reshape: at most one dimension may be -1");
  auto in_elements = c.input_shapes[0].num_elements();
  if (in_elements >= 0) {
    if (unknown == 1 && known_product > 0 && in_elements % known_product == 0) {
      for (auto& d : dims)
        if (d == -1)
          d = in_elements / known_product;
    } else if ((unknown == 0 && known_product != in_elements) ||
               (unknown == 1 && (known_product == 0 || in_elements % known_product != 0))) {
      return error("Reshape: cannot reshape " + c.input_shapes[0].to_string() + " (" +
                   std::to_string(in_elements) + " elements) to " + tensor_shape{dims}.to_string());
    }
  }
  c.set_output(0, c.input_types[0], tensor_shape{dims});
  return {};
}

/// ConcatV2: one rank, equal dimensions except along axis (unknown ones merge), and the sum of
/// the inputs' extents along axis (unknown if any is).
status concat(shape_context& c) {
  if (c.input_types.empty())
    return error("ConcatV2 needs at least one input");
  AF_RETURN_IF_ERROR(same_type_inputs(c));
  AF_RETURN_IF_ERROR(require_attr(c.n, "axis"));
  auto axis_attr = attr_or_default<std::int64_t>(c.n, "axis", 0);
  // The first input of known rank is what the others are compared with.
  const tensor_shape* first = nullptr;
  for (auto& s : c.input_shapes)
    if (s.rank_known()) {
      first = &s;
      break;
    }
  if (first == nullptr) {
    c.set_output(0, c.input_types[0], tensor_shape::unknown());
    return {};
  }
  auto rank = first->rank();
  if (rank == 0)
    return error("ConcatV2 cannot concatenate scalars");
  if (axis_attr < -rank || axis_attr >= rank)
    return error("ConcatV2 axis " + std::to_string(axis_attr) + " is out of range for inputs of rank " +
                 std::to_string(rank));
  auto axis = static_cast<int>(axis_attr < 0 ? axis_attr + rank : axis_attr);
  std::vector<std::int64_t> dims(static_cast<std::size_t>(rank), -1);
  // Which input each known dimension came from, to name both shapes when another differs.
  std::vector<std::size_t> source(static_cast<std::size_t>(rank), 0);
  std::int64_t extent = 0;
  for (std::size_t i = 0; i < c.input_shapes.size(); ++i) {
    auto& s = c.input_shapes[i];
    if (!s.rank_known()) {
      extent = -1;
      continue;
    }
    if (s.rank() != rank)
      return error("ConcatV2 inputs must have one rank, got shapes " + first->to_string() + " and " +
                   s.to_string());
    for (int d = 0; d < rank; ++d) {
      auto k = static_cast<std::size_t>(d);
      auto dim = s.dim(d);
      if (d == axis) {
        extent = extent < 0 || dim < 0 ? -1 : extent + dim;
      } else if (dims[k] < 0) {
        dims[k] = dim;
        source[k] = i;
      } else if (dim >= 0 && dim != dims[k]) {
        return error("ConcatV2 along axis " + std::to_string(axis) + ": shapes " +
                     c.input_shapes[source[k]].to_string() + " and " + s.to_string() +
                     " differ in dimension " + std::to_string(d));
      }
    }
  }
  dims[static_cast<std::size_t>(axis)] = extent;
  c.set_output(0, c.input_types[0], tensor_shape{dims});
  return {};
}

status xent(shape_context& c) {
  AF_RETURN_IF_ERROR(same_type_inputs(c));
  if (!is_floating(c.input_types[0]))
    return error("expects float logits");
  auto& logits = c.input_shapes[0];
  auto& labels = c.input_shapes[1];
  if ((logits.rank_known() && logits.rank() != 2) || (labels.rank_known() && labels.rank() != 2))
    return error("logits and labels must be rank 2, got " + logits.to_string() + " and " +
                 labels.to_string());
  if (!logits.is_compatible_with(labels))
    return error("logits and labels must have the same shape, got " + logits.to_string() +
                 " and " + labels.to_string());
  auto shape = logits.rank_known() ? logits : labels;
  std::int64_t batch = shape.rank_known() ? shape.dim(0) : -1;
  c.set_output(0, c.input_types[0], tensor_shape{batch});
  c.set_output(1, c.input_types[0], shape.rank_known() ? shape : tensor_shape{-1, -1});
  return {};
}

status argmax(shape_context& c) {
  auto& in = c.input_shapes[0];
  auto axis = attr_or_default<std::int64_t>(c.n, "axis", 0);
  if (!in.rank_known()) {
    c.set_output(0, dtype::int64, tensor_shape::unknown());
    return {};
  }
  auto a = axis < 0 ? axis + in.rank() : axis;
  if (a < 0 || a >= in.rank())
    return error(c.n.op + " axis " + std::to_string(axis) + " is out of range for " + in.to_string());
  std::vector<std::int64_t> dims;
  for (int i = 0; i < in.rank(); ++i)
    if (i != a)
      dims.push_back(in.dim(i));
  c.set_output(0, dtype::int64, tensor_shape{dims});
  return {};
}

status assign_like(shape_context& c) {
  if (c.input_types[0] != c.input_types[1])
    return error(std::string{"cannot assign a "} + to_string(c.input_types[1]) + " value to a " +
                 to_string(c.input_types[0]) + " variable");
  if (c.n.op != "Assign" && !c.input_shapes[0].is_compatible_with(c.input_shapes[1]))
    return error("value shape " + c.input_shapes[1].to_string() + " differs from variable shape " +
                 c.input_shapes[0].to_string());
  c.set_output(0, c.input_types[0], c.n.op == "Assign" ? c.input_shapes[1] : c.input_shapes[0]);
  return {};
}

status gather(shape_context& c) {
  if (c.input_types[1] != dtype::int32 && c.input_types[1] != dtype::int64)
    return error(std::string{"Gather indices must be int32 or int64, got "} + to_string(c.input_types[1]));
  auto& params = c.input_shapes[0];
  auto& indices = c.input_shapes[1];
  auto axis = c.n.attr_or<std::int64_t>("axis", 0);
  if (!params.rank_known() || !indices.rank_known()) {
    c.set_output(0, c.input_types[0], tensor_shape::unknown());
    return {};
  }
  auto a = axis < 0 ? axis + params.rank() : axis;
  if (a < 0 || a >= params.rank())
    return error("Gather axis " + std::to_string(axis) + " is out of range for params " +
                 params.to_string());
  std::vector<std::int64_t> dims;
  for (int i = 0; i < a; ++i)
    dims.push_back(params.dim(i));
  for (int i = 0; i < indices.rank(); ++i)
    dims.push_back(indices.dim(i));
  for (int i = static_cast<int>(a) + 1; i < params.rank(); ++i)
    dims.push_back(params.dim(i));
  c.set_output(0, c.input_types[0], tensor_shape{dims});
  return {};
}

} // namespace

void register_standard_ops(op_registry& r) {
  register_gradient_ops(r);
  register_training_ops(r);
  register_sparse_ops(r);
  register_hash_embedding_ops(r);
  register_sampled_loss_ops(r);
  register_conv_ops(r);
  register_fused_ops(r);
  register_variable_gather_ops(r);
  register_control_flow_ops(r);
  register_shape_ops(r);
  register_strided_slice_ops(r);
  register_checkpoint_ops(r);
  auto add = [&r](std::string name, int inputs, std::function<status(shape_context&)> infer,
                  bool stateful = false, bool takes_ref = false) {
    r.add(op_def{std::move(name), inputs, stateful, takes_ref, std::move(infer)});
  };
  add("Const", 0, [](shape_context& c) {
    auto* value = c.n.attr<tensor>("value");
    if (value == nullptr || !value->is_initialized())
      return error("Const needs a 'value' tensor");
    c.set_output(0, value->type(), value->shape());
    return status{};
  });
  add("Placeholder", 0, source_from_attrs);
  add("VariableV2", 0, source_from_attrs, true);
  add("Assign", 2, assign_like, true, true);
  add("IsVariableInitialized", 1, [](shape_context& c) {
    c.set_output(0, dtype::boolean, tensor_shape{});
    return status{};
  }, true, true);
  add("AssignAdd", 2, assign_like, true, true);
  add("AssignSub", 2, assign_like, true, true);
  add("Identity", 1, unary_same);
  add("StopGradient", 1, unary_same);
  // Stateful: its members meet at run time, so none may be merged or pruned as a duplicate.
  add("AllReduce", 1, unary_same, true);
  // Stateful too: each run is the next of its instance across the group's members.
  add("CollectiveReduce", 1, unary_same, true);
  add("Neg", 1, unary_same);
  add("Square", 1, unary_same);
  for (auto name : {"Sqrt", "Exp", "Log", "Sigmoid", "Tanh", "Softmax"})
    add(name, 1, unary_float);
  add("Relu", 1, unary_same);
  for (auto name : {"Add", "Sub", "Mul", "Div", "Maximum", "Minimum", "Pow", "FloorDiv",
                    "FloorMod", "SquaredDifference"})
    add(name, 2, [](shape_context& c) { return binary_broadcast(c, std::nullopt); });
  for (auto name : {"Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual"})
    add(name, 2, [](shape_context& c) { return binary_broadcast(c, dtype::boolean); });
  for (auto name : {"LogicalAnd", "LogicalOr"})
    add(name, 2, [name](shape_context& c) {
      if (c.input_types[0] != dtype::boolean)
        return error(std::string{name} + " needs bool inputs, got " + to_string(c.input_types[0]));
      return binary_broadcast(c, dtype::boolean);
    });
  for (auto name : {"Abs", "Sign"})
    add(name, 1, unary_same);
  for (auto name : {"Floor", "Ceil", "Round", "Sin", "Cos", "Log1p", "Expm1"})
    add(name, 1, unary_float);
  for (auto name : {"IsNan", "IsInf", "IsFinite"})
    add(name, 1, [](shape_context& c) {
      AF_RETURN_IF_ERROR(unary_float(c));
      c.set_output(0, dtype::boolean, c.input_shapes[0]);
      return status{};
    });
  add("SelectV2", 3, select);
  add("Cumsum", 1, [](shape_context& c) {
    auto& x = c.input_shapes[0];
    auto axis = attr_or_default<std::int64_t>(c.n, "axis", 0);
    if (c.input_types[0] == dtype::boolean)
      return error("Cumsum needs a number type, got bool");
    // As TF's: a scalar has no axis to sum along.
    if (x.rank_known() && (axis < -x.rank() || axis >= x.rank()))
      return error("Cumsum axis " + std::to_string(axis) + " is out of range for " + x.to_string());
    return unary_same(c);
  });
  add("Where", 1, [](shape_context& c) {
    if (c.input_types[0] != dtype::boolean)
      return error(std::string{"Where needs a bool condition, got "} + to_string(c.input_types[0]));
    auto& x = c.input_shapes[0];
    c.set_output(0, dtype::int64, tensor_shape{std::vector<std::int64_t>{-1, x.rank_known() ? x.rank() : -1}});
    return status{};
  });
  add("LogicalNot", 1, [](shape_context& c) {
    if (c.input_types[0] != dtype::boolean)
      return error(std::string{"LogicalNot needs a bool input, got "} + to_string(c.input_types[0]));
    return unary_same(c);
  });
  // Gather(params, indices): attr axis; params' slices at indices along axis.
  add("Gather", 2, gather);
  add("Cast", 1, [](shape_context& c) {
    AF_RETURN_IF_ERROR(require_attr(c.n, "dtype"));
    c.set_output(0, *c.n.attr<dtype>("dtype"), c.input_shapes[0]);
    return status{};
  });
  op_def matmul_def{"MatMul", 2, false, false, matmul};
  matmul_def.bf16_compute = true;
  r.add(std::move(matmul_def));
  for (auto name : {"Sum", "Mean", "Max", "Min", "Prod"})
    add(name, 1, reduction);
  add("ArgMax", 1, argmax);
  add("ArgMin", 1, argmax);
  add("Reshape", 1, reshape);
  add("ConcatV2", -1, concat);
  add("SoftmaxCrossEntropyWithLogits", 2, xent);
  add("Fill", 1, [](shape_context& c) {
    AF_RETURN_IF_ERROR(require_attr(c.n, "shape"));
    if (c.input_shapes[0].rank_known() && c.input_shapes[0].rank() != 0)
      return error("Fill value must be a scalar, got " + c.input_shapes[0].to_string());
    c.set_output(0, c.input_types[0], shape_from_attr(c.n, "shape"));
    return status{};
  });
  for (auto name : {"RandomUniform", "RandomStandardNormal", "TruncatedNormal"})
    add(name, 0, [](shape_context& c) {
      AF_RETURN_IF_ERROR(require_attr(c.n, "dtype"));
      if (!is_floating(*c.n.attr<dtype>("dtype")))
        return error("random ops produce float32 or float64");
      return source_from_attrs(c);
    }, true);
  add("NoOp", 0, [](shape_context&) { return status{}; });
  // Inserted by partitioning: a tensor leaving one device (attr key) and arriving on another.
  add("_Send", 1, [](shape_context&) { return status{}; }, true);
  add("_Recv", 0, source_from_attrs, true);
}

} // namespace actorflow

// Sparse ops (graph/sparse_ops.hpp): their definitions and shape inference, their builders, and
// their gradients. Definitions:
//   IndexedSlices(values [n, ...], indices [n])      attr dense_shape; output: the dense tensor
//   Unique(x [n])                                      outputs y [m], idx [n] (int32)
//   UnsortedSegmentSum(data [n, ...], ids [n], num)    output [num, ...]
//   _DeduplicateSlices(values [n, ...], indices [n])   outputs indices [m], values [m, ...]
//   ScatterAdd/ScatterSub/ScatterUpdate(var, indices [n], updates [n, ...])   output: var
//   SparseApplyGradientDescent(var, alpha, grad [n, ...], indices [n])
//   SparseApplyMomentum(var, accum, lr, grad [n, ...], indices [n], momentum)  attr use_nesterov
//   SparseApplyAdagrad(var, accum, lr, grad [n, ...], indices [n])
//   SparseApplyAdam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon,
//                   grad [n, ...], indices [n])             lazy: only the rows named
//   SparseApplyFtrl(var, accum, linear, grad [n, ...], indices [n], lr, l1, l2, lr_power)
//   SparseApplyFtrlV2(var, accum, linear, grad [n, ...], indices [n], lr, l1, l2, l2_shrinkage,
//                     lr_power)                                TF's input orders
//   DynamicPartition(data [n, ...], partitions [n])   attr num_partitions; that many outputs
//   DynamicStitch(indices_0..N-1, data_0..N-1)         attr N
//   _EmbeddingShardIds(ids [m])                        attrs strategy, num_shards, total_rows;
//                                                      outputs shard (int32), row in it, position
// The update ops take their variables as refs, like the dense Apply ops (attr "variable",
// "slots"), and are ordered by the variable's shard as those are.
#include "graph/sparse_ops.hpp"

#include "graph/gradients.hpp"
#include "graph/hash_embedding.hpp"
#include "graph/op_registry.hpp"
#include "graph/ops.hpp"

namespace actorflow {

namespace {

status error(const std::string& message) { return make_error(errc::invalid_argument, message); }

bool is_index_type(dtype t) { return t == dtype::int32 || t == dtype::int64; }

status check_indices(const shape_context& c, int i, const char* what) {
  auto k = static_cast<std::size_t>(i);
  if (!is_index_type(c.input_types[k]))
    return error(c.n.op + " " + what + " must be int32 or int64, got " + to_string(c.input_types[k]));
  auto& s = c.input_shapes[k];
  if (s.rank_known() && s.rank() != 1)
    return error(c.n.op + " " + what + " must be a vector, got " + s.to_string());
  return {};
}

/// [rows, the dims of `like` after its first]: the shape of a stack of `like`'s rows.
tensor_shape rows_of(std::int64_t rows, const tensor_shape& like) {
  if (!like.rank_known() || like.rank() < 1)
    return tensor_shape::unknown();
  std::vector<std::int64_t> dims{rows};
  for (int i = 1; i < like.rank(); ++i)
    dims.push_back(like.dim(i));
  return tensor_shape{dims};
}

/// The rows of `values` must match those of the variable (input 0) after its first dim.
status check_rows_like_variable(const shape_context& c, int values) {
  auto& var = c.input_shapes[0];
  auto& rows = c.input_shapes[static_cast<std::size_t>(values)];
  if (!var.rank_known() || !rows.rank_known())
    return {};
  if (rows.rank() != var.rank())
    return error(c.n.op + ": rows of shape " + rows.to_string() + " do not fit variable shape " +
                 var.to_string());
  for (int i = 1; i < var.rank(); ++i)
    if (var.dim(i) >= 0 && rows.dim(i) >= 0 && var.dim(i) != rows.dim(i))
      return error(c.n.op + ": rows of shape " + rows.to_string() + " do not fit variable shape " +
                   var.to_string());
  return {};
}

/// A sparse update op: the variable (and slots) float, `rows` like it, `indices` a vector,
/// `scalars` scalars of its type.
status sparse_update(shape_context& c, int rows, int indices, const std::vector<int>& scalars) {
  auto type = c.input_types[0];
  if (!is_floating(type) && c.n.op.rfind("Scatter", 0) != 0)
    return error(c.n.op + " updates float32 or float64 variables, got " + to_string(type));
  AF_RETURN_IF_ERROR(check_indices(c, indices, "indices"));
  if (c.input_types[static_cast<std::size_t>(rows)] != type)
    return error(c.n.op + ": the rows are " + to_string(c.input_types[static_cast<std::size_t>(rows)]) +
                 " but the variable is " + to_string(type));
  for (auto i : scalars) {
    auto& s = c.input_shapes[static_cast<std::size_t>(i)];
    if (c.input_types[static_cast<std::size_t>(i)] != type || (s.rank_known() && s.rank() != 0))
      return error(c.n.op + ": input " + std::to_string(i) + " must be a " + to_string(type) + " scalar");
  }
  AF_RETURN_IF_ERROR(check_rows_like_variable(c, rows));
  c.set_output(0, type, c.input_shapes[0]);
  return {};
}

graph& graph_of(const output& x) { return *x.owner; }

/// The node of a scatter op on `var`, colocated with it.
output scatter(const char* op, const actorflow::variable& var, output indices, output updates,
               const std::string& name) {
  auto& g = graph_of(var.ref);
  auto beside = g.colocate_with(var.ref);
  return ops::make(g, op, name, {var.ref, indices, updates},
                   {{"variable", var.name()}, {"colocate_with", var.name()}});
}

// --- gradients -------------------------------------------------------------------------------

using grads = std::vector<output>;

/// Gather along axis 0 of a tensor whose shape is known (a variable's read): an IndexedSlices
/// of the incoming rows; otherwise dense, the rows summed into zeros of params' run-time shape.
status gather_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  if (op.attr_or<std::int64_t>("axis", 0) != 0)
    return make_error(errc::unimplemented, "the gradient of Gather '" + op.name +
                                             "' along an axis other than 0");
  auto params = input_of(g, op, 0);
  auto indices = input_of(g, op, 1);
  auto& shape = params.shape();
  // The incoming rows [n, row...] for the indices flattened to [n].
  std::vector<std::int64_t> rows{-1};
  for (int i = 1; shape.rank_known() && i < shape.rank(); ++i)
    rows.push_back(shape.dim(i));
  auto flat_indices = ops::reshape(indices, {-1}, "Reshape");
  auto values = ops::reshape(dy[0], rows, "Reshape_1");
  if (shape.fully_defined()) {
    dx[0] = ops::indexed_slices(values, flat_indices, shape.dims());
    return {};
  }
  // Rows of a computed tensor (the unique rows of an embedding lookup, on the worker): its
  // run-time row count.
  dx[0] = ops::make(g, "UnsortedSegmentSumLike", "UnsortedSegmentSumLike", {values, flat_indices, params});
  return {};
}

/// d(dense)/d(values): the rows of the incoming gradient at the indices.
status indexed_slices_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  dx[0] = ops::gather(dy[0], input_of(g, op, 1), 0, "Gather");
  return {};
}

/// Each data input gets the rows of the incoming gradient its indices took.
status dynamic_stitch_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  auto n = static_cast<int>(op.inputs.size() / 2);
  for (int p = 0; p < n; ++p)
    dx[static_cast<std::size_t>(n + p)] = ops::gather(dy[0], input_of(g, op, p), 0, "Gather");
  return {};
}

status unsorted_segment_sum_grad(graph& g, const node& op, const grads& dy, grads& dx) {
  dx[0] = ops::gather(dy[0], input_of(g, op, 1), 0, "Gather");
  return {};
}

} // namespace

std::optional<indexed_slices> as_indexed_slices(const output& dense) {
  if (!dense.valid() || dense.index != 0)
    return std::nullopt;
  auto& n = dense.producer();
  if (n.op != "IndexedSlices")
    return std::nullopt;
  auto* shape = n.attr<std::vector<std::int64_t>>("dense_shape");
  if (shape == nullptr)
    return std::nullopt;
  auto& g = *dense.owner;
  return indexed_slices{input_of(g, n, 0), input_of(g, n, 1), *shape};
}

void register_sparse_ops(op_registry& r) {
  auto plain = [&r](std::string name, int inputs, std::function<status(shape_context&)> infer) {
    r.add(op_def{std::move(name), inputs, false, false, std::move(infer)});
  };
  plain("IndexedSlices", 2, [](shape_context& c) {
    AF_RETURN_IF_ERROR(check_indices(c, 1, "indices"));
    auto* dims = c.n.attr<std::vector<std::int64_t>>("dense_shape");
    if (dims == nullptr || dims->empty())
      return error("IndexedSlices needs a dense_shape of rank 1 or more");
    tensor_shape dense{*dims};
    auto& values = c.input_shapes[0];
    if (values.rank_known() && !rows_of(-1, dense).is_compatible_with(values))
      return error("IndexedSlices values of shape " + values.to_string() +
                   " are not rows of dense shape " + dense.to_string());
    c.set_output(0, c.input_types[0], dense);
    return status{};
  });
  // The dense gradient of a Gather of a computed tensor: values [n, ...] summed at indices [n]
  // into zeros of input 2's run-time shape (only its shape is read).
  {
    op_def def{"UnsortedSegmentSumLike", 3, false, false, [](shape_context& c) {
      AF_RETURN_IF_ERROR(check_indices(c, 1, "indices"));
      c.set_output(0, c.input_types[0], c.input_shapes[2]);
      return status{};
    }};
    def.shape_only_inputs = {2};
    r.add(std::move(def));
  }
  plain("Unique", 1, [](shape_context& c) {
    auto& x = c.input_shapes[0];
    if (x.rank_known() && x.rank() != 1)
      return error("Unique takes a vector, got " + x.to_string());
    c.set_output(0, c.input_types[0], tensor_shape{std::vector<std::int64_t>{-1}});
    c.set_output(1, dtype::int32, x.rank_known() ? x : tensor_shape{std::vector<std::int64_t>{-1}});
    return status{};
  });
  plain("UnsortedSegmentSum", 3, [](shape_context& c) {
    AF_RETURN_IF_ERROR(check_indices(c, 1, "segment_ids"));
    auto& num = c.input_shapes[2];
    if (!is_index_type(c.input_types[2]) || (num.rank_known() && num.rank() != 0))
      return error("UnsortedSegmentSum num_segments must be an int32 or int64 scalar");
    c.set_output(0, c.input_types[0], rows_of(-1, c.input_shapes[0]));
    return status{};
  });
  plain("_DeduplicateSlices", 2, [](shape_context& c) {
    AF_RETURN_IF_ERROR(check_indices(c, 1, "indices"));
    c.set_output(0, c.input_types[1], tensor_shape{std::vector<std::int64_t>{-1}});
    c.set_output(1, c.input_types[0], rows_of(-1, c.input_shapes[0]));
    return status{};
  });
  plain("DynamicPartition", 2, [](shape_context& c) {
    if (c.input_types[1] != dtype::int32)
      return error(std::string{"DynamicPartition partitions must be int32, got "} + to_string(c.input_types[1]));
    auto parts = c.n.attr_or<std::int64_t>("num_partitions", 0);
    if (parts < 1)
      return error("DynamicPartition needs num_partitions of at least 1");
    for (int p = 0; p < parts; ++p)
      c.set_output(p, c.input_types[0], rows_of(-1, c.input_shapes[0]));
    return status{};
  });
  plain("DynamicStitch", -1, [](shape_context& c) {
    auto n = c.input_types.size() / 2;
    if (n == 0 || c.input_types.size() % 2 != 0)
      return error("DynamicStitch takes N indices and N data inputs");
    for (std::size_t p = 0; p < n; ++p) {
      if (c.input_types[p] != dtype::int32)
        return error(std::string{"DynamicStitch indices must be int32, got "} + to_string(c.input_types[p]));
      if (c.input_types[n + p] != c.input_types[n])
        return error("DynamicStitch data inputs differ in dtype");
    }
    auto& data = c.input_shapes[n];
    auto& indices = c.input_shapes[0];
    // Rows of data after the indices' dims.
    if (data.rank_known() && indices.rank_known() && indices.rank() == 1)
      c.set_output(0, c.input_types[n], rows_of(-1, data));
    else
      c.set_output(0, c.input_types[n], tensor_shape::unknown());
    return status{};
  });
  plain("_EmbeddingShardIds", 1, [](shape_context& c) {
    AF_RETURN_IF_ERROR(check_indices(c, 0, "ids"));
    auto strategy = c.n.attr_or<std::string>("strategy", "");
    if (strategy != "mod" && strategy != "div")
      return error("embedding_lookup's partition_strategy must be \"mod\" or \"div\", not \"" +
                   strategy + "\"");
    auto& ids = c.input_shapes[0];
    c.set_output(0, dtype::int32, ids);
    c.set_output(1, c.input_types[0], ids);
    c.set_output(2, dtype::int32, ids);
    return status{};
  });
  auto update = [&r](std::string name, int inputs, std::function<status(shape_context&)> infer,
                     std::vector<int> slots) {
    op_def def{std::move(name), inputs, /*stateful=*/true, /*takes_variable_ref=*/true,
               std::move(infer)};
    def.variable_ref_inputs = std::move(slots);
    r.add(std::move(def));
  };
  for (auto op : {"ScatterAdd", "ScatterSub", "ScatterUpdate"})
    update(op, 3, [](shape_context& c) { return sparse_update(c, 2, 1, {}); }, {});
  update("SparseApplyGradientDescent", 4,
         [](shape_context& c) { return sparse_update(c, 2, 3, {1}); }, {});
  update("SparseApplyAdagrad", 5, [](shape_context& c) {
    AF_RETURN_IF_ERROR(sparse_update(c, 3, 4, {2}));
    if (c.input_types[1] != c.input_types[0] ||
        !c.input_shapes[1].is_compatible_with(c.input_shapes[0]))
      return error("SparseApplyAdagrad: accum " + c.input_shapes[1].to_string() +
                   " differs from the variable " + c.input_shapes[0].to_string());
    return status{};
  }, {1});
  update("SparseApplyAdam", 11, [](shape_context& c) {
    AF_RETURN_IF_ERROR(sparse_update(c, 9, 10, {3, 4, 5, 6, 7, 8}));
    for (int slot : {1, 2})
      if (c.input_types[static_cast<std::size_t>(slot)] != c.input_types[0] ||
          !c.input_shapes[static_cast<std::size_t>(slot)].is_compatible_with(c.input_shapes[0]))
        return error("SparseApplyAdam: a moment differs from the variable " + c.input_shapes[0].to_string());
    return status{};
  }, {1, 2});
  for (auto [op, inputs] : {std::pair<const char*, int>{"SparseApplyFtrl", 9}, {"SparseApplyFtrlV2", 10}})
    update(op, inputs, [inputs = inputs](shape_context& c) {
      std::vector<int> scalars;
      for (int i = 5; i < inputs; ++i)
        scalars.push_back(i);
      AF_RETURN_IF_ERROR(sparse_update(c, 3, 4, scalars));
      for (std::size_t slot : {1, 2})
        if (c.input_types[slot] != c.input_types[0] ||
            !c.input_shapes[slot].is_compatible_with(c.input_shapes[0]))
          return error(c.n.op + ": " + (slot == 1 ? "accum " : "linear ") +
                       c.input_shapes[slot].to_string() + " differs from the variable " +
                       c.input_shapes[0].to_string());
      return status{};
    }, {1, 2});
  update("SparseApplyMomentum", 6, [](shape_context& c) {
    AF_RETURN_IF_ERROR(sparse_update(c, 3, 4, {2, 5}));
    if (c.input_types[1] != c.input_types[0] ||
        !c.input_shapes[1].is_compatible_with(c.input_shapes[0]))
      return error("SparseApplyMomentum: accum " + c.input_shapes[1].to_string() +
                   " differs from the variable " + c.input_shapes[0].to_string());
    return status{};
  }, {1});
}

void register_sparse_gradients(gradient_registry& r) {
  register_hash_embedding_gradients(r);
  r.add("Gather", gather_grad);
  r.add("IndexedSlices", indexed_slices_grad);
  r.add("UnsortedSegmentSum", unsorted_segment_sum_grad);
  r.add("DynamicStitch", dynamic_stitch_grad);
  for (auto op : {"Unique", "_EmbeddingShardIds", "_DeduplicateSlices", "UnsortedSegmentSumLike", "ScatterAdd",
                  "ScatterSub", "ScatterUpdate", "SparseApplyGradientDescent",
                  "SparseApplyMomentum", "SparseApplyAdagrad", "SparseApplyAdam",
                  "SparseApplyFtrl", "SparseApplyFtrlV2"})
    r.add_not_differentiable(op);
}

namespace ops {

output indexed_slices(output values, output indices, std::vector<std::int64_t> dense_shape,
                      const std::string& name) {
  return make(graph_of(values), "IndexedSlices", name, {values, indices},
              {{"dense_shape", std::move(dense_shape)}});
}

std::pair<output, output> unique(output x, const std::string& name) {
  auto y = make(graph_of(x), "Unique", name, {x});
  return {y, graph_of(x).output_of(y.node_id, 1)};
}

output unsorted_segment_sum(output data, output segment_ids, output num_segments,
                            const std::string& name) {
  return make(graph_of(data), "UnsortedSegmentSum", name, {data, segment_ids, num_segments});
}

std::pair<output, output> deduplicate_slices(output values, output indices, const std::string& name) {
  auto& g = graph_of(values);
  auto ids = make(g, "_DeduplicateSlices", name, {values, indices});
  return {ids, g.output_of(ids.node_id, 1)};
}

output scatter_add(const actorflow::variable& var, output indices, output updates, const std::string& name) {
  return scatter("ScatterAdd", var, indices, updates, name);
}

output scatter_sub(const actorflow::variable& var, output indices, output updates, const std::string& name) {
  return scatter("ScatterSub", var, indices, updates, name);
}

output scatter_update(const actorflow::variable& var, output indices, output updates, const std::string& name) {
  return scatter("ScatterUpdate", var, indices, updates, name);
}

output embedding_lookup_sparse(const actorflow::variable& params, output ids, output segment_ids,
                               output num_segments, output weights, const std::string& combiner,
                               const std::string& name) {
  auto& g = graph_of(ids);
  if (combiner != "sum" && combiner != "mean" && combiner != "sqrtn") {
    g.record_error(make_error(errc::invalid_argument, "embedding_lookup_sparse: combiner '" +
                                                        combiner +
                                                        "' is not one of sum, mean, sqrtn"));
    return {};
  }
  auto scope = g.name_scope(name);
  auto rows = embedding_lookup(params, reshape(ids, {-1}, "Reshape"), "embedding_lookup");
  if (!rows.valid())
    return {};
  auto type = params.ref.type();
  // One weight per row, as a column that scales the row.
  auto each = weights.valid() ? reshape(cast(weights, type, "Cast"), {-1}, "Reshape_1")
                              : make(g, "OnesLike", "OnesLike", {cast(reshape(ids, {-1}, "Reshape_2"), type, "Cast_1")});
  auto column = [&](output x, const std::string& at) { return reshape(x, {-1, 1}, at); };
  auto summed = unsorted_segment_sum(rows * column(each, "Reshape_3"), segment_ids, num_segments,
                                     "UnsortedSegmentSum");
  if (combiner == "sum")
    return summed;
  auto total = combiner == "mean" ? unsorted_segment_sum(each, segment_ids, num_segments, "UnsortedSegmentSum_1")
                                  : sqrt(unsorted_segment_sum(square(each), segment_ids, num_segments,
                                                              "UnsortedSegmentSum_1"));
  // An example without ids divides by 1, not 0: its zeros stay zeros.
  auto empty = cast(equal(total, scalar_like(g, type, 0.0, "zero")), type, "Cast_2");
  return div(summed, column(add(total, empty), "Reshape_4"), "combined");
}

std::vector<output> dynamic_partition(output data, output partitions, int num_partitions,
                                      const std::string& name) {
  auto& g = graph_of(data);
  auto first = make(g, "DynamicPartition", name, {data, partitions},
                    {{"num_partitions", std::int64_t{num_partitions}}});
  std::vector<output> out;
  for (int p = 0; p < num_partitions && first.valid(); ++p)
    out.push_back(g.output_of(first.node_id, p));
  return out;
}

output dynamic_stitch(const std::vector<output>& indices, const std::vector<output>& data,
                      const std::string& name) {
  std::vector<output> inputs = indices;
  inputs.insert(inputs.end(), data.begin(), data.end());
  return make(graph_of(data.at(0)), "DynamicStitch", name, inputs,
              {{"N", static_cast<std::int64_t>(indices.size())}});
}

namespace {

/// The checks both lookups make: a table of fully defined shape, ids with at most one unknown
/// dimension (the final reshape's -1). The table's row shape, or nothing after an error.
std::optional<std::vector<std::int64_t>> lookup_shapes(graph& g, const std::string& table,
                                                       const tensor_shape& shape, const output& ids) {
  auto& ids_shape = ids.shape();
  if (!shape.fully_defined() || shape.rank() < 1) {
    g.record_error(make_error(errc::invalid_argument, "embedding_lookup: the table '" + table +
                                                        "' has shape " + shape.to_string() +
                                                        ", not a fully defined one"));
    return std::nullopt;
  }
  int unknown = 0;
  for (int i = 0; ids_shape.rank_known() && i < ids_shape.rank(); ++i)
    unknown += ids_shape.dim(i) < 0 ? 1 : 0;
  if (!ids_shape.rank_known() || unknown > 1) {
    g.record_error(make_error(errc::unimplemented, "embedding_lookup: ids of shape " +
                                                     ids_shape.to_string() +
                                                     " (at most one unknown dimension, for now)"));
    return std::nullopt;
  }
  auto out = ids_shape.dims();
  for (int i = 1; i < shape.rank(); ++i)
    out.push_back(shape.dim(i));
  return out;
}

/// TF's clip_by_norm of each row of `rows` [m, row dims...] (rank `rank`) to `max_norm`:
/// rows * max_norm / max(norm, max_norm), written with the ops there are: `over` (1 where the
/// norm exceeds max_norm) picks the scale, and the norm is taken of sum + (1 - over), so a zero
/// row (never over) neither divides by zero nor takes sqrt's infinite slope at 0.
output clip_rows(graph& g, output rows, double max_norm, int rank) {
  if (max_norm <= 0)
    return rows;
  std::vector<std::int64_t> axes;
  for (int i = 1; i < rank; ++i)
    axes.push_back(i);
  auto type = rows.type();
  auto sum = reduce_sum(square(rows), axes, /*keep_dims=*/true, "clip_sum");
  auto over = cast(greater(sum, max_norm * max_norm), type, "clip_over");
  auto under = sub(scalar_like(g, type, 1.0, "one"), over, "clip_under");
  auto norm = sqrt(add(sum, under), "clip_norm");
  auto scale = add(div(mul(over, scalar_like(g, type, max_norm, "max_norm")), norm), under, "clip_scale");
  return mul(rows, scale, "clipped");
}

output lookup_one(const actorflow::variable& params, output ids, double max_norm, const std::string& name);
output lookup_partitioned(const actorflow::partitioned_variable& params, output ids,
                          const std::string& partition_strategy, double max_norm,
                          const std::string& name);

} // namespace

output embedding_lookup(const actorflow::variable& params, output ids, const std::string& name) {
  return lookup_one(params, ids, 0, name);
}

output embedding_lookup(const actorflow::variable& params, output ids, double max_norm,
                        const std::string& name) {
  return lookup_one(params, ids, max_norm, name);
}

output embedding_lookup(const actorflow::partitioned_variable& params, output ids,
                        const std::string& partition_strategy, const std::string& name) {
  return lookup_partitioned(params, ids, partition_strategy, 0, name);
}

output embedding_lookup(const actorflow::partitioned_variable& params, output ids,
                        const std::string& partition_strategy, double max_norm,
                        const std::string& name) {
  return lookup_partitioned(params, ids, partition_strategy, max_norm, name);
}

namespace {

output lookup_one(const actorflow::variable& params, output ids, double max_norm, const std::string& name) {
  auto& g = graph_of(ids);
  auto scope = g.name_scope(name);
  auto out_dims = lookup_shapes(g, params.name(), params.ref.shape(), ids);
  if (!out_dims)
    return {};
  // Where the ids are: each distinct id once.
  output unique_ids, positions;
  {
    auto beside_ids = g.colocate_with(ids);
    std::tie(unique_ids, positions) = unique(reshape(ids, {-1}, "Reshape"), "Unique");
  }
  // Where the table is: those rows only.
  output rows;
  {
    auto beside_table = g.colocate_with(params.ref);
    rows = clip_rows(g, gather(params.read, unique_ids, 0, "Gather"), max_norm, params.ref.shape().rank());
  }
  // Where the ids are again: spread back, in the ids' shape.
  auto beside_ids = g.colocate_with(ids);
  return reshape(gather(rows, positions, 0, "Gather_1"), *out_dims, "Reshape_1");
}

output lookup_partitioned(const actorflow::partitioned_variable& params, output ids,
                          const std::string& partition_strategy, double max_norm,
                          const std::string& name) {
  auto& g = graph_of(ids);
  auto scope = g.name_scope(name);
  if (!params.valid() || params.axis() != 0) {
    g.record_error(make_error(errc::invalid_argument, "embedding_lookup: the table '" +
                                                        params.name() +
                                                        "' must be partitioned along axis 0"));
    return {};
  }
  auto out_dims = lookup_shapes(g, params.name(), params.shape(), ids);
  if (!out_dims)
    return {};
  auto& shards = params.shards();
  auto n = static_cast<int>(shards.size());
  // Where the ids are: each distinct id once, the shard it lies on and its row there.
  output unique_ids, positions;
  std::vector<output> rows_of_shard, order_of_shard;
  {
    auto beside_ids = g.colocate_with(ids);
    std::tie(unique_ids, positions) = unique(reshape(ids, {-1}, "Reshape"), "Unique");
    auto placed = make(g, "_EmbeddingShardIds", "EmbeddingShardIds", {unique_ids},
                       {{"strategy", partition_strategy},
                        {"num_shards", std::int64_t{n}},
                        {"total_rows", params.shape().dim(0)}});
    auto shard = g.output_of(placed.node_id, 0);
    rows_of_shard = dynamic_partition(g.output_of(placed.node_id, 1), shard, n, "DynamicPartition");
    order_of_shard = dynamic_partition(g.output_of(placed.node_id, 2), shard, n, "DynamicPartition_1");
  }
  // Where each shard is: its rows of the batch only.
  std::vector<output> found;
  for (int p = 0; p < n && static_cast<int>(rows_of_shard.size()) == n; ++p) {
    auto& shard = shards[static_cast<std::size_t>(p)];
    auto beside_shard = g.colocate_with(shard.ref);
    found.push_back(clip_rows(g, gather(shard.read, rows_of_shard[static_cast<std::size_t>(p)], 0,
                                        "Gather_" + std::to_string(p)),
                              max_norm, params.shape().rank()));
  }
  if (static_cast<int>(found.size()) != n)
    return {};
  // Where the ids are again: the unique rows in order, spread back, in the ids' shape.
  auto beside_ids = g.colocate_with(ids);
  auto unique_rows = dynamic_stitch(order_of_shard, found, "DynamicStitch");
  return reshape(gather(unique_rows, positions, 0, "Gather"), *out_dims, "Reshape_1");
}

} // namespace

} // namespace ops

} // namespace actorflow

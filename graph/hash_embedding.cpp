// Hash embeddings (graph/hash_embedding.hpp): op definitions, builders and the lookup's
// gradient. Definitions (every op but _HashShardIds takes the table as a variable ref, input 0,
// attr "variable" naming it, so the table's shard actor orders it; all colocated with it):
//   HashEmbeddingTable()                      attrs dim, initializer, init_a, init_b, seed,
//                                             admit_after, evict_after, slots; outputs: a
//                                             float32 token (the ref its ops and gradients
//                                             name: float, as the rows), its size (int64)
//   HashEmbeddingFind(table, ids [n], step)   output rows [n, dim] float32 (makes rows)
//   HashEmbeddingApplyGradientDescent(table, lr, grad [n, dim], ids [n])
//   HashEmbeddingApplyAdagrad(table, lr, grad, ids)                attr initial_accumulator_value
//   HashEmbeddingApplyFtrl(table, grad, ids, lr, l1, l2, l2_shrinkage, lr_power)   the same attr
//   HashEmbeddingExport(table)                outputs keys, rows, last_steps, candidates, counts
//   HashEmbeddingImport(table, keys, rows, last_steps, candidates, counts)   output: its size
//   _HashShardIds(ids [n])                    attr num_shards; outputs shard (int32), position
// The updates output how many rows they applied (gradients of ids without a row are dropped).
#include "graph/hash_embedding.hpp"

#include "graph/gradients.hpp"
#include "graph/op_registry.hpp"
#include "graph/ops.hpp"
#include "graph/sparse_ops.hpp"

namespace actorflow {

namespace {

status error(const std::string& message) { return make_error(errc::invalid_argument, message); }

tensor_shape vector_of(std::int64_t n) { return tensor_shape{std::vector<std::int64_t>{n}}; }
tensor_shape scalar_shape() { return tensor_shape{std::vector<std::int64_t>{}}; }

status check_table(const shape_context& c) {
  if (c.input_types.empty() || c.input_types[0] != dtype::float32)
    return error(c.n.op + " takes a HashEmbeddingTable as input 0");
  return {};
}

status check_ids(const shape_context& c, std::size_t i) {
  if (c.input_types[i] != dtype::int64)
    return error(c.n.op + ": ids must be int64, got " + to_string(c.input_types[i]));
  auto& s = c.input_shapes[i];
  if (s.rank_known() && s.rank() != 1)
    return error(c.n.op + ": ids must be a vector, got " + s.to_string());
  return {};
}

status check_float_scalars(const shape_context& c, const std::vector<std::size_t>& at) {
  for (auto i : at) {
    auto& s = c.input_shapes[i];
    if (c.input_types[i] != dtype::float32 || (s.rank_known() && s.rank() != 0))
      return error(c.n.op + ": input " + std::to_string(i) + " must be a float32 scalar");
  }
  return {};
}

status check_rows(const shape_context& c, std::size_t rows) {
  auto dim = c.n.attr_or<std::int64_t>("dim", -1);
  auto& s = c.input_shapes[rows];
  if (c.input_types[rows] != dtype::float32)
    return error(c.n.op + ": the gradient rows must be float32, got " + to_string(c.input_types[rows]));
  if (s.rank_known() && (s.rank() != 2 || (s.dim(1) >= 0 && dim >= 0 && s.dim(1) != dim)))
    return error(c.n.op + ": gradient rows of shape " + s.to_string() + " are not rows of " +
                 std::to_string(dim));
  return {};
}

/// d(rows)/d(table): the incoming rows at the ids, as an IndexedSlices (dense shape [-1, dim]:
/// a hash table has no row count, and its dense form is never made).
status find_grad(graph& g, const node& op, const std::vector<output>& dy, std::vector<output>& dx) {
  auto dim = op.attr_or<std::int64_t>("dim", -1);
  dx[0] = ops::indexed_slices(dy[0], input_of(g, op, 1), {-1, dim}, "IndexedSlices");
  return {};
}

/// The node of a table op on `table`, colocated with it.
output table_op(const char* op, const output& table, std::vector<output> inputs,
                const std::string& name, std::map<std::string, attr_value> attrs = {}) {
  auto& g = *table.owner;
  auto beside = g.colocate_with(table);
  inputs.insert(inputs.begin(), table);
  attrs["variable"] = table.name();
  attrs["colocate_with"] = table.name();
  if (auto* dim = table.producer().attr<std::int64_t>("dim"))
    attrs["dim"] = *dim;
  return ops::make(g, op, name, std::move(inputs), std::move(attrs));
}

} // namespace

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::int64_t hash_shard_of(std::int64_t id, std::int64_t shards) {
  return static_cast<std::int64_t>(splitmix64(static_cast<std::uint64_t>(id)) % static_cast<std::uint64_t>(shards));
}

bool is_hash_table(const variable& v) {
  return v.ref.valid() && v.ref.producer().op == "HashEmbeddingTable";
}

std::vector<output> hash_embedding::sizes() const {
  std::vector<output> out;
  for (auto& s : shards)
    out.push_back(s.owner->output_of(s.node_id, 1));
  return out;
}

std::vector<variable> hash_embedding::variables() const {
  std::vector<variable> out;
  for (auto& s : shards)
    out.push_back(variable{s, s, output{}});
  return out;
}

void register_hash_embedding_ops(op_registry& r) {
  auto add = [&r](std::string name, int inputs, bool on_table, std::function<status(shape_context&)> infer) {
    r.add(op_def{std::move(name), inputs, /*stateful=*/true, on_table, std::move(infer)});
  };
  add("HashEmbeddingTable", 0, false, [](shape_context& c) {
    if (c.n.attr_or<std::int64_t>("dim", 0) < 1)
      return error("HashEmbeddingTable needs a dim of at least 1");
    auto kind = c.n.attr_or<std::string>("initializer", "zeros");
    if (kind != "zeros" && kind != "constant" && kind != "uniform" && kind != "normal")
      return error("HashEmbeddingTable: initializer '" + kind +
                   "' is not one of zeros, constant, uniform, normal");
    if (c.n.attr_or<std::int64_t>("admit_after", 0) < 0 || c.n.attr_or<std::int64_t>("evict_after", 0) < 0)
      return error("HashEmbeddingTable: admit_after and evict_after must not be negative");
    c.set_output(0, dtype::float32, scalar_shape());
    c.set_output(1, dtype::int64, scalar_shape());
    return status{};
  });
  add("HashEmbeddingFind", 3, true, [](shape_context& c) {
    AF_RETURN_IF_ERROR(check_table(c));
    AF_RETURN_IF_ERROR(check_ids(c, 1));
    if (c.input_types[2] != dtype::int64)
      return error("HashEmbeddingFind: the step must be an int64 scalar");
    auto& ids = c.input_shapes[1];
    c.set_output(0, dtype::float32,
                 tensor_shape{std::vector<std::int64_t>{ids.rank_known() ? ids.dim(0) : -1,
                                                        c.n.attr_or<std::int64_t>("dim", -1)}});
    return status{};
  });
  // (table, learning rate, rows, ids): gradient descent's and Adagrad's inputs alike.
  auto learning_rate_update = [](shape_context& c) {
    AF_RETURN_IF_ERROR(check_table(c));
    AF_RETURN_IF_ERROR(check_float_scalars(c, {1}));
    AF_RETURN_IF_ERROR(check_rows(c, 2));
    AF_RETURN_IF_ERROR(check_ids(c, 3));
    c.set_output(0, dtype::int64, scalar_shape());
    return status{};
  };
  add("HashEmbeddingApplyGradientDescent", 4, true, learning_rate_update);
  add("HashEmbeddingApplyAdagrad", 4, true, learning_rate_update);
  add("HashEmbeddingApplyFtrl", 8, true, [](shape_context& c) {
    AF_RETURN_IF_ERROR(check_table(c));
    AF_RETURN_IF_ERROR(check_rows(c, 1));
    AF_RETURN_IF_ERROR(check_ids(c, 2));
    AF_RETURN_IF_ERROR(check_float_scalars(c, {3, 4, 5, 6, 7}));
    c.set_output(0, dtype::int64, scalar_shape());
    return status{};
  });
  add("HashEmbeddingExport", 1, true, [](shape_context& c) {
    AF_RETURN_IF_ERROR(check_table(c));
    c.set_output(0, dtype::int64, vector_of(-1));
    c.set_output(1, dtype::float32, tensor_shape{std::vector<std::int64_t>{-1, -1}});
    c.set_output(2, dtype::int64, vector_of(-1));
    c.set_output(3, dtype::int64, vector_of(-1));
    c.set_output(4, dtype::int64, vector_of(-1));
    return status{};
  });
  add("HashEmbeddingImport", 6, true, [](shape_context& c) {
    AF_RETURN_IF_ERROR(check_table(c));
    for (std::size_t i : {1, 3, 4, 5})
      if (c.input_types[i] != dtype::int64)
        return error("HashEmbeddingImport: input " + std::to_string(i) + " must be int64");
    if (c.input_types[2] != dtype::float32)
      return error("HashEmbeddingImport: the rows must be float32");
    c.set_output(0, dtype::int64, scalar_shape());
    return status{};
  });
  add("_HashShardIds", 1, false, [](shape_context& c) {
    AF_RETURN_IF_ERROR(check_ids(c, 0));
    if (c.n.attr_or<std::int64_t>("num_shards", 0) < 1)
      return error("_HashShardIds needs num_shards of at least 1");
    c.set_output(0, dtype::int32, c.input_shapes[0]);
    c.set_output(1, dtype::int32, c.input_shapes[0]);
    return status{};
  });
}

void register_hash_embedding_gradients(gradient_registry& r) {
  r.add("HashEmbeddingFind", find_grad);
  for (auto op : {"HashEmbeddingTable", "HashEmbeddingApplyGradientDescent", "HashEmbeddingApplyAdagrad",
                  "HashEmbeddingApplyFtrl", "HashEmbeddingExport", "HashEmbeddingImport", "_HashShardIds"})
    r.add_not_differentiable(op);
}

namespace ops {

actorflow::hash_embedding hash_embedding(graph& g, const std::string& name, std::int64_t dim,
                                         hash_initializer initializer, int shards,
                                         const hash_embedding_options& options) {
  actorflow::hash_embedding out;
  out.name = name;
  out.dim = dim;
  if (shards < 1) {
    g.record_error(error("hash_embedding '" + name + "': shards must be at least 1, got " +
                         std::to_string(shards)));
    return out;
  }
  auto scope = g.name_scope(name);
  for (int k = 0; k < shards; ++k)
    out.shards.push_back(make(g, "HashEmbeddingTable", "part_" + std::to_string(k), {},
                              {{"dim", dim},
                               {"initializer", initializer.kind},
                               {"init_a", initializer.a},
                               {"init_b", initializer.b},
                               {"seed", static_cast<std::int64_t>(options.seed)},
                               {"admit_after", options.admit_after},
                               {"evict_after", options.evict_after},
                               {"slots", std::string{}}}));
  return out;
}

output hash_embedding_lookup(const actorflow::hash_embedding& table, output ids, output global_step,
                             const std::string& name) {
  auto& g = *ids.owner;
  if (!table.valid()) {
    g.record_error(error("hash_embedding_lookup: the table '" + table.name + "' has no shards"));
    return {};
  }
  if (ids.type() != dtype::int64) {
    g.record_error(error("hash_embedding_lookup of '" + table.name + "': ids must be int64, got " +
                         to_string(ids.type())));
    return {};
  }
  auto& ids_shape = ids.shape();
  int unknown = 0;
  for (int i = 0; ids_shape.rank_known() && i < ids_shape.rank(); ++i)
    unknown += ids_shape.dim(i) < 0 ? 1 : 0;
  if (!ids_shape.rank_known() || unknown > 1) {
    g.record_error(make_error(errc::unimplemented, "hash_embedding_lookup of '" + table.name +
                                                     "': ids of shape " + ids_shape.to_string() +
                                                     " (at most one unknown dimension, for now)"));
    return {};
  }
  auto scope = g.name_scope(name);
  auto out_dims = ids_shape.dims();
  out_dims.push_back(table.dim);
  auto n = static_cast<int>(table.shards.size());
  // Where the ids are: each distinct id once, routed to its shard by hash.
  output unique_ids, positions;
  std::vector<output> ids_of_shard, order_of_shard;
  {
    auto beside_ids = g.colocate_with(ids);
    std::tie(unique_ids, positions) = unique(reshape(ids, {-1}, "Reshape"), "Unique");
    auto routed = make(g, "_HashShardIds", "HashShardIds", {unique_ids}, {{"num_shards", std::int64_t{n}}});
    auto shard = g.output_of(routed.node_id, 0);
    ids_of_shard = dynamic_partition(unique_ids, shard, n, "DynamicPartition");
    order_of_shard = dynamic_partition(g.output_of(routed.node_id, 1), shard, n, "DynamicPartition_1");
  }
  if (static_cast<int>(ids_of_shard.size()) != n)
    return {};
  // Where each shard is: its ids' rows, made there as needed.
  std::vector<output> found;
  for (int p = 0; p < n; ++p) {
    auto& shard = table.shards[static_cast<std::size_t>(p)];
    output step = global_step;
    if (!step.valid()) {
      auto beside = g.colocate_with(shard);
      step = scalar_like(g, dtype::int64, -1, "no_step");  // the table counts its lookups
    }
    found.push_back(table_op("HashEmbeddingFind", shard, {ids_of_shard[static_cast<std::size_t>(p)], step},
                             "HashEmbeddingFind_" + std::to_string(p)));
  }
  // Where the ids are again: the unique rows in order, spread back, in the ids' shape.
  auto beside_ids = g.colocate_with(ids);
  auto unique_rows = dynamic_stitch(order_of_shard, found, "DynamicStitch");
  return reshape(gather(unique_rows, positions, 0, "Gather"), out_dims, "Reshape_1");
}

std::vector<output> hash_embedding_export(const output& table, const std::string& name) {
  auto first = table_op("HashEmbeddingExport", table, {}, name);
  std::vector<output> out;
  for (int i = 0; i < 5 && first.valid(); ++i)
    out.push_back(table.owner->output_of(first.node_id, i));
  return out;
}

output hash_embedding_import(const output& table, const std::vector<output>& contents,
                             const std::string& name) {
  return table_op("HashEmbeddingImport", table, contents, name);
}

} // namespace ops

} // namespace actorflow

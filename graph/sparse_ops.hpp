#pragma once
/// Sparse values and embeddings (TensorFlow's IndexedSlices, tf.nn.embedding_lookup, the
/// scatter ops): what lets a table far bigger than a batch train by the rows the batch touches.
///   auto looked_up = ops::embedding_lookup(table, ids);        // [ids..., dim], rows from the ps
///   auto loss = ...(looked_up)...;
///   sgd.minimize(loss);    // d(loss)/d(table) is an IndexedSlices: only its rows are applied
/// An IndexedSlices is a node of op "IndexedSlices" (values [n, ...], indices [n]; attr
/// dense_shape): its output is the dense tensor it stands for, made only where a consumer needs
/// it dense, while the consumers that know it (the optimizers, the sum of several gradients) take
/// its values and indices and the dense tensor is never made. The gradient of a Gather of a
/// variable is one. Rows cross the network, not tables: embedding_lookup asks the table's device
/// for the batch's unique rows, and the optimizers send unique row ids and their summed gradients.

#include "graph/graph.hpp"
#include "graph/partitioned_variable.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace actorflow {

/// The parts of an IndexedSlices node, when `dense` is one's output.
struct indexed_slices {
  output values;
  output indices;
  std::vector<std::int64_t> dense_shape;
};
std::optional<indexed_slices> as_indexed_slices(const output& dense);

class gradient_registry;
/// Gather's, IndexedSlices's and UnsortedSegmentSum's gradients (graph/gradients.cpp calls it).
void register_sparse_gradients(gradient_registry& registry);

namespace ops {

/// "IndexedSlices": rows `values` [n, ...] at `indices` [n] (int32 or int64) of a tensor of
/// shape `dense_shape` (fully defined), summed where an index repeats; its output is that
/// tensor, dense.
output indexed_slices(output values, output indices, std::vector<std::int64_t> dense_shape,
                      const std::string& name = "IndexedSlices");

/// "Unique": the distinct values of the vector x in order of first appearance (output 0) and,
/// for each element of x, the position of its value there (output 1, int32): x == y[idx].
std::pair<output, output> unique(output x, const std::string& name = "Unique");

/// "UnsortedSegmentSum": out[k, ...] = sum of data[i, ...] over the i with segment_ids[i] == k,
/// for k in [0, num_segments); segment_ids [n] of int32 or int64, num_segments an int32 or
/// int64 scalar. Ids outside the range are an error naming the id.
output unsorted_segment_sum(output data, output segment_ids, output num_segments,
                            const std::string& name = "UnsortedSegmentSum");

/// "_DeduplicateSlices": the rows of (values, indices) summed per distinct index: output 0 the
/// distinct indices (first appearance order), output 1 their summed rows. What the optimizers
/// send instead of a batch's repeated ids.
std::pair<output, output> deduplicate_slices(output values, output indices,
                                             const std::string& name = "DeduplicateSlices");

/// "ScatterAdd" / "ScatterSub" / "ScatterUpdate": var[indices[i], ...] += / -= / = updates[i, ...]
/// (TF's scatter ops; repeated indices add up, or the last one wins for ScatterUpdate). The
/// variable's new value is the output; only the rows named are touched.
output scatter_add(const actorflow::variable& var, output indices, output updates,
                   const std::string& name = "ScatterAdd");
output scatter_sub(const actorflow::variable& var, output indices, output updates,
                   const std::string& name = "ScatterSub");
output scatter_update(const actorflow::variable& var, output indices, output updates,
                      const std::string& name = "ScatterUpdate");

/// The rows of `params` at `ids` (any shape; int32 or int64): [ids..., dim...]
/// (tf.nn.embedding_lookup of one variable). The ids are made unique where they are (the
/// worker), the table's device gathers those rows only, and they are spread back to the ids
/// where the ids are; its gradient for params is an IndexedSlices of the unique rows.
output embedding_lookup(const actorflow::variable& params, output ids,
                        const std::string& name = "embedding_lookup");

/// The same over a table partitioned along axis 0 (its shards usually on several ps tasks),
/// with TF's row-to-shard rules: "mod" puts id on shard id % n as its row id / n; "div" gives
/// each shard a contiguous range of ids, the first (rows % n) one id more (the layout of
/// fixed_size_partitioner, so that id i is row i of partitioned_variable::as_tensor()). Each
/// shard's device gathers only the batch's unique ids that fall on it.
output embedding_lookup(const actorflow::partitioned_variable& params, output ids,
                        const std::string& partition_strategy = "mod",
                        const std::string& name = "embedding_lookup");

/// The same with TF's max_norm (> 0): every looked-up row whose L2 norm exceeds it is scaled to
/// max_norm (clip_by_norm over the row's dims), beside the table, before the rows are spread back;
/// the gradient goes through the clipping. max_norm <= 0 clips nothing.
output embedding_lookup(const actorflow::variable& params, output ids, double max_norm,
                        const std::string& name = "embedding_lookup");
output embedding_lookup(const actorflow::partitioned_variable& params, output ids,
                        const std::string& partition_strategy, double max_norm,
                        const std::string& name = "embedding_lookup");

/// tf.nn.embedding_lookup_sparse: per example (segment) its ids' rows combined, [num_segments,
/// dim...]. ids [n] and segment_ids [n] (int32 or int64: the example of each id) are TF's sparse
/// ids (values and the first column of indices); `weights` [n] (float, optional: 1 each) weigh
/// the rows; combiner "sum", "mean" (the weighted mean) or "sqrtn" (the weighted sum over the
/// square root of the sum of squared weights). An example without ids gets zeros.
output embedding_lookup_sparse(const actorflow::variable& params, output ids, output segment_ids,
                               output num_segments, output weights = {},
                               const std::string& combiner = "mean",
                               const std::string& name = "embedding_lookup_sparse");

/// "DynamicPartition": the rows of data [n, ...] split by partitions [n] (int32 in [0,
/// num_partitions)) into num_partitions outputs, each keeping the rows' order (TF's).
std::vector<output> dynamic_partition(output data, output partitions, int num_partitions,
                                      const std::string& name = "DynamicPartition");

/// "DynamicStitch": merged[indices[p][i], ...] = data[p][i, ...] (TF's), indices int32; as many
/// rows as the largest index + 1; a later one wins where indices repeat.
output dynamic_stitch(const std::vector<output>& indices, const std::vector<output>& data,
                      const std::string& name = "DynamicStitch");

} // namespace ops

} // namespace actorflow

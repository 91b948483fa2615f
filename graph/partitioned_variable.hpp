#pragma once
/// Partitioned variables (TensorFlow 1.x's tf.get_variable(..., partitioner=...) and
/// PartitionedVariable): one large variable stored as shards along one axis, each an ordinary
/// variable, so that the device function in force (replica_device_setter) places each shard on
/// its own, round-robin over the ps tasks.
///   auto w = ops::partitioned_variable(g, "w", {10, 3}, truncated_normal_initializer(0, 0.1, 7),
///                                      fixed_size_partitioner(3));   // w/part_0 .. w/part_2
///   auto y = ops::matmul(x, w.as_tensor());        // the shards' reads, concatenated
///   auto train = gradient_descent_optimizer{0.1}.minimize(loss, w.shards());
/// The shards are trainable variables of the graph like any other, so global_variables_
/// initializer() initialises them and minimize(loss) without a list updates them too; each
/// update op is colocated with its shard.

#include "graph/graph.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace actorflow {

/// How many parts each dimension of a variable of `shape` (fully defined) and `type` is split
/// into (TensorFlow's partitioner callables): one entry per dimension, each at least 1, at most
/// one above 1, none above its dimension's size. Called once per partitioned variable, from the
/// thread building the graph.
using partitioner = std::function<std::vector<std::int64_t>(const tensor_shape& shape, dtype type)>;

/// TensorFlow's tf.fixed_size_partitioner: `num_shards` parts along `axis`, or as many as that
/// dimension has rows when it has fewer; 1 part along every other dimension. An `axis` outside
/// the variable's rank, or `num_shards` below 1, makes ops::partitioned_variable fail.
partitioner fixed_size_partitioner(int num_shards, int axis = 0);

/// Where one shard lies in its partitioned variable (TensorFlow's partition_info).
struct shard_info {
  /// The shard's position, 0 .. shards-1.
  int index = 0;
  /// The dtype of the variable.
  dtype type = dtype::float32;
  /// The whole variable's shape and the shard's.
  tensor_shape full_shape;
  tensor_shape shape;
  /// Where the shard starts in the whole variable, per dimension.
  std::vector<std::int64_t> offset;
};

/// Makes the initial value of one shard: an output of `shard.type` and exactly `shard.shape`.
/// Called once per shard inside the name scope "<variable>/part_<i>/Initializer", under the
/// device scopes in force when ops::partitioned_variable was called.
using shard_initializer = std::function<output(graph& g, const shard_info& shard)>;

/// Zeros (ops::zeros) of each shard's shape.
shard_initializer zeros_initializer();
/// `value` given for the whole variable, sliced on the host: each shard gets a Const of its own
/// slice only. A scalar `value` fills every shard instead (ops::fill). The dtype must be the
/// variable's.
shard_initializer constant_initializer(tensor value);
/// ops::random_normal, ops::truncated_normal and ops::random_uniform of each shard's shape.
/// With a `seed`, shard i uses seed + i so that shards draw different numbers; without one the
/// graph seed rules of ops.hpp apply (and also give every shard its own stream).
shard_initializer random_normal_initializer(double mean = 0.0, double stddev = 1.0,
                                            std::optional<std::int64_t> seed = std::nullopt);
shard_initializer truncated_normal_initializer(double mean = 0.0, double stddev = 1.0,
                                               std::optional<std::int64_t> seed = std::nullopt);
shard_initializer random_uniform_initializer(double minval = 0.0, double maxval = 1.0,
                                             std::optional<std::int64_t> seed = std::nullopt);

/// A variable stored as shards along one axis, as made by ops::partitioned_variable. A value
/// type: copies refer to the same graph nodes, which live as long as their graph.
class partitioned_variable {
public:
  /// An empty variable: no shards (what ops::partitioned_variable returns after an error).
  partitioned_variable() = default;
  partitioned_variable(std::string name, tensor_shape shape, dtype type, int axis,
                       std::vector<variable> shards, std::vector<std::int64_t> offsets);

  bool valid() const { return !shards_.empty(); }
  /// The name scope of the shards, "w" for "w/part_0" ...
  const std::string& name() const { return name_; }
  /// The whole variable's shape and dtype.
  const tensor_shape& shape() const { return shape_; }
  dtype type() const { return type_; }
  /// The axis the shards split.
  int axis() const { return axis_; }
  /// The shard variables in order ("<name>/part_0", ...); pass them to an optimizer's minimize
  /// or compute_gradients to train the partitioned variable.
  const std::vector<variable>& shards() const { return shards_; }
  /// Where each shard starts along axis().
  const std::vector<std::int64_t>& offsets() const { return offsets_; }

  /// The whole value (TensorFlow's PartitionedVariable.as_tensor): the shards' reads
  /// concatenated along axis() by a new "<base name>/ConcatPartitions/concat" node in the
  /// current name scope, on the current device scopes (the consumer's device), so each caller
  /// gets its own copy where it needs it. Gradients flowing into it reach every shard. An
  /// invalid output for an empty variable.
  output as_tensor() const;

private:
  std::string name_;
  tensor_shape shape_;
  dtype type_ = dtype::float32;
  int axis_ = 0;
  std::vector<variable> shards_;
  std::vector<std::int64_t> offsets_;
};

namespace ops {

/// A variable of `shape` (fully defined, rank at least 1) and `type`, split as `partition`
/// says into shards "<name>/part_0" .. "<name>/part_{k-1}" along one axis. Each shard is made by
/// ops::variable, so device scopes and functions place each one separately. Shard sizes follow
/// TensorFlow: with d rows split k ways, the first d % k shards get d / k + 1 rows and the rest
/// d / k. Errors (a bad partition list, an initial value of the wrong dtype or shape) are
/// recorded in the graph's status, naming the variable, and give an empty result.
actorflow::partitioned_variable partitioned_variable(graph& g, const std::string& name,
                                                     tensor_shape shape,
                                                     const shard_initializer& initializer,
                                                     const partitioner& partition,
                                                     dtype type = dtype::float32,
                                                     bool trainable = true);

} // namespace ops

} // namespace actorflow

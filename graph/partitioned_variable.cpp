// Partitioned variables laid out like TensorFlow 1.x's: scope "w", shards "w/part_0" ... each
// an ordinary variable (with its Assign and read), initial values under
// "w/part_<i>/Initializer", and ConcatV2 nodes under "w/ConcatPartitions" for every read of the
// whole.
#include "graph/partitioned_variable.hpp"

#include "graph/ops.hpp"

#include <algorithm>
#include <utility>

namespace actorflow {

namespace {

status error(const std::string& message) { return make_error(errc::invalid_argument, message); }

/// The axis a partition list splits (0 when it splits none); an error naming what is wrong.
result<int> split_axis(const std::vector<std::int64_t>& parts, const tensor_shape& shape) {
  if (static_cast<int>(parts.size()) != shape.rank())
    return error("the partitioner returned " + std::to_string(parts.size()) +
                 " partition counts for a variable of rank " + std::to_string(shape.rank()) +
                 " (shape " + shape.to_string() + ")");
  int axis = -1;
  for (int d = 0; d < shape.rank(); ++d) {
    auto count = parts[static_cast<std::size_t>(d)];
    if (count < 1)
      return error("the partitioner returned " + std::to_string(count) + " parts for dimension " +
                   std::to_string(d) + " of shape " + shape.to_string() + "; each needs at least 1");
    if (count > shape.dim(d))
      return error("the partitioner split dimension " + std::to_string(d) + " of shape " +
                   shape.to_string() + " into " + std::to_string(count) + " parts, more than it has");
    if (count == 1)
      continue;
    if (axis >= 0)
      return error("the partitioner split dimensions " + std::to_string(axis) + " and " +
                   std::to_string(d) + " of shape " + shape.to_string() +
                   "; a variable can be split along one dimension only");
    axis = d;
  }
  return std::max(axis, 0);
}

std::optional<std::int64_t> shard_seed(std::optional<std::int64_t> seed, const shard_info& shard) {
  if (!seed)
    return std::nullopt;
  return *seed + shard.index;
}

} // namespace

partitioner fixed_size_partitioner(int num_shards, int axis) {
  return [num_shards, axis](const tensor_shape& shape, dtype) {
    if (axis < 0 || axis >= shape.rank())
      return std::vector<std::int64_t>{};
    std::vector<std::int64_t> parts(static_cast<std::size_t>(shape.rank()), 1);
    parts[static_cast<std::size_t>(axis)] = std::min<std::int64_t>(num_shards, shape.dim(axis));
    return parts;
  };
}

shard_initializer zeros_initializer() {
  return [](graph& g, const shard_info& shard) {
    return ops::zeros(g, shard.shape.dims(), shard.type);
  };
}

shard_initializer constant_initializer(tensor value) {
  return [value = std::move(value)](graph& g, const shard_info& shard) {
    if (value.shape().rank() == 0)
      return ops::fill(g, shard.shape.dims(), ops::constant(g, value, "value"));
    if (value.shape() != shard.full_shape) {
      g.record_error(error("constant_initializer: a value of shape " + value.shape().to_string() +
                           " cannot initialise a variable of shape " +
                           shard.full_shape.to_string()));
      return output{};
    }
    // Each shard's Const holds its own rows only: a shard on a parameter server never receives
    // the whole value.
    int axis = 0;
    for (int d = 0; d < shard.shape.rank(); ++d)
      if (shard.shape.dim(d) != shard.full_shape.dim(d))
        axis = d;
    auto offset = shard.offset[static_cast<std::size_t>(axis)];
    auto slice = value.sliced(axis, offset, shard.shape.dim(axis));
    if (!slice) {
      g.record_error(slice.error());
      return output{};
    }
    return ops::constant(g, *slice, "Const");
  };
}

shard_initializer random_normal_initializer(double mean, double stddev,
                                            std::optional<std::int64_t> seed) {
  return [=](graph& g, const shard_info& shard) {
    return ops::random_normal(g, shard.shape.dims(), mean, stddev, shard.type,
                              shard_seed(seed, shard));
  };
}

shard_initializer truncated_normal_initializer(double mean, double stddev,
                                               std::optional<std::int64_t> seed) {
  return [=](graph& g, const shard_info& shard) {
    return ops::truncated_normal(g, shard.shape.dims(), mean, stddev, shard.type,
                                 shard_seed(seed, shard));
  };
}

shard_initializer random_uniform_initializer(double minval, double maxval,
                                             std::optional<std::int64_t> seed) {
  return [=](graph& g, const shard_info& shard) {
    return ops::random_uniform(g, shard.shape.dims(), minval, maxval, shard.type,
                               shard_seed(seed, shard));
  };
}

partitioned_variable::partitioned_variable(std::string name, tensor_shape shape, dtype type,
                                           int axis, std::vector<variable> shards,
                                           std::vector<std::int64_t> offsets)
  : name_(std::move(name)), shape_(std::move(shape)), type_(type), axis_(axis),
    shards_(std::move(shards)), offsets_(std::move(offsets)) {}

output partitioned_variable::as_tensor() const {
  if (shards_.empty())
    return output{};
  auto& g = *shards_.front().ref.owner;
  auto base = name_.substr(name_.rfind('/') == std::string::npos ? 0 : name_.rfind('/') + 1);
  auto scope = g.name_scope(base + "/ConcatPartitions");
  std::vector<output> reads;
  for (auto& shard : shards_)
    reads.push_back(shard.read);
  return ops::concat(reads, axis_, "concat");
}

namespace ops {

actorflow::partitioned_variable partitioned_variable(graph& g, const std::string& name,
                                                     tensor_shape shape,
                                                     const shard_initializer& initializer,
                                                     const partitioner& partition, dtype type,
                                                     bool trainable) {
  auto fail = [&](const status& s) {
    g.record_error(s.with_context("partitioned variable '" + name + "'"));
    return actorflow::partitioned_variable{};
  };
  if (!shape.fully_defined() || shape.rank() == 0)
    return fail(error("the shape " + shape.to_string() +
                      " must be fully defined and of rank 1 or more"));
  if (!initializer || !partition)
    return fail(error("an initializer and a partitioner are required"));
  auto parts = partition(shape, type);
  auto axis = split_axis(parts, shape);
  if (!axis)
    return fail(axis.error());

  auto scope = g.name_scope(name);
  auto full_name = g.current_scope();
  // TensorFlow's split: the first (rows % count) shards take one row more than the others.
  auto rows = shape.dim(*axis);
  auto count = parts[static_cast<std::size_t>(*axis)];
  auto base_rows = rows / count;
  auto with_extra = rows % count;
  std::vector<actorflow::variable> shards;
  std::vector<std::int64_t> offsets;
  std::int64_t offset = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    shard_info shard;
    shard.index = static_cast<int>(i);
    shard.type = type;
    shard.full_shape = shape;
    shard.shape = shape;
    shard.shape.set_dim(*axis, base_rows + (i < with_extra ? 1 : 0));
    shard.offset.assign(static_cast<std::size_t>(shape.rank()), 0);
    shard.offset[static_cast<std::size_t>(*axis)] = offset;
    auto part = "part_" + std::to_string(i);
    output initial;
    const auto made_before = static_cast<int>(g.size());
    {
      // The initial value gets the shard's scope ahead of the shard, as make_slot's zeros do.
      auto init_scope = g.name_scope(part + "/Initializer");
      initial = initializer(g, shard);
    }
    if (!initial.valid())
      return fail(error("the initializer made no value for shard " + part));
    if (initial.type() != type || initial.shape() != shard.shape)
      return fail(error("the initializer made a " + std::string{to_string(initial.type())} +
                        initial.shape().to_string() + " value for shard " + part + ", expected " +
                        to_string(type) + shard.shape.to_string()));
    shards.push_back(ops::variable(g, initial, part, trainable));
    // The initial value is made where its shard lives, as TF's variables colocate theirs (the
    // "_class: loc:@" attr scope): a table far bigger than the process that initialises it
    // is never whole there.
    const auto& shard_node = g.at(shards.back().ref.node_id);
    for (auto id = made_before; id < shards.back().ref.node_id; ++id) {
      auto& made = g.at(id);
      if (made.has_attr("colocate_with"))
        continue;
      made.attrs["colocate_with"] = shard_node.name;
      made.requested_device = shard_node.requested_device;
    }
    offsets.push_back(offset);
    offset += shard.shape.dim(*axis);
  }
  return actorflow::partitioned_variable{full_name, std::move(shape), type, *axis,
                                         std::move(shards), std::move(offsets)};
}

} // namespace ops

} // namespace actorflow

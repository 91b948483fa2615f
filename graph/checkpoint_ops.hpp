#pragma once
/// The ops of sharded checkpoints (TF's SaveV2/RestoreV2 on each device of Saver(sharded=True)):
/// each device holding variables writes, and later reads, its own shard file, so no process
/// holds more of the model than its own share (actors/saver.hpp builds them).
///   auto crc = ops::save_shard(step, {w.ref, b.ref}, {"w", "b"}, "/ckpt", 0);   // on w's device
///   auto values = ops::restore_shard(step, crc_fed, {"w", "b"}, {w.ref, b.ref}, "/ckpt", 0);
/// The file is serialization/checkpoint.hpp's checkpoint_shard_path(directory, step, shard).

#include "graph/graph.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace actorflow {

class op_registry;
void register_checkpoint_ops(op_registry& registry);

namespace ops {

/// "SaveShard": writes `values` (named `names`) as shard `shard` of the checkpoint of `step`
/// (an int64 scalar) in `directory`, atomically; output the shard's payload CRC-32 (int64
/// scalar). Colocated with values[0]. Attrs directory, names (one per line), shard.
output save_shard(output step, const std::vector<output>& values,
                  const std::vector<std::string>& names, const std::string& directory, int shard,
                  const std::string& name = "SaveShard");

/// "RestoreShard": reads shard `shard` of the checkpoint of `step` in `directory`, refusing it
/// unless its payload CRC-32 is `expected_crc` (int64 scalar) and each entry of `names` is
/// there with the dtype and a shape compatible with those of `like` (its outputs, in order).
/// Colocated with like[0]. Attrs directory, names, shard, dtypes, shapes.
std::vector<output> restore_shard(output step, output expected_crc,
                                  const std::vector<std::string>& names,
                                  const std::vector<output>& like, const std::string& directory,
                                  int shard, const std::string& name = "RestoreShard");

} // namespace ops

/// The names a shard op's attr "names" lists.
std::vector<std::string> shard_entry_names(const node& n);
/// RestoreShard's declared dtypes and shapes, from its attrs.
std::vector<std::pair<dtype, tensor_shape>> restore_shard_outputs(const node& n);

} // namespace actorflow

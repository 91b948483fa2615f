#pragma once
/// Collectives across tasks as graph nodes (TF's CollectiveReduce, what
/// MultiWorkerMirroredStrategy puts in each worker's graph), and gradient buckets over them
/// (PyTorch DDP's bucket_cap_mb, Horovod's tensor fusion):
///   auto reduced = ops::all_reduce_in_buckets(gradients, "mirrored", {});   // same order
///   // a program offers its collective_group to the device under "mirrored" before the step
/// A CollectiveReduce node runs its device's member of the group offered to it under its
/// collective_group attribute (devices/task_collective.hpp); every member's graph holds the
/// same nodes with the same instance keys. A bucket's all-reduce needs only its own
/// gradients, so the executor starts it as soon as the last of them is made, while the rest
/// of the backward pass goes on.

#include "graph/graph.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace actorflow::ops {

/// "CollectiveReduce": `x` (float32/64, int32/64) reduced by `reduction` ("sum", "mean",
/// "max", "min") across the members of the group offered to its device as `group`; attrs
/// collective_group, instance_key (1 .. 4094, distinct among the graph's collectives of the
/// group; 4095 is the group's own, devices/task_collective.hpp), reduction. The same shape and
/// dtype as `x`.
output collective_reduce(output x, const std::string& group, std::int64_t instance_key,
                         const std::string& reduction = "sum",
                         const std::string& name = "CollectiveReduce");

struct bucket_options {
  /// A bucket holds gradients of at most this many bytes (one larger than it has a bucket of
  /// its own): DDP's bucket_cap_mb, 25 MiB.
  std::uint64_t bytes = std::uint64_t{25} << 20;
  /// The first bucket (the last layers' gradients, made first) is smaller, so that its
  /// all-reduce starts early: DDP's first bucket, 1 MiB. At most `bytes`.
  std::uint64_t first_bytes = std::uint64_t{1} << 20;
  std::string reduction = "mean";
  /// The first bucket's instance key; bucket k has first_instance + k.
  std::int64_t first_instance = 1;
};

/// `values` (gradients, in the order of the forward pass that made their variables) reduced
/// across `group`'s members, in the same order: packed into buckets from the last value back
/// (the order the backward pass makes them), a bucket closing at options.bytes or where the
/// dtype changes; each bucket is one flat CollectiveReduce, cut back into its values' shapes.
/// `buckets`, when given, gets the number of buckets.
std::vector<output> all_reduce_in_buckets(const std::vector<output>& values,
                                          const std::string& group, const bucket_options& options,
                                          int* buckets = nullptr,
                                          const std::string& name = "bucket");

} // namespace actorflow::ops

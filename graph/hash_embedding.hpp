#pragma once
/// Embedding tables with no fixed vocabulary (TF's MutableHashTable-backed embeddings, DeepRec's
/// EmbeddingVariable): rows keyed by int64 ids, made on first touch, spread over several table
/// shards (usually one per ps task) by a hash of the id.
///   hash_embedding_options o; o.admit_after = 3; o.evict_after = 1000;
///   auto users = ops::hash_embedding(g, "users", 16, hash_initializer::uniform(-0.05, 0.05), 4, o);
///   auto rows = ops::hash_embedding_lookup(users, ids, global_step);   // [ids..., 16]
///   gradient_descent_optimizer{0.1}.minimize(loss, users.variables());  // sparse, on the shards
/// Each shard is a node of op "HashEmbeddingTable" whose table lives in its device's resources
/// beside the variables and is served by that variable name's shard actor, whose mailbox orders
/// its lookups, updates, exports and imports (a lookup that makes rows is an update). A row's
/// initial value depends only on (seed, id, column), so every process and every restart makes
/// the same row for an id. Only float32 rows.
///
/// Admission: with admit_after = N > 1 an id gets a row at its N-th lookup; before, its lookups
/// return zeros (DeepRec's default_value_no_permission) and its gradients are dropped. Eviction:
/// with evict_after = T > 0 a row (or a not yet admitted id's count) untouched by lookups for more
/// than T steps is gone: the next lookup sees a new id. Steps are the lookups' `global_step`
/// input, or without one the table's own count of lookups.

#include "graph/graph.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace actorflow {

/// How a new row is filled, element by element, from (seed, id, column) alone.
struct hash_initializer {
  /// "zeros", "constant" (a), "uniform" (in [a, b)), "normal" (mean a, stddev b).
  std::string kind = "zeros";
  double a = 0;
  double b = 0;
  static hash_initializer zeros() { return {}; }
  static hash_initializer constant(double value) { return {"constant", value, 0}; }
  static hash_initializer uniform(double low, double high) { return {"uniform", low, high}; }
  static hash_initializer normal(double mean, double stddev) { return {"normal", mean, stddev}; }
};

struct hash_embedding_options {
  /// An id gets its row at its admit_after-th lookup (0 or 1: at once).
  std::int64_t admit_after = 0;
  /// Rows untouched by lookups for more than this many steps are dropped (0: never).
  std::int64_t evict_after = 0;
  /// Seeds the initializer (with the id and column).
  std::uint64_t seed = 0;
};

/// A hash embedding: its shards' table nodes, in shard order.
struct hash_embedding {
  std::string name;
  std::int64_t dim = 0;
  std::vector<output> shards;
  bool valid() const { return !shards.empty(); }
  /// One `variable` per shard (ref and read: the table node), for compute_gradients,
  /// minimize and saver: the optimizers apply its sparse gradients with the hash table updates.
  std::vector<variable> variables() const;
  /// Each shard's row count (admitted, live), int64 scalars: output 1 of its table node.
  std::vector<output> sizes() const;
};

/// splitmix64's finaliser (Steele, Lea and Flood 2014): a cheap bijective mix of 64 bits, the one
/// hash behind the tables' routing and initial rows (and the synthetic click log's draws).
std::uint64_t splitmix64(std::uint64_t x);

/// The shard of `id` among `shards`: splitmix64(id) mod shards, so consecutive ids spread.
std::int64_t hash_shard_of(std::int64_t id, std::int64_t shards);

/// Whether `v` is a hash table shard (its ref is a HashEmbeddingTable node).
bool is_hash_table(const variable& v);

class gradient_registry;
class op_registry;
/// The hash table ops' definitions (graph/standard_ops.cpp calls it) and HashEmbeddingFind's
/// gradient (an IndexedSlices of its rows at its ids, graph/sparse_ops.cpp calls it).
void register_hash_embedding_ops(op_registry& registry);
void register_hash_embedding_gradients(gradient_registry& registry);

namespace ops {

/// `shards` table nodes "<name>/part_<k>" made in the caller's scopes (a replica_device_setter
/// puts them on the ps tasks in turn). Errors (dim < 1, shards < 1, an unknown initializer,
/// negative admit_after or evict_after) are recorded in the graph.
hash_embedding hash_embedding(graph& g, const std::string& name, std::int64_t dim,
                              hash_initializer initializer, int shards,
                              const hash_embedding_options& options = {});

/// The rows of `ids` (int64, any shape with at most one unknown dimension): [ids..., dim]. The
/// ids are made unique and routed by hash where they are; each shard's device looks up only
/// its ids (making rows it has not got) and sends back their rows. `global_step` (an int64
/// scalar, optional) is the step admission and eviction count in.
output hash_embedding_lookup(const actorflow::hash_embedding& table, output ids,
                             output global_step = {},
                             const std::string& name = "hash_embedding_lookup");

/// "HashEmbeddingExport": a shard's contents, for checkpoints, in id order: keys [n] (int64),
/// rows [n, dim * (1 + slots)] (float32: the value, then each optimizer slot the table holds),
/// last_step [n] (int64), and the ids not yet admitted with their counts ([m], [m]).
std::vector<output> hash_embedding_export(const output& table,
                                          const std::string& name = "HashEmbeddingExport");
/// "HashEmbeddingImport": replaces a shard's contents with an export's (the five tensors).
output hash_embedding_import(const output& table, const std::vector<output>& contents,
                             const std::string& name = "HashEmbeddingImport");

} // namespace ops

} // namespace actorflow

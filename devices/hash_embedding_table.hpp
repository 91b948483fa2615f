#pragma once
/// One shard of a hash embedding (graph/hash_embedding.hpp): float32 rows keyed by int64 ids,
/// made on first touch, admitted after a number of lookups, evicted after steps untouched, with
/// the optimizer slots (Adagrad's accumulator, FTRL's two) stored beside each row.
///   hash_embedding_table t{{/*dim=*/4, hash_initializer::uniform(-1, 1), 0, 0, 7, {}}};
///   t.lookup(ids, n, step, out);                     // out: n x 4, rows made as needed
///   if (float* row = t.row_for_update(id)) ...       // null: not admitted (gradient dropped)
/// A plain class, not thread-safe: it lives in a variable_state and is used under its mutex,
/// in its shard actor's turn.

#include "graph/hash_embedding.hpp"
#include "graph/status.hpp"

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace actorflow {

class hash_embedding_table {
public:
  struct config {
    std::int64_t dim = 1;
    hash_initializer initializer;
    std::int64_t admit_after = 0;
    std::int64_t evict_after = 0;
    std::uint64_t seed = 0;
    /// Optimizer slots known when the table is made (name, initial value), in column order.
    std::vector<std::pair<std::string, float>> slots;
  };

  /// What a checkpoint holds of a table, in id order.
  struct contents {
    std::vector<std::int64_t> keys;
    /// keys.size() x width(): each row's value, then its slots.
    std::vector<float> rows;
    std::vector<std::int64_t> last_steps;
    /// Ids seen but not admitted yet, and how often they were seen.
    std::vector<std::int64_t> candidates;
    std::vector<std::int64_t> counts;
  };

  explicit hash_embedding_table(config c);

  std::int64_t dim() const { return config_.dim; }
  /// Floats per row: the value and every slot.
  std::int64_t width() const { return config_.dim * (1 + static_cast<std::int64_t>(config_.slots.size())); }
  /// Rows admitted, counted as they are made and dropped (an expired row counts until the
  /// sweep drops it), so that reading it costs nothing per step.
  std::int64_t size() const { return admitted_; }
  /// The step of the latest lookup (or of the restored contents).
  std::int64_t step() const { return step_; }

  /// One lookup of `n` ids at `step` (negative: one step after the previous lookup's): each id
  /// is counted and touched; an admitted id's row (made when new) goes to out, dim floats per
  /// id, anything else zeros. Then rows expired at `step` are dropped now and then (their
  /// lookups already treat them as gone).
  void lookup(const std::int64_t* ids, std::int64_t n, std::int64_t step, float* out);

  /// The row of `id` (width() floats: value then slots) for an update; null when the id has no
  /// admitted, live row (its gradient is dropped).
  float* row_for_update(std::int64_t id);

  /// The column of slot `name` (its offset in a row); a slot new to the table is added to every
  /// row at `initial`.
  std::int64_t slot_offset(const std::string& name, float initial);

  /// The live contents, in id order.
  contents export_contents() const;
  /// Replaces everything with `c` (checked first: sizes, width, duplicate keys; the error names
  /// `what`, and nothing changes).
  status import_contents(const contents& c, const std::string& what);

  /// The initial value of `id`'s element `column` (a pure function of seed, id and column).
  static float initial_value(const hash_initializer& init, std::uint64_t seed, std::int64_t id,
                             std::int64_t column);

private:
  struct entry {
    /// Empty until the id is admitted.
    std::vector<float> data;
    std::int64_t count = 0;
    std::int64_t last_step = 0;
  };
  bool expired(const entry& e) const;
  void sweep();
  std::vector<float> new_row(std::int64_t id) const;

  config config_;
  std::unordered_map<std::int64_t, entry> entries_;
  std::int64_t step_ = 0;
  std::int64_t last_sweep_ = 0;
  std::int64_t admitted_ = 0;
};

} // namespace actorflow

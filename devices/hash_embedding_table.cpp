#include "devices/hash_embedding_table.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace actorflow {

namespace {

/// A uniform double in [0, 1) from (seed, id, counter).
double unit(std::uint64_t seed, std::int64_t id, std::uint64_t counter) {
  auto h = splitmix64(splitmix64(splitmix64(seed) ^ static_cast<std::uint64_t>(id)) ^ counter);
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

} // namespace

hash_embedding_table::hash_embedding_table(config c) : config_(std::move(c)) {}

float hash_embedding_table::initial_value(const hash_initializer& init, std::uint64_t seed,
                                          std::int64_t id, std::int64_t column) {
  auto c = static_cast<std::uint64_t>(column);
  if (init.kind == "constant")
    return static_cast<float>(init.a);
  if (init.kind == "uniform")
    return static_cast<float>(init.a + (init.b - init.a) * unit(seed, id, c));
  if (init.kind == "normal") {
    // Box-Muller from two draws of the element's own counters.
    double u1 = unit(seed, id, 2 * c + 0x100000000ULL), u2 = unit(seed, id, 2 * c + 0x100000001ULL);
    return static_cast<float>(init.a + init.b * std::sqrt(-2.0 * std::log(1.0 - u1)) *
                                         std::cos(6.283185307179586 * u2));
  }
  return 0.0f;
}

bool hash_embedding_table::expired(const entry& e) const {
  return config_.evict_after > 0 && step_ - e.last_step > config_.evict_after;
}

std::vector<float> hash_embedding_table::new_row(std::int64_t id) const {
  std::vector<float> row(static_cast<std::size_t>(width()));
  for (std::int64_t c = 0; c < config_.dim; ++c)
    row[static_cast<std::size_t>(c)] = initial_value(config_.initializer, config_.seed, id, c);
  for (std::size_t s = 0; s < config_.slots.size(); ++s)
    std::fill_n(row.begin() + static_cast<std::ptrdiff_t>((s + 1) * static_cast<std::size_t>(config_.dim)),
                config_.dim, config_.slots[s].second);
  return row;
}

void hash_embedding_table::lookup(const std::int64_t* ids, std::int64_t n, std::int64_t step,
                                  float* out) {
  step_ = step >= 0 ? std::max(step_, step) : step_ + 1;
  auto admit_at = std::max<std::int64_t>(1, config_.admit_after);
  auto dim = static_cast<std::size_t>(config_.dim);
  for (std::int64_t i = 0; i < n; ++i) {
    auto& e = entries_[ids[i]];
    // Gone for its lookups once expired, whether the sweep has dropped it yet or not.
    if (expired(e)) {
      admitted_ -= e.data.empty() ? 0 : 1;
      e = entry{};
    }
    ++e.count;
    e.last_step = step_;
    if (e.data.empty() && e.count >= admit_at) {
      e.data = new_row(ids[i]);
      ++admitted_;
    }
    auto* dst = out + static_cast<std::size_t>(i) * dim;
    if (e.data.empty())
      std::fill_n(dst, dim, 0.0f);
    else
      std::copy_n(e.data.begin(), dim, dst);
  }
  // A sweep a quarter of the eviction span apart: a dropped row's memory comes back within
  // 1.25 T steps, at one pass over the table per T / 4 steps.
  if (config_.evict_after > 0 && step_ - last_sweep_ >= std::max<std::int64_t>(1, config_.evict_after / 4))
    sweep();
}

void hash_embedding_table::sweep() {
  for (auto i = entries_.begin(); i != entries_.end();)
    if (expired(i->second)) {
      admitted_ -= i->second.data.empty() ? 0 : 1;
      i = entries_.erase(i);
    } else {
      ++i;
    }
  last_sweep_ = step_;
}

float* hash_embedding_table::row_for_update(std::int64_t id) {
  auto i = entries_.find(id);
  if (i == entries_.end() || i->second.data.empty() || expired(i->second))
    return nullptr;
  return i->second.data.data();
}

std::int64_t hash_embedding_table::slot_offset(const std::string& name, float initial) {
  for (std::size_t s = 0; s < config_.slots.size(); ++s)
    if (config_.slots[s].first == name)
      return static_cast<std::int64_t>(s + 1) * config_.dim;
  config_.slots.emplace_back(name, initial);
  for (auto& [id, e] : entries_)
    if (!e.data.empty())
      e.data.resize(static_cast<std::size_t>(width()), initial);
  return static_cast<std::int64_t>(config_.slots.size()) * config_.dim;
}

hash_embedding_table::contents hash_embedding_table::export_contents() const {
  std::vector<std::int64_t> admitted, waiting;
  for (auto& [id, e] : entries_)
    if (!expired(e))
      (e.data.empty() ? waiting : admitted).push_back(id);
  std::sort(admitted.begin(), admitted.end());
  std::sort(waiting.begin(), waiting.end());
  contents c;
  c.keys = admitted;
  c.rows.reserve(admitted.size() * static_cast<std::size_t>(width()));
  for (auto id : admitted) {
    auto& e = entries_.at(id);
    c.rows.insert(c.rows.end(), e.data.begin(), e.data.end());
    c.last_steps.push_back(e.last_step);
  }
  c.candidates = waiting;
  for (auto id : waiting)
    c.counts.push_back(entries_.at(id).count);
  return c;
}

status hash_embedding_table::import_contents(const contents& c, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_argument, what + ": " + why);
  };
  auto n = c.keys.size();
  auto w = static_cast<std::size_t>(width());
  if (c.rows.size() != n * w)
    return bad(std::to_string(n) + " keys need " + std::to_string(n * w) + " row values (" +
               std::to_string(w) + " per row: dim " + std::to_string(config_.dim) + " and " +
               std::to_string(config_.slots.size()) + " slots), got " + std::to_string(c.rows.size()));
  if (c.last_steps.size() != n)
    return bad(std::to_string(n) + " keys but " + std::to_string(c.last_steps.size()) + " steps");
  if (c.candidates.size() != c.counts.size())
    return bad(std::to_string(c.candidates.size()) + " candidate ids but " +
               std::to_string(c.counts.size()) + " counts");
  std::unordered_set<std::int64_t> seen;
  for (auto id : c.keys)
    if (!seen.insert(id).second)
      return bad("id " + std::to_string(id) + " is listed twice");
  for (auto id : c.candidates)
    if (!seen.insert(id).second)
      return bad("id " + std::to_string(id) + " is listed twice");
  std::unordered_map<std::int64_t, entry> entries;
  entries.reserve(seen.size());
  std::int64_t step = 0;
  for (std::size_t i = 0; i < n; ++i) {
    auto& e = entries[c.keys[i]];
    e.data.assign(c.rows.begin() + static_cast<std::ptrdiff_t>(i * w),
                  c.rows.begin() + static_cast<std::ptrdiff_t>((i + 1) * w));
    e.count = std::max<std::int64_t>(1, config_.admit_after);
    e.last_step = c.last_steps[i];
    step = std::max(step, e.last_step);
  }
  // Candidates' last lookups are not saved: they count from the restored step.
  for (std::size_t i = 0; i < c.candidates.size(); ++i) {
    auto& e = entries[c.candidates[i]];
    e.count = c.counts[i];
    e.last_step = step;
  }
  entries_ = std::move(entries);
  admitted_ = static_cast<std::int64_t>(n);
  step_ = step;
  last_sweep_ = step;
  return {};
}

} // namespace actorflow

#include "train/click_log.hpp"

#include "graph/hash_embedding.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace actorflow::train {

namespace {

std::uint64_t mix(std::uint64_t x) { return splitmix64(x); }

std::uint64_t hash_of(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0) {
  return mix(mix(mix(a) ^ b) ^ c);
}

double unit(std::uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

/// N(0, 1) from a hash (Box-Muller).
double normal_of(std::uint64_t h) {
  double u1 = unit(mix(h)), u2 = unit(mix(h ^ 0x5bd1e995ULL));
  return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(6.283185307179586 * u2);
}

/// The true model's weights: pure functions of the seed, a tag and the ranks.
double weight(std::uint64_t seed, std::uint64_t tag, std::int64_t a, std::int64_t b = 0) {
  return 0.5 * normal_of(hash_of(seed ^ (tag << 56), static_cast<std::uint64_t>(a), static_cast<std::uint64_t>(b)));
}

std::int64_t id_of(std::uint64_t field, std::int64_t a, std::int64_t b = 0) {
  return static_cast<std::int64_t>(hash_of(0xfeedULL + field, static_cast<std::uint64_t>(a), static_cast<std::uint64_t>(b)) >> 2);
}

tensor ids_tensor(const std::vector<std::int64_t>& v) {
  return tensor::from_vector<std::int64_t>(v, tensor_shape{std::vector<std::int64_t>{static_cast<std::int64_t>(v.size())}});
}

} // namespace

click_batch click_log::next(std::int64_t n) {
  auto batch = make(drawn_, n);
  drawn_ += static_cast<std::uint64_t>(n);
  return batch;
}

click_batch click_log::evaluation(std::int64_t n) const { return make(std::uint64_t{1} << 62, n); }

click_batch click_log::make(std::uint64_t first, std::int64_t n) const {
  const auto seed = options_.seed;
  const double log_v = std::log(static_cast<double>(options_.ids_per_field));
  std::vector<std::int64_t> user(static_cast<std::size_t>(n)), item(user.size()), context(user.size()),
    cross(user.size());
  click_batch b;
  b.true_logits.resize(user.size());
  b.label_values.resize(user.size());
  for (std::int64_t i = 0; i < n; ++i) {
    auto example = first + static_cast<std::uint64_t>(i);
    std::int64_t rank[3];
    for (std::uint64_t f = 0; f < 3; ++f) {
      auto r = static_cast<std::int64_t>(std::exp(log_v * unit(hash_of(seed, example, f + 1))));
      rank[f] = std::clamp<std::int64_t>(r, 1, options_.ids_per_field);
    }
    double logit = -1.0 + weight(seed, 1, rank[0]) + weight(seed, 2, rank[1]) + weight(seed, 3, rank[2]) +
                   weight(seed, 4, rank[0], rank[1]);
    for (std::int64_t k = 0; k < 4; ++k)
      logit += weight(seed, 5, rank[0], k) * weight(seed, 6, rank[1], k);
    auto at = static_cast<std::size_t>(i);
    user[at] = id_of(0, rank[0]);
    item[at] = id_of(1, rank[1]);
    context[at] = id_of(2, rank[2]);
    cross[at] = id_of(3, rank[0], rank[1]);
    b.true_logits[at] = logit;
    b.label_values[at] = unit(hash_of(seed, example, 99)) < 1.0 / (1.0 + std::exp(-logit)) ? 1.0f : 0.0f;
  }
  b.user = ids_tensor(user);
  b.item = ids_tensor(item);
  b.context = ids_tensor(context);
  b.cross = ids_tensor(cross);
  b.labels = tensor::from_vector<float>(b.label_values, tensor_shape{std::vector<std::int64_t>{n, 1}});
  return b;
}

double auc(const std::vector<double>& scores, const std::vector<float>& labels) {
  std::vector<std::size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return scores[a] < scores[b]; });
  // Sum of the positives' ranks (ties share their mean rank): Mann-Whitney.
  double positives = 0, rank_sum = 0;
  for (std::size_t i = 0; i < order.size();) {
    auto j = i;
    while (j < order.size() && scores[order[j]] == scores[order[i]])
      ++j;
    double mean_rank = (static_cast<double>(i) + static_cast<double>(j) + 1) / 2;
    for (auto k = i; k < j; ++k)
      if (labels[order[k]] > 0.5f) {
        positives += 1;
        rank_sum += mean_rank;
      }
    i = j;
  }
  double negatives = static_cast<double>(scores.size()) - positives;
  if (positives == 0 || negatives == 0)
    return 0.5;
  return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives);
}

} // namespace actorflow::train

#include "devices/collective_schedule.hpp"

#include <algorithm>
#include <utility>

namespace actorflow {

const char* to_string(reduction r) {
  switch (r) {
    case reduction::sum: return "sum";
    case reduction::mean: return "mean";
    case reduction::max: return "max";
    case reduction::min: return "min";
  }
  return "?";
}

std::optional<reduction> parse_reduction(std::string_view name) {
  for (auto r : {reduction::sum, reduction::mean, reduction::max, reduction::min})
    if (name == to_string(r))
      return r;
  return std::nullopt;
}

const char* to_string(collective_kind k) {
  switch (k) {
    case collective_kind::all_reduce: return "all-reduce";
    case collective_kind::broadcast: return "broadcast";
    case collective_kind::all_gather: return "all-gather";
  }
  return "?";
}

const char* to_string(collective_algorithm a) {
  switch (a) {
    case collective_algorithm::automatic: return "auto";
    case collective_algorithm::ring: return "ring";
    case collective_algorithm::halving_doubling: return "halving-doubling";
  }
  return "?";
}

std::optional<collective_algorithm> parse_collective_algorithm(std::string_view name) {
  for (auto a : {collective_algorithm::automatic, collective_algorithm::ring,
                 collective_algorithm::halving_doubling})
    if (name == to_string(a))
      return a;
  return std::nullopt;
}

const char* to_string(collective_phase p) {
  switch (p) {
    case collective_phase::fold_in: return "fold-in";
    case collective_phase::reduce_scatter: return "reduce-scatter";
    case collective_phase::all_gather: return "all-gather";
    case collective_phase::fold_out: return "fold-out";
    case collective_phase::broadcast: return "broadcast";
  }
  return "?";
}

int collective_schedule::find_receive(int peer, std::int64_t tag) const {
  for (std::size_t i = 0; i < actions.size(); ++i) {
    auto& a = actions[i];
    if (a.kind == collective_action::receive && a.peer == peer && a.tag == tag)
      return static_cast<int>(i);
  }
  return -1;
}

std::uint64_t collective_schedule::bytes_sent(std::size_t element_bytes) const {
  std::uint64_t total = 0;
  for (auto& a : actions)
    if (a.kind == collective_action::send)
      total += static_cast<std::uint64_t>(a.range.size()) * element_bytes;
  return total;
}

namespace {

/// Cuts ranges into chunks, adds the actions of one round and, at the end, works out which
/// action waits for which.
class schedule_builder {
public:
  schedule_builder(collective_kind kind, collective_algorithm algorithm, int rank, int size,
                   std::int64_t elements, std::int64_t chunk_elements)
    : chunk_(std::max<std::int64_t>(chunk_elements, 1)) {
    s_.kind = kind;
    s_.algorithm = algorithm;
    s_.rank = rank;
    s_.size = size;
    s_.elements = std::max<std::int64_t>(elements, 0);
  }

  /// One round: send `out` to `to` and receive `in` from `from` (either peer -1: none),
  /// chunk by chunk, interleaved so that the scan order follows the pipeline.
  void round(collective_phase phase, int round, int to, element_range out, int from,
             element_range in, bool reduce) {
    auto outs = to < 0 ? std::vector<element_range>{} : chunks(out);
    auto ins = from < 0 ? std::vector<element_range>{} : chunks(in);
    for (std::size_t c = 0; c < std::max(outs.size(), ins.size()); ++c) {
      auto tag = (static_cast<std::int64_t>(round) << 24) | static_cast<std::int64_t>(c);
      if (c < outs.size())
        add({collective_action::send, to, outs[c], false, tag, phase, round, {}});
      if (c < ins.size())
        add({collective_action::receive, from, ins[c], reduce, tag, phase, round, {}});
    }
  }

  collective_schedule finish() {
    auto& acts = s_.actions;
    for (std::size_t i = 0; i < acts.size(); ++i)
      for (std::size_t j = 0; j < i; ++j) {
        if (!acts[i].range.overlaps(acts[j].range))
          continue;
        // A send waits for the receives that write its range; a receive for everything on it.
        if (acts[i].kind == collective_action::receive || acts[j].kind == collective_action::receive)
          acts[i].after.push_back(static_cast<int>(j));
      }
    return std::move(s_);
  }

private:
  /// `r` in chunks of chunk_ elements (more when there would be too many); none when empty.
  std::vector<element_range> chunks(element_range r) const {
    std::vector<element_range> out;
    if (r.empty())
      return out;
    auto step = std::max(chunk_, (r.size() + max_chunks_per_range - 1) / max_chunks_per_range);
    for (auto b = r.begin; b < r.end; b += step)
      out.push_back({b, std::min(r.end, b + step)});
    return out;
  }

  void add(collective_action a) { s_.actions.push_back(std::move(a)); }

  collective_schedule s_;
  std::int64_t chunk_;
};

/// Segment i of `elements` cut into `n` near-equal segments (the first ones may be empty when
/// there are fewer elements than members).
element_range segment(std::int64_t elements, int n, int i) {
  return {elements * i / n, elements * (i + 1) / n};
}

int mod(int a, int n) { return ((a % n) + n) % n; }

} // namespace

collective_schedule ring_all_reduce_schedule(int rank, int size, std::int64_t elements,
                                             std::int64_t chunk_elements) {
  schedule_builder b{collective_kind::all_reduce, collective_algorithm::ring, rank, size,
                     elements, chunk_elements};
  if (size < 2)
    return b.finish();
  int next = mod(rank + 1, size);
  int prev = mod(rank - 1, size);
  // Reduce-scatter: after round s, segment rank - s - 1 holds the sum of s + 2 members; after
  // size - 1 rounds this member holds segment rank + 1 whole.
  for (int s = 0; s < size - 1; ++s)
    b.round(collective_phase::reduce_scatter, s, next, segment(elements, size, mod(rank - s, size)),
            prev, segment(elements, size, mod(rank - s - 1, size)), true);
  // All-gather: each finished segment goes once round the ring.
  for (int s = 0; s < size - 1; ++s)
    b.round(collective_phase::all_gather, size - 1 + s, next,
            segment(elements, size, mod(rank + 1 - s, size)), prev,
            segment(elements, size, mod(rank - s, size)), false);
  return b.finish();
}

collective_schedule halving_doubling_all_reduce_schedule(int rank, int size,
                                                         std::int64_t elements,
                                                         std::int64_t chunk_elements) {
  schedule_builder b{collective_kind::all_reduce, collective_algorithm::halving_doubling, rank,
                     size, elements, chunk_elements};
  if (size < 2)
    return b.finish();
  int p = 1;
  int levels = 0;
  while (p * 2 <= size) {
    p *= 2;
    ++levels;
  }
  const int extra = size - p;
  const element_range whole{0, elements};
  // The first 2 * extra ranks pair up: the even one folds in and sits the rest out.
  if (rank < 2 * extra && rank % 2 == 0) {
    b.round(collective_phase::fold_in, 0, rank + 1, whole, -1, {}, true);
    b.round(collective_phase::fold_out, 2 * levels + 1, -1, {}, rank + 1, whole, false);
    return b.finish();
  }
  const int v = rank < 2 * extra ? rank / 2 : rank - extra; // rank among the p that stay
  auto real = [extra](int u) { return u < extra ? 2 * u + 1 : u + extra; };
  if (rank < 2 * extra)
    b.round(collective_phase::fold_in, 0, -1, {}, rank - 1, whole, true);
  // Recursive halving: partners share a range; each keeps one half and reduces the other's
  // copy of it into its own. `kept` remembers the ranges for the way back.
  std::vector<element_range> kept;
  element_range range = whole;
  for (int k = 0; k < levels; ++k) {
    int d = p >> (k + 1);
    int partner = real(v ^ d);
    auto mid = range.begin + range.size() / 2;
    element_range low{range.begin, mid}, high{mid, range.end};
    bool lower = (v & d) == 0;
    auto keep = lower ? low : high;
    auto give = lower ? high : low;
    b.round(collective_phase::reduce_scatter, 1 + k, partner, give, partner, keep, true);
    kept.push_back(range);
    range = keep;
  }
  // Recursive doubling: the same pairs in reverse, each sending what it holds finished and
  // receiving the partner's half of the range they shared.
  for (int k = levels - 1; k >= 0; --k) {
    int d = p >> (k + 1);
    int partner = real(v ^ d);
    auto shared = kept[static_cast<std::size_t>(k)];
    element_range other = range.begin == shared.begin ? element_range{range.end, shared.end}
                                                      : element_range{shared.begin, range.begin};
    b.round(collective_phase::all_gather, 1 + levels + (levels - 1 - k), partner, range, partner,
            other, false);
    range = shared;
  }
  if (rank < 2 * extra)
    b.round(collective_phase::fold_out, 2 * levels + 1, rank - 1, whole, -1, {}, false);
  return b.finish();
}

collective_schedule ring_all_gather_schedule(int rank, int size, std::int64_t elements_per_member,
                                             std::int64_t chunk_elements) {
  auto per = std::max<std::int64_t>(elements_per_member, 0);
  schedule_builder b{collective_kind::all_gather, collective_algorithm::ring, rank, size,
                     per * size, chunk_elements};
  auto seg = [per](int i) { return element_range{per * i, per * (i + 1)}; };
  for (int s = 0; s < size - 1; ++s)
    b.round(collective_phase::all_gather, s, mod(rank + 1, size), seg(mod(rank - s, size)),
            mod(rank - 1, size), seg(mod(rank - s - 1, size)), false);
  return b.finish();
}

collective_schedule tree_broadcast_schedule(int rank, int size, int root, std::int64_t elements,
                                            std::int64_t chunk_elements) {
  schedule_builder b{collective_kind::broadcast, collective_algorithm::ring, rank, size, elements,
                     chunk_elements};
  const int v = mod(rank - root, size);
  auto real = [root, size](int u) { return (u + root) % size; };
  const element_range whole{0, elements};
  for (int k = 0; size > 1 && (1 << k) < size; ++k) {
    int d = 1 << k;
    if (v < d && v + d < size)
      b.round(collective_phase::broadcast, k, real(v + d), whole, -1, {}, false);
    else if (v >= d && v < 2 * d)
      b.round(collective_phase::broadcast, k, -1, {}, real(v - d), whole, false);
  }
  return b.finish();
}

collective_algorithm choose_all_reduce_algorithm(std::size_t bytes, int,
                                                 const collective_tuning& tuning) {
  if (tuning.algorithm != collective_algorithm::automatic)
    return tuning.algorithm;
  return bytes >= tuning.ring_min_bytes ? collective_algorithm::ring
                                        : collective_algorithm::halving_doubling;
}

collective_schedule make_collective_schedule(collective_kind kind, int rank, int size,
                                             std::int64_t elements, std::size_t element_bytes,
                                             const collective_tuning& tuning, int root) {
  auto chunk = static_cast<std::int64_t>(
    std::max<std::size_t>(tuning.chunk_bytes / std::max<std::size_t>(element_bytes, 1), 1));
  switch (kind) {
    case collective_kind::broadcast:
      return tree_broadcast_schedule(rank, size, root, elements, chunk);
    case collective_kind::all_gather:
      return ring_all_gather_schedule(rank, size, elements, chunk);
    case collective_kind::all_reduce: break;
  }
  auto bytes = static_cast<std::size_t>(std::max<std::int64_t>(elements, 0)) * element_bytes;
  if (choose_all_reduce_algorithm(bytes, size, tuning) == collective_algorithm::ring)
    return ring_all_reduce_schedule(rank, size, elements, chunk);
  return halving_doubling_all_reduce_schedule(rank, size, elements, chunk);
}

} // namespace actorflow

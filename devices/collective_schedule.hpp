#pragma once
/// Schedules of collectives across the members of a group (TensorFlow's CollectiveAllReduce
/// between tasks, MultiWorkerMirroredStrategy): for one member, the ordered list of pieces it
/// sends and receives, and what each received piece does to its buffer. Plain data, the same on
/// every member (each computes its own from rank and size), run by collective_execution
/// (devices/collective_execution.hpp) and sent by whoever carries the pieces (actors/collective.hpp).
///   auto plan = ring_all_reduce_schedule(rank, size, elements, chunk_elements);
///   for (auto& a : plan.actions) ... a.kind == collective_action::send ? a.peer : ...
/// A piece is named by its tag, which sender and receiver derive alike from (round, chunk), so
/// members never exchange step numbers; empty ranges are left out on both sides (a tensor
/// smaller than the group).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace actorflow {

/// How an all-reduce combines its members' tensors (TF's merge_op; mean is TF's final_op Div).
enum class reduction : std::uint8_t { sum = 0, mean, max, min };
/// "sum", "mean", "max", "min".
const char* to_string(reduction r);
std::optional<reduction> parse_reduction(std::string_view name);

/// The collectives a group runs.
enum class collective_kind : std::uint8_t { all_reduce = 0, broadcast, all_gather };
const char* to_string(collective_kind k);

/// How an all-reduce moves its data. `automatic` picks by size (choose_all_reduce_algorithm).
enum class collective_algorithm : std::uint8_t { automatic = 0, ring, halving_doubling };
const char* to_string(collective_algorithm a);
std::optional<collective_algorithm> parse_collective_algorithm(std::string_view name);

/// Elements [begin, end) of a member's working buffer (flat, in elements, not bytes).
struct element_range {
  std::int64_t begin = 0;
  std::int64_t end = 0;

  std::int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  bool overlaps(const element_range& o) const {
    return !empty() && !o.empty() && begin < o.end && o.begin < end;
  }
  friend bool operator==(const element_range& a, const element_range& b) {
    return a.begin == b.begin && a.end == b.end;
  }
};

/// The part of an algorithm an action belongs to, for error messages ("lost in the
/// reduce-scatter") and tests.
enum class collective_phase : std::uint8_t {
  /// Halving-doubling with a group that is no power of two: the extra members hand their
  /// tensors in first, and get the result back last.
  fold_in = 0,
  reduce_scatter,
  all_gather,
  fold_out,
  broadcast,
};
const char* to_string(collective_phase p);

struct collective_action {
  enum kind_type : std::uint8_t { send = 0, receive };
  kind_type kind = send;
  /// The member (rank) sent to or received from.
  int peer = 0;
  /// Where in the buffer: read from for a send; for a receive, combined into (reduce) or
  /// overwritten (copy).
  element_range range;
  /// A received piece is reduced into range (true) or copied over it (false).
  bool reduce = false;
  /// Sender and receiver give the piece the same tag: round << 24 | chunk.
  std::int64_t tag = 0;
  collective_phase phase = collective_phase::reduce_scatter;
  /// The algorithm's round, counted across phases.
  int round = 0;
  /// Earlier actions (indices) that must be done before this one: for a send, the receives
  /// that write its range (its data must be final); for a receive, every earlier action on its
  /// range (a send must have taken its copy before the range changes, and receives apply in
  /// order). Computed by the schedule's builder; collective_execution follows them, which is
  /// what lets round r+1's chunk c leave while round r's chunk c+1 is still on its way.
  std::vector<int> after;
};

/// One member's schedule: what to do, in order of priority (an action runs once its `after`
/// actions are done, so several may be under way at once).
struct collective_schedule {
  collective_kind kind = collective_kind::all_reduce;
  collective_algorithm algorithm = collective_algorithm::ring;
  int rank = 0;
  int size = 1;
  /// Elements of the working buffer (an all-gather's is size times a member's input).
  std::int64_t elements = 0;
  std::vector<collective_action> actions;

  /// The index of the receive from `peer` with `tag`, or -1.
  int find_receive(int peer, std::int64_t tag) const;
  /// Bytes this member sends in all, for elements of `element_bytes`.
  std::uint64_t bytes_sent(std::size_t element_bytes) const;
};

/// Largest number of chunks one range may be cut into (tags hold 24 bits of chunk index).
inline constexpr std::int64_t max_chunks_per_range = std::int64_t{1} << 24;

/// Ring all-reduce (reduce-scatter then all-gather over `size` near-equal segments, each sent
/// in chunks of at most `chunk_elements`, so a link carries chunk c + 1 while chunk c is
/// reduced): 2 (size - 1) rounds, each member sending 2 (size - 1) / size of the tensor, the
/// bandwidth optimum. Every element's sum is made once, by one member, in ring order, and
/// copied to the rest: every member ends with the same bits.
collective_schedule ring_all_reduce_schedule(int rank, int size, std::int64_t elements,
                                             std::int64_t chunk_elements);

/// Recursive halving (reduce-scatter) then recursive doubling (all-gather), Rabenseifner's
/// algorithm: 2 log2(p) rounds for p the largest power of two <= size. The first 2 (size - p)
/// ranks pair up: each even one folds its tensor into the odd one next to it first and gets the
/// result back last. Fewer rounds than the ring: for small tensors, where latency dominates.
/// Pieces are chunked as the ring's are.
collective_schedule halving_doubling_all_reduce_schedule(int rank, int size,
                                                         std::int64_t elements,
                                                         std::int64_t chunk_elements);

/// Ring all-gather: the buffer holds size segments of `elements_per_member`, this member's at
/// its rank; size - 1 rounds pass each segment along the ring, in chunks.
collective_schedule ring_all_gather_schedule(int rank, int size, std::int64_t elements_per_member,
                                             std::int64_t chunk_elements);

/// Binomial-tree broadcast from `root`: ceil(log2(size)) rounds, chunked, so a member passes
/// chunk c on while chunk c + 1 reaches it.
collective_schedule tree_broadcast_schedule(int rank, int size, int root, std::int64_t elements,
                                            std::int64_t chunk_elements);

/// When an all-reduce takes which algorithm, and how large its pieces are.
struct collective_tuning {
  /// automatic: chosen by size; otherwise this one.
  collective_algorithm algorithm = collective_algorithm::automatic;
  /// Tensors of at least this many bytes take the ring (when automatic): above it the ring's
  /// bandwidth wins over halving-doubling's fewer rounds.
  std::size_t ring_min_bytes = std::size_t{256} << 10;
  /// Largest piece sent at once, in bytes (at least one element).
  std::size_t chunk_bytes = std::size_t{4} << 20;
};

/// The algorithm an all-reduce of `bytes` over `size` members takes under `tuning`.
collective_algorithm choose_all_reduce_algorithm(std::size_t bytes, int size,
                                                 const collective_tuning& tuning);

/// The schedule of `kind` for member `rank` of `size`, `elements` per member (a broadcast
/// from `root`), elements of `element_bytes`: the algorithm chosen by `tuning`.
collective_schedule make_collective_schedule(collective_kind kind, int rank, int size,
                                             std::int64_t elements, std::size_t element_bytes,
                                             const collective_tuning& tuning, int root = 0);

} // namespace actorflow

#pragma once
/// One member's run of a collective schedule (devices/collective_schedule.hpp) on its buffer:
/// which pieces may leave now, and what a received piece does. No transport, no clock: the
/// caller (the member actor, actors/collective.hpp, or a test) carries the pieces.
///   collective_execution run{plan, input.clone(), reduction::sum};
///   for (auto& p : run.take_sends()) transport(p.to, p.tag, p.value);
///   status s = run.receive(from, tag, piece);   // then take_sends() again
///   if (run.finished()) tensor sum = run.result();
/// A piece is applied once every action its schedule puts before it is done (`after`), so
/// several rounds' chunks may be under way at once, and a piece that comes early waits.
/// Not thread-safe: one caller at a time.

#include "devices/collective_schedule.hpp"
#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace actorflow {

/// The dtypes collectives reduce (TF's collective ops take these and half types).
bool collective_supports(dtype type);

/// `into[i] = op(into[i], from[i])` for `count` elements of `type` (mean adds, as sum).
void reduce_elements(dtype type, reduction op, void* into, const void* from, std::int64_t count);

/// A piece to send: the member it goes to, its tag and its elements (a tensor of its own,
/// rank 1: the buffer may change once it has left).
struct collective_piece {
  int to = 0;
  std::int64_t tag = 0;
  tensor value;
};

class collective_execution {
public:
  /// Runs `schedule` on `buffer` (host memory holding schedule.elements elements, owned from
  /// now on: the caller passes a copy it may have written over), combining with `op`.
  collective_execution(collective_schedule schedule, tensor buffer, reduction op);

  /// The pieces that may leave now (the first call: those that wait for nothing), each once.
  std::vector<collective_piece> take_sends();

  /// A piece from member `from`: refused (data_loss, nothing changed) when this member expects
  /// no piece with that tag from it, has one already, or it has another dtype or element count;
  /// otherwise kept until its turn and applied then.
  status receive(int from, std::int64_t tag, tensor piece);

  /// Whether every action is done.
  bool finished() const { return cursor_ == schedule_.actions.size(); }
  /// The result once finished: the buffer (a mean divided by the group's size), shaped as the
  /// buffer was given. Takes it.
  tensor take_result();

  /// The first action not done yet; nullopt when finished.
  const collective_action* first_pending() const;
  /// "the reduce-scatter (round 2) waits for member 3", for errors; empty when finished.
  std::string describe_wait() const;
  /// The members this one still expects pieces from (ascending).
  std::vector<int> awaited_members() const;

  const collective_schedule& schedule() const { return schedule_; }

private:
  void progress();
  bool ready(const collective_action& a) const;

  collective_schedule schedule_;
  tensor buffer_;
  reduction op_;
  std::size_t element_bytes_;
  std::vector<bool> done_;
  /// Received pieces waiting for their turn, by action index.
  std::vector<std::optional<tensor>> arrived_;
  /// Receive actions by (peer, tag).
  std::map<std::pair<int, std::int64_t>, std::size_t> receives_;
  std::vector<collective_piece> outbox_;
  /// Every action before it is done.
  std::size_t cursor_ = 0;
};

} // namespace actorflow

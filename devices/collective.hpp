#pragma once
/// Where the members of an in-process collective (AllReduce over the devices of one task, the
/// job MirroredStrategy gives NCCL on GPUs) meet: each member joins its group for a step with
/// its tensor; the last to arrive reduces the group's tensors, in rank order so every run sums
/// alike, and every member gets the result.
///   collective_groups::global().join({"grads/w", step_id, rank, size}, value,
///       reduce_sum_in_rank_order, [](result<tensor> sum) { ... });
/// A member whose step is aborted leaves with leave(): its callback gets the error, the others
/// keep waiting for their own steps' aborts (which the master sends to every device).

#include "graph/tensor.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace actorflow {

/// One member's place in a collective.
struct collective_member {
  /// Names the group (the same for all its members: the AllReduce nodes' group_key).
  std::string group;
  std::int64_t step_id = 0;
  int rank = 0;
  int size = 0;
};

class collective_groups {
public:
  using reduce_fn = std::function<result<tensor>(const std::vector<tensor>& by_rank)>;
  using done_fn = std::function<void(result<tensor>)>;

  /// The process's groups (devices of every task in this process meet here).
  static collective_groups& global();

  /// Adds `value` as `member`; once all `size` members joined, the last one's thread runs
  /// `reduce` and calls every member's `done` with its result. An error (a rank out of range
  /// or taken twice, members disagreeing on the size) goes to this member's `done` at once.
  void join(const collective_member& member, tensor value, reduce_fn reduce, done_fn done);

  /// Takes `member` out of its group before it completed: its `done` gets `why`. False when
  /// the group had already completed (its `done` ran or is running).
  bool leave(const collective_member& member, status why);

  /// Groups waiting for members (tests check that nothing is left behind).
  std::size_t pending_groups() const;

private:
  struct group_state {
    int size = 0;
    int joined = 0;
    std::vector<tensor> values;
    std::vector<done_fn> waiting;
  };
  using key = std::tuple<std::string, std::int64_t>;

  mutable std::mutex mutex_;
  std::map<key, group_state> groups_;
};

} // namespace actorflow

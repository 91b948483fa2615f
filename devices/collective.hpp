#pragma once
/// Where the members of an in-process collective (AllReduce over the devices of one task, the
/// job MirroredStrategy gives NCCL on GPUs) meet: each member joins its group for a step; the
/// last to arrive gets every member, by rank, and completes the collective for all of them.
///   rendezvous.join({"grads/w", step_id, rank, size}, my_member,
///                   [](std::vector<member>& by_rank) { /* reduce, then each one's done */ });
/// A member whose step is aborted leaves (join_in_step sees to it): the others keep waiting for
/// their own steps' aborts (which the master sends to every device). Members are
/// whatever a device's kernel needs (host tensors and a callback on the CPU; pointers, streams
/// and a callback for NCCL).

#include "devices/kernel.hpp"
#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
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

  /// "collective 'g' (step 3)", for messages.
  std::string describe() const {
    return "collective '" + group + "' (step " + std::to_string(step_id) + ")";
  }
};

/// An AllReduce node's attributes (ops::all_reduce sets them), read once when its kernel is
/// made, by the CPU's and the GPU's kernel alike.
struct all_reduce_attrs {
  std::string group;
  int rank = -1;
  int size = 0;
  bool mean = false;

  static all_reduce_attrs of(const node& n) {
    return {n.attr_or<std::string>("group_key", ""),
            static_cast<int>(n.attr_or<std::int64_t>("group_rank", -1)),
            static_cast<int>(n.attr_or<std::int64_t>("group_size", 0)),
            n.attr_or<std::string>("reduction", "sum") == "mean"};
  }
  /// This member's place in step `step_id`.
  collective_member in_step(std::int64_t step_id) const { return {group, step_id, rank, size}; }
};

template <class Member>
class collective_rendezvous {
public:
  using complete_fn = std::function<void(std::vector<Member>& by_rank)>;

  /// Adds `member` at `where`'s rank. Once all `where.size` members joined, the last one's
  /// `complete` runs on its thread, outside the lock, with every member by rank. An error (a
  /// rank out of range or taken twice, members disagreeing on the size) is returned and the
  /// member is not added.
  status join(const collective_member& where, Member member, complete_fn complete) {
    if (where.size < 1 || where.rank < 0 || where.rank >= where.size)
      return make_error(errc::invalid_argument, where.describe() + ": rank " +
                                                  std::to_string(where.rank) + " of " +
                                                  std::to_string(where.size));
    std::vector<Member> by_rank;
    {
      std::lock_guard<std::mutex> guard{mutex_};
      auto& g = groups_[key{where.group, where.step_id}];
      if (g.size == 0) {
        g.size = where.size;
        g.members.resize(static_cast<std::size_t>(where.size));
      }
      auto rank = static_cast<std::size_t>(where.rank);
      if (g.size != where.size || g.members[rank]) {
        auto why = g.size != where.size
                     ? "members disagree on the size (" + std::to_string(g.size) + " and " +
                         std::to_string(where.size) + ")"
                     : "rank " + std::to_string(where.rank) + " joined twice";
        if (g.joined == 0)
          groups_.erase(key{where.group, where.step_id});
        return make_error(errc::invalid_argument, where.describe() + ": " + why);
      }
      g.members[rank] = std::move(member);
      if (++g.joined < g.size)
        return {};
      for (auto& m : g.members)
        by_rank.push_back(std::move(*m));
      groups_.erase(key{where.group, where.step_id});
    }
    complete(by_rank);
    return {};
  }

  /// join() for a kernel in a step. Members have a `done` that takes a status: a refused join
  /// calls it at once with the error, and when the step is aborted (`cancellation`, null
  /// outside steps) the member leaves its group and `done` gets an "aborted" error, so the step
  /// never waits for members that will not come.
  void join_in_step(const collective_member& where, Member member, complete_fn complete,
                    step_cancellation* cancellation) {
    auto done = member.done;
    if (auto joined = join(where, std::move(member), std::move(complete)); !joined.ok()) {
      done(std::move(joined));
      return;
    }
    // Registered after joining: an abort that came first makes add() refuse, and the member
    // leaves at once.
    auto leave = [this, where] {
      if (auto left = this->leave(where))
        left->done(make_error(errc::aborted, "the step was aborted while " + where.describe() +
                                               " waited for its other members"));
    };
    if (cancellation != nullptr && cancellation->add(leave) == 0)
      leave();
  }

  /// Takes the member at `where` out of its group before the group completed and returns it
  /// (to be failed by the caller); nothing when the group already completed.
  std::optional<Member> leave(const collective_member& where) {
    std::lock_guard<std::mutex> guard{mutex_};
    auto i = groups_.find(key{where.group, where.step_id});
    if (i == groups_.end())
      return std::nullopt;
    auto& g = i->second;
    auto rank = static_cast<std::size_t>(where.rank);
    if (rank >= g.members.size() || !g.members[rank])
      return std::nullopt;
    std::optional<Member> out = std::move(g.members[rank]);
    g.members[rank].reset();
    if (--g.joined == 0)
      groups_.erase(i);
    return out;
  }

  /// Groups waiting for members (tests check that nothing is left behind).
  std::size_t pending_groups() const {
    std::lock_guard<std::mutex> guard{mutex_};
    return groups_.size();
  }

private:
  struct group_state {
    int size = 0;
    int joined = 0;
    std::vector<std::optional<Member>> members;
  };
  using key = std::tuple<std::string, std::int64_t>;

  mutable std::mutex mutex_;
  std::map<key, group_state> groups_;
};

/// A member of a CPU (or test device) AllReduce: its tensor, readable on the host, and what to
/// call with the result or the error.
struct host_collective_member {
  tensor value;
  std::function<void(result<tensor>)> done;
};

/// The process's CPU collectives (devices of every task in this process meet here).
collective_rendezvous<host_collective_member>& host_collectives();

} // namespace actorflow

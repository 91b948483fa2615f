#pragma once
/// Variable updates that apply at most once although their step may run again: the steps of a
/// cluster_coordinator closure (actors/cluster_coordinator.hpp) that was rescheduled after its
/// worker was lost carry the closure's fence, and each shard applies an update of a given
/// (owner, closure, run, node) once and refuses every repeat.
///   update_fence_book book;
///   book.admit({fence, "inc"});   // true: apply it
///   book.admit({fence, "inc"});   // false: a repeat, leave the variable alone

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>

namespace actorflow {

/// Carried by every step of a closure (session run_options, the master's and the devices' run
/// requests). owner 0: the step is not fenced.
struct update_fence {
  /// Who numbers the closures: a coordinator, random per coordinator.
  std::uint64_t owner = 0;
  /// The closure, numbered from 1 by its owner; the same for every attempt of it.
  std::int64_t closure = 0;
  /// Which of the closure's steps, counted from 0 in each attempt: a closure that runs its
  /// steps in the same order gives each the same fence every attempt.
  std::int32_t run = 0;
  /// Every closure of the owner below this one has finished (succeeded or given up): an update
  /// of one of them that still arrives is a late repeat from a lost attempt.
  std::int64_t settled_below = 0;

  bool fenced() const { return owner != 0; }
};

/// For CAF's serialization (run requests carry fences across processes).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, update_fence& x) {
  return f(x.owner, x.closure, x.run, x.settled_below);
}

/// One update kernel's claim: the step's fence and the node doing the update.
struct update_claim {
  update_fence fence;
  std::string node;
};

/// What a variable's shard remembers of fenced updates: for each owner, the claims it admitted
/// of closures not yet settled. Bounded by the owner's closures in flight. Not thread-safe: the
/// shard's mailbox orders its calls.
class update_fence_book {
public:
  /// True when the update may apply (it is then recorded); false for a repeat. Unfenced claims
  /// always apply.
  bool admit(const update_claim& claim);
  /// Claims remembered now, over all owners.
  std::size_t remembered() const;
  /// Repeats refused so far.
  std::int64_t refused() const { return refused_; }

private:
  struct owner_record {
    std::int64_t settled_below = 0;
    std::set<std::tuple<std::int64_t, std::int32_t, std::string>> admitted;
  };
  std::map<std::uint64_t, owner_record> owners_;
  std::int64_t refused_ = 0;
};

} // namespace actorflow

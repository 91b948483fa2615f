#pragma once
/// Which life of each worker process counts: once a worker is seen with a new incarnation
/// (it restarted; new_incarnation() in graph/rendezvous_key.hpp draws them), what its earlier
/// lives send is refused, even if one of them resumes (a process frozen, then continued after
/// its replacement started). Incarnation 0 means unknown: never refused, never remembered.
///   worker_lives lives;
///   lives.admit("1", life_a);   // true
///   lives.admit("1", life_b);   // true: a restart; life_a retires
///   lives.admit("1", life_a);   // false
/// Not thread-safe: its owner (an actor) orders the calls.

#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace actorflow {

class worker_lives {
public:
  /// Whether `worker`'s message from life `incarnation` counts (and records the life).
  bool admit(const std::string& worker, std::uint64_t incarnation);
  /// Messages refused so far.
  std::int64_t refused() const { return refused_; }

private:
  std::map<std::string, std::uint64_t> current_;
  std::set<std::uint64_t> retired_;
  std::int64_t refused_ = 0;
};

} // namespace actorflow

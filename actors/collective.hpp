#pragma once
/// Collective members across tasks (protocol: actors/protocols/collective.hpp): the actor that
/// runs one member's part of every collective of its groups.
///   auto a = spawn_collective_member(sys, {"worker", 0, "CPU:0", incarnation});
///   auto b = spawn_collective_member(sys, {"worker", 1, "CPU:0", other_incarnation});
///   auto group = protocol::make_collective_group(1, {member_info(a, ...), member_info(b, ...)});
///   // tell each member the group (group_atom), then request collective_atom on each
/// The member runs the schedule of devices/collective_schedule.hpp through
/// collective_execution, sends its pieces straight to the peer members' actors, monitors every
/// peer of its groups, and fails (and tells the others to fail) every collective under way
/// with a peer that goes down, naming it (status::origin() is the lost task). A group that lost
/// a member stays broken: later collectives in it fail at once (make a new group, as TF does
/// after a failure).

#include "actors/protocols/collective.hpp"

#include <caf/fwd.hpp>

#include <cstdint>
#include <functional>
#include <string>

namespace actorflow {

struct collective_member_options {
  /// The task and device the member stands for (its name in errors and group order).
  std::string job;
  std::int32_t task = 0;
  std::string device = "CPU:0";
  std::uint64_t incarnation = 0;
  /// Pieces that come for a collective before this member's own request (a peer started
  /// first) wait, up to this many bytes in all; beyond, the collective fails (the peer is
  /// ahead of a member that is not coming).
  std::uint64_t early_bytes = std::uint64_t{1} << 30;
  /// Called with a line per piece received and per collective finished or failed
  /// ("rank 1 got reduce-scatter round 0 from 0"), on the actor's thread: deterministic tests
  /// follow a collective's phases with it. May be empty.
  std::function<void(const std::string&)> trace;
};

/// Spawns a member. It lives until it is sent an exit (or its system ends).
protocol::collective_actor spawn_collective_member(caf::actor_system& sys,
                                                   collective_member_options options);

/// The entry `handle` has in a group (collective_group::members).
protocol::collective_member_info collective_member_of(const protocol::collective_actor& handle,
                                                      const collective_member_options& options);

} // namespace actorflow

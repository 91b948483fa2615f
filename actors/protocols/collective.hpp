#pragma once
/// The collective member's protocol: one member actor per (task, device) that takes part in
/// collectives across tasks (TF's CollectiveAllReduce for MultiWorkerMirroredStrategy). A group
/// (group key, its members by task and device) is told to every member once; each collective
/// is then one request per member, keyed by group key and instance key, answered with the
/// member's result once every member has done its part, or with an error naming the member that
/// was lost.
///   auto member = spawn_collective_member(sys, {"worker", 0, "CPU:0", incarnation});
///   self->send(member, group_atom::value, group);             // collective_group, same for all
///   self->request(member, 30s, collective_atom::value,
///                 make_all_reduce(group.key, instance, gradient, reduction::mean))
///     .then([](tensor& sum) { ... }, [](caf::error& e) { status_from_error(e).origin() ... });
/// Pieces go member to member (collective_piece), never through a master; a member that sees a
/// peer go down fails every collective it has under way with that peer, and tells the other
/// members (collective_abort), so none of them waits for it.

#include "actors/protocols/atoms.hpp"
#include "actors/protocols/device.hpp"
#include "devices/collective_schedule.hpp"

#include <caf/actor.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace actorflow::protocol {

/// A member of a group: where it runs and its actor (a collective_actor; untyped here because
/// the protocol's own messages carry it).
struct collective_member_info {
  std::string job;
  std::int32_t task = 0;
  /// The device it stands for, local to its task ("CPU:0"): several members per task.
  std::string device;
  /// Its task's incarnation, for the origin of errors that blame it.
  std::uint64_t incarnation = 0;
  caf::actor actor;
  /// "host:port" of its task's bulk endpoint (actors/bulk_channel.hpp), where large pieces for
  /// it go as frames; empty: every piece goes in a CAF message.
  std::string bulk_address;

  /// "/job:worker/replica:0/task:1/device:CPU:0".
  std::string name() const;
  /// The task it blames (status::origin()).
  task_origin origin() const { return {job, static_cast<int>(task), incarnation}; }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, collective_member_info& x) {
  return f(caf::meta::type_name("actorflow::collective_member_info"), x.job, x.task, x.device,
           x.incarnation, x.actor, x.bulk_address);
}

/// A group (TF's group key and group size, members by task and device), the same on every
/// member: a member's rank is its place in `members`, which make_collective_group sorts by
/// job, task and device, as TF's group resolution does.
struct collective_group {
  std::int64_t key = 0;
  std::vector<collective_member_info> members;

  std::int32_t size() const { return static_cast<std::int32_t>(members.size()); }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, collective_group& x) {
  return f(caf::meta::type_name("actorflow::collective_group"), x.key, x.members);
}

/// A group of `members` under `key`, sorted into rank order.
collective_group make_collective_group(std::int64_t key,
                                       std::vector<collective_member_info> members);

/// One member's part in one collective.
struct collective_request {
  std::int64_t group_key = 0;
  /// Distinguishes the collectives of a group (TF's instance key): the same on every member
  /// for the same collective, never reused within the group's life.
  std::int64_t instance_key = 0;
  collective_kind kind = collective_kind::all_reduce;
  reduction op = reduction::sum;
  /// All-reduce: the algorithm, the ring's threshold and the piece size. The same on every
  /// member (every member computes the schedule on its own).
  std::uint8_t algorithm = 0;
  std::uint64_t ring_min_bytes = 0;
  std::uint64_t chunk_bytes = 0;
  /// Broadcast: the root's rank.
  std::int32_t root = 0;
  /// The member's tensor: its contribution (all-reduce, all-gather), the root's value
  /// (broadcast at the root), or an uninitialised tensor of the right dtype and shape
  /// elsewhere (broadcast receivers).
  tensor value;
  /// Bound in milliseconds on the whole collective at this member (0: none); past it, it
  /// fails with deadline_exceeded naming the members it still waits for, and the others are
  /// told.
  std::int64_t timeout_ms = 0;

  collective_tuning tuning() const;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, collective_request& x) {
  return f(caf::meta::type_name("actorflow::collective_request"), x.group_key, x.instance_key,
           x.kind, x.op, x.algorithm, x.ring_min_bytes, x.chunk_bytes, x.root, x.value,
           x.timeout_ms);
}

/// An all-reduce of `value` (float32/64, int32/64) with `op`.
collective_request make_all_reduce(std::int64_t group_key, std::int64_t instance_key,
                                   tensor value, reduction op = reduction::sum,
                                   collective_tuning tuning = {}, std::int64_t timeout_ms = 0);
/// A broadcast from `root`: at the root `value` is what everyone gets; elsewhere a tensor of
/// the same dtype and shape (its contents unused).
collective_request make_broadcast(std::int64_t group_key, std::int64_t instance_key,
                                  std::int32_t root, tensor value, std::int64_t timeout_ms = 0);
/// An all-gather: every member's `value` (same dtype and shape on all), concatenated along
/// the first dimension in rank order.
collective_request make_all_gather(std::int64_t group_key, std::int64_t instance_key,
                                   tensor value, std::int64_t timeout_ms = 0);

/// A piece of a collective from one member to another (collective_execution's).
struct collective_piece_message {
  std::int64_t group_key = 0;
  std::int64_t instance_key = 0;
  std::int32_t from = 0;
  std::int64_t tag = 0;
  tensor value;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, collective_piece_message& x) {
  return f(caf::meta::type_name("actorflow::collective_piece_message"), x.group_key,
           x.instance_key, x.from, x.tag, x.value);
}

/// Large pieces between processes travel over the receiving task's bulk channel as frames
/// whose key says what the message would: "coll;<group>;<instance>;<from>;<tag>". The task's
/// endpoint hands them to its member as a local collective_piece_message.
inline constexpr const char* collective_bulk_prefix = "coll;";
std::string collective_frame_key(std::int64_t group_key, std::int64_t instance_key,
                                 std::int32_t from, std::int64_t tag);
/// The message a frame key stands for (value left empty); nothing for a malformed key.
std::optional<collective_piece_message> parse_collective_frame_key(const std::string& key);

/// A member failed a collective (a peer lost, a bad piece, its bound passed): every other
/// member fails it too, with the same error (its origin names the task to blame).
struct collective_abort {
  std::int64_t group_key = 0;
  std::int64_t instance_key = 0;
  status why;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, collective_abort& x) {
  return f(caf::meta::type_name("actorflow::collective_abort"), x.group_key, x.instance_key,
           x.why);
}

/// A collective member (actors/collective.hpp).
using collective_actor = caf::typed_actor<
  // Joins the group (monitoring every other member); answers its rank in it, or an error when
  // it is not among the members or the key is taken by another group.
  caf::replies_to<group_atom, collective_group>::with<std::int32_t>,
  // Runs this member's part; answers its result (all-reduce: the reduced tensor, shaped as
  // the input; broadcast: the root's; all-gather: the concatenation).
  caf::replies_to<collective_atom, collective_request>::with<tensor>,
  // From the other members.
  caf::reacts_to<collective_piece_message>, caf::reacts_to<collective_abort>>;

} // namespace actorflow::protocol

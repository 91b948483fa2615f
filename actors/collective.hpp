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
#include "actors/protocols/task.hpp"

#include "devices/task_collective.hpp"
#include "graph/status.hpp"

#include <caf/fwd.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace actorflow {

class bulk_sender;

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
  /// Pieces of at least bulk_min_bytes() for a member in another process with a bulk address
  /// go as frames through this sender (the task's); null: all in CAF messages.
  std::shared_ptr<bulk_sender> bulk;
  /// Where this member's task takes such frames ("host:port"; empty: nowhere).
  std::string bulk_address;
};

/// Spawns a member. It lives until it is sent an exit (or its system ends).
protocol::collective_actor spawn_collective_member(caf::actor_system& sys,
                                                   collective_member_options options);

/// The entry `handle` has in a group (collective_group::members).
protocol::collective_member_info collective_member_of(const protocol::collective_actor& handle,
                                                      const collective_member_options& options);

class cluster_spec;
class server;

/// One member's handle on its group, for plain code: blocking calls, one thread at a time.
///   auto group = collective_group::join(server.system(), server.task(), cluster, "worker",
///                                       task, /*key=*/1, /*timeout_seconds=*/30);
///   auto mean = group->all_reduce(gradient, reduction::mean);   // result<tensor>
/// Every member must call the same ops in the same order: each call takes the next instance
/// key (TF's collective ops get theirs from program order too).
class collective_group {
public:
  /// Joins the group of every task of `job` in `cluster` as task `task`, served by `own` (its
  /// server's task service, in `sys`): introduces this task's member to the tasks whose names
  /// sort after it (reaching them as tasks reach each other, so pieces then travel on that
  /// connection) and waits for the ones before it to introduce theirs. Errors name the task
  /// that could not be reached or did not come within `timeout_seconds`, which also bounds
  /// every later op. With `per_incarnation`, the group's key is `key` mixed with every
  /// member's task incarnation: a group formed again after a member was lost and restarted
  /// gets a key of its own on every member, so nothing of the broken group's reaches it.
  static result<collective_group> join(caf::actor_system& sys, const protocol::task_actor& own,
                                       const cluster_spec& cluster, const std::string& job,
                                       int task, std::int64_t key, double timeout_seconds,
                                       bool per_incarnation = false);
  /// The same for the task `served` serves (its system and task service).
  static result<collective_group> join(server& served, const cluster_spec& cluster,
                                       const std::string& job, int task, std::int64_t key,
                                       double timeout_seconds, bool per_incarnation = false);
  /// Tells `member` the group and waits for its rank (members spawned by hand, one process).
  static result<collective_group> join(caf::actor_system& sys, protocol::collective_actor member,
                                       protocol::collective_group group, double timeout_seconds);

  /// The handle of `member`, already told `group` and answered `rank` (members driven by a
  /// test's own actors on CAF's test scheduler, where the blocking join cannot wait).
  static collective_group of_member(caf::actor_system& sys, protocol::collective_actor member,
                                    protocol::collective_group group, int rank,
                                    double timeout_seconds) {
    return collective_group{sys, std::move(member), std::move(group), rank, timeout_seconds};
  }

  /// Every member's `value` reduced by `op` (same dtype and shape on all).
  result<tensor> all_reduce(const tensor& value, reduction op = reduction::sum,
                            collective_tuning tuning = {});
  /// The root's `value` (elsewhere: a tensor of its dtype and shape, contents unused).
  result<tensor> broadcast(const tensor& value, int root);
  /// Every member's `value`, concatenated along the first dimension in rank order.
  result<tensor> all_gather(const tensor& value);

  /// Offers this group to the CollectiveReduce nodes (graph/collective_ops.hpp) of `device`
  /// (a full name, "/job:worker/replica:0/task:1/device:CPU:0") whose collective_group is
  /// `name`, while the returned offer lives; they run asynchronously, several at once, each
  /// bounded as this group's calls are. Their instance keys and this group's own calls'
  /// never meet: the calls take multiples of 2^12, the nodes' runs the numbers in between
  /// (devices/task_collective.hpp), where the last of each run's is the GPUs' communicator
  /// set-up's (devices/device_collectives.hpp).
  task_collective_registry::offer offer_to_graph(const std::string& name, const std::string& device);

  int rank() const { return rank_; }
  int size() const { return group_.size(); }
  const protocol::collective_group& members() const { return group_; }

private:
  collective_group(caf::actor_system& sys, protocol::collective_actor member,
                   protocol::collective_group group, int rank, double timeout_seconds)
    : sys_(&sys), member_(std::move(member)), group_(std::move(group)), rank_(rank),
      timeout_seconds_(timeout_seconds) {}
  result<tensor> run(protocol::collective_request req);

  caf::actor_system* sys_;
  protocol::collective_actor member_;
  protocol::collective_group group_;
  int rank_ = 0;
  double timeout_seconds_ = 0;
  std::int64_t next_instance_ = 1;
};

} // namespace actorflow

#include "actors/collective.hpp"

#include "actors/cluster_spec.hpp"
#include "actors/server.hpp"
#include "actors/session_master.hpp"
#include "actors/task_client.hpp"
#include "graph/device_name.hpp"
#include "graph/hash_embedding.hpp" // splitmix64

#include <caf/all.hpp>

#include <map>
#include <mutex>
#include <optional>
#include <vector>

namespace actorflow {

namespace {

/// Waits for `what` from `to` (bounded); the error with `context` added.
template <class Answer, class Handle, class... Ts>
result<Answer> ask(caf::actor_system& sys, const Handle& to, double timeout_seconds,
                   const std::string& context, Ts&&... xs) {
  caf::scoped_actor self{sys};
  std::optional<result<Answer>> out;
  self->request(to, request_bound(timeout_seconds), std::forward<Ts>(xs)...)
    .receive([&](Answer& a) { out.emplace(std::move(a)); },
             [&](caf::error& e) {
               // A member's own errors name the collective already.
               auto why = status_from_error(e);
               out.emplace(why.message().rfind(context, 0) == 0 ? why : why.with_context(context));
             });
  return std::move(*out);
}

/// A group's member as graph nodes reach it: each run asks the member actor from a one-shot
/// actor, so the kernel's thread never blocks and several buckets run at once.
class graph_member final : public task_collective {
public:
  graph_member(caf::actor_system& sys, protocol::collective_actor member, std::int64_t group_key,
               int rank, int size, double timeout_seconds)
    : sys_(sys), member_(std::move(member)), group_key_(group_key), rank_(rank), size_(size),
      timeout_seconds_(timeout_seconds) {}

  void all_reduce(std::int64_t instance, tensor value, reduction op,
                  std::function<void(result<tensor>)> done) override {
    auto run = next_run(instance);
    run_collective(protocol::make_all_reduce(group_key_, key_of(run, instance), std::move(value),
                                             op, {}, timeout_ms()),
                   instance, run, std::move(done));
  }

  void broadcast(std::int64_t instance, tensor value, int root,
                 std::function<void(result<tensor>)> done) override {
    auto run = next_run(instance);
    run_collective(protocol::make_broadcast(group_key_, key_of(run, instance), root,
                                            std::move(value), timeout_ms()),
                   instance, run, std::move(done));
  }

  std::int64_t key() const override { return group_key_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  double timeout_seconds() const override { return timeout_seconds_; }

  std::string describe() const override {
    return "collective group " + std::to_string(group_key_) + " (rank " + std::to_string(rank_) +
           " of " + std::to_string(size_) + ")";
  }

private:
  /// The number of this run of `instance`, 1 for its first: counted per instance, whatever
  /// the collective, so that no two runs share a key.
  std::int64_t next_run(std::int64_t instance) {
    std::lock_guard<std::mutex> guard{mutex_};
    return ++runs_[instance];
  }
  static std::int64_t key_of(std::int64_t run, std::int64_t instance) {
    return (run << graph_collective_instance_bits) | instance;
  }
  std::int64_t timeout_ms() const { return static_cast<std::int64_t>(timeout_seconds_ * 1000); }

  void run_collective(protocol::collective_request req, std::int64_t instance, std::int64_t run,
                      std::function<void(result<tensor>)> done) {
    auto context = std::string{"collective "} + to_string(req.kind) + " (group " +
                   std::to_string(group_key_) + ", instance " + std::to_string(instance) +
                   ", run " + std::to_string(run) + ")";
    // The member's own bound fires first, naming whom it waits for; this one is a backstop.
    auto bound = request_bound(timeout_seconds_ > 0 ? timeout_seconds_ + 2 : 0);
    sys_.spawn([member = member_, req = std::move(req), done = std::move(done), context,
                bound](caf::event_based_actor* self) mutable {
      self->request(member, bound, protocol::collective_atom::value, std::move(req))
        .then([done](tensor& answer) { done(std::move(answer)); },
              [done, context](caf::error& e) {
                auto why = status_from_error(e);
                done(why.message().rfind("collective ", 0) == 0 ? why : why.with_context(context));
              });
    });
  }

  caf::actor_system& sys_;
  protocol::collective_actor member_;
  std::int64_t group_key_;
  int rank_, size_;
  double timeout_seconds_;
  std::mutex mutex_;
  std::map<std::int64_t, std::int64_t> runs_;
};

} // namespace

result<collective_group> collective_group::join(caf::actor_system& sys,
                                                protocol::collective_actor member,
                                                protocol::collective_group group,
                                                double timeout_seconds) {
  auto rank = ask<std::int32_t>(sys, member, timeout_seconds,
                                "joining collective group " + std::to_string(group.key),
                                protocol::group_atom::value, group);
  if (!rank)
    return rank.error();
  return collective_group{sys, std::move(member), std::move(group), *rank, timeout_seconds};
}

result<collective_group> collective_group::join(caf::actor_system& sys,
                                                const protocol::task_actor& own,
                                                const cluster_spec& cluster,
                                                const std::string& job, int task,
                                                std::int64_t key, double timeout_seconds,
                                                bool per_incarnation) {
  auto own_name = task_name(job, task);
  auto mine = ask<protocol::collective_member_info>(
    sys, own, timeout_seconds, "task " + own_name + "'s collective member",
    protocol::collective_atom::value, job, std::int32_t{task});
  if (!mine)
    return mine.error();
  std::vector<protocol::collective_member_info> members{*mine};
  for (int other = 0; other < cluster.num_tasks(job); ++other) {
    if (other == task)
      continue;
    auto name = task_name(job, other);
    protocol::collective_member_info theirs;
    if (name > own_name) {
      // This task dials: one connection per pair of tasks (CAF 0.17 mishandles two).
      std::string reached_name, address;
      auto peer = reach_task(sys, cluster, job, other, timeout_seconds, reached_name, address,
                             timeout_seconds);
      if (!peer)
        return peer.error().with_context("collective group " + std::to_string(key));
      auto answer = ask<protocol::collective_member_info>(
        sys, *peer, timeout_seconds,
        "collective group " + std::to_string(key) + ": introducing " + own_name + " to " + name,
        protocol::collective_atom::value, *mine);
      if (!answer)
        return answer.error().with_origin({job, other, 0});
      theirs = std::move(*answer);
    } else {
      auto answer = ask<protocol::collective_member_info>(
        sys, own, timeout_seconds,
        "collective group " + std::to_string(key) + ": waiting for " + name +
          " to introduce its member",
        protocol::collective_atom::value, job, std::int32_t{other});
      if (!answer)
        return answer.error().with_origin({job, other, 0});
      theirs = std::move(*answer);
    }
    members.push_back(std::move(theirs));
  }
  if (per_incarnation) {
    // In rank order (task order), the same on every member; positive and of 48 bits, as
    // keys in bulk frame names must be (protocol::parse_collective_frame_key).
    std::vector<std::uint64_t> incarnations(members.size());
    for (auto& m : members)
      incarnations[static_cast<std::size_t>(m.task)] = m.incarnation;
    auto mixed = splitmix64(static_cast<std::uint64_t>(key));
    for (auto incarnation : incarnations)
      mixed = splitmix64(mixed ^ incarnation);
    key = static_cast<std::int64_t>(mixed >> 16);
  }
  auto group = protocol::make_collective_group(key, std::move(members));
  return join(sys, caf::actor_cast<protocol::collective_actor>(mine->actor), std::move(group),
              timeout_seconds);
}

result<collective_group> collective_group::join(server& served, const cluster_spec& cluster,
                                                const std::string& job, int task,
                                                std::int64_t key, double timeout_seconds,
                                                bool per_incarnation) {
  return join(served.system(), served.task(), cluster, job, task, key, timeout_seconds,
              per_incarnation);
}

result<tensor> collective_group::run(protocol::collective_request req) {
  // The member's own bound fires first, naming whom it waits for; the request's is a backstop.
  req.timeout_ms = static_cast<std::int64_t>(timeout_seconds_ * 1000);
  auto what = std::string{"collective "} + to_string(req.kind) + " (group " +
              std::to_string(group_.key) + ", instance " + std::to_string(req.instance_key) + ")";
  return ask<tensor>(*sys_, member_, timeout_seconds_ > 0 ? timeout_seconds_ + 2 : 0, what,
                     protocol::collective_atom::value, std::move(req));
}

result<tensor> collective_group::all_reduce(const tensor& value, reduction op,
                                            collective_tuning tuning) {
  return run(protocol::make_all_reduce(
    group_.key, next_instance_++ << graph_collective_instance_bits, value, op, tuning));
}

result<tensor> collective_group::broadcast(const tensor& value, int root) {
  return run(protocol::make_broadcast(
    group_.key, next_instance_++ << graph_collective_instance_bits, root, value));
}

result<tensor> collective_group::all_gather(const tensor& value) {
  return run(protocol::make_all_gather(
    group_.key, next_instance_++ << graph_collective_instance_bits, value));
}

task_collective_registry::offer collective_group::offer_to_graph(const std::string& name,
                                                                 const std::string& device) {
  return task_collectives().add(
    name, device,
    std::make_shared<graph_member>(*sys_, member_, group_.key, rank_, size(), timeout_seconds_));
}

} // namespace actorflow

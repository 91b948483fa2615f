#include "actors/task_client.hpp"

#include "actors/protocols/task.hpp"
#include "actors/protocols/wire.hpp"
#include "actors/session_master.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>

namespace actorflow {

namespace {

/// Task `index` of `job`, reached over the middleman; `name` and `address` are set for errors.
result<protocol::task_actor> reach_task(caf::actor_system& sys, const cluster_spec& cluster,
                                        const std::string& job, int index, std::string& name,
                                        std::string& address) {
  name = "/job:" + job + "/replica:0/task:" + std::to_string(index);
  if (!sys.has_middleman())
    return make_error(errc::failed_precondition,
                      "reaching the cluster's tasks needs CAF's middleman in the actor system");
  auto found = cluster.address(job, index);
  if (!found)
    return found.error();
  address = *found;
  auto split = parse_host_port(address);
  if (!split)
    return split.error();
  auto target = sys.middleman().remote_actor<protocol::task_actor>(split->host, split->port);
  if (!target)
    return make_error(errc::unavailable, "cannot reach task " + name + " at " + address + ": " +
                                           sys.render(target.error()));
  return *target;
}

} // namespace

namespace {

/// Sends every task of `to_job` the request `ask` makes and waits (bounded) for each answer.
/// `gone_is_fine`: a task that cannot be reached, or that stops while answering, counts as
/// told (it stopped, which is what a done report asks).
template <class Ask>
status tell_tasks(caf::actor_system& sys, const cluster_spec& cluster, const std::string& to_job,
                  const std::string& what, double timeout_seconds, bool gone_is_fine, Ask ask) {
  auto bound = request_bound(timeout_seconds);
  for (int i = 0; i < cluster.num_tasks(to_job); ++i) {
    std::string name, address;
    auto target = reach_task(sys, cluster, to_job, i, name, address);
    auto where = "telling task " + name + " at " + address + " that " + what;
    if (!target) {
      if (gone_is_fine && target.error().code() == errc::unavailable)
        continue; // gone already: it no longer serves anyone
      return target.error().with_context(where);
    }
    caf::scoped_actor self{sys};
    status outcome;
    ask(self, *target, bound)
      .receive([](std::int32_t) {},
               [&](caf::error& err) {
                 if (!(gone_is_fine && err == caf::sec::request_receiver_down))
                   outcome = status_from_error(err).with_context(where);
               });
    AF_RETURN_IF_ERROR(outcome);
  }
  return {};
}

} // namespace

result<std::map<std::string, protocol::shard_actor>>
find_shards(caf::actor_system& sys, const cluster_spec& cluster, const std::string& job,
            double timeout_seconds) {
  std::map<std::string, protocol::shard_actor> shards;
  auto bound = request_bound(timeout_seconds);
  for (int i = 0; i < cluster.num_tasks(job); ++i) {
    std::string name, address;
    auto target = reach_task(sys, cluster, job, i, name, address);
    if (!target)
      return target.error().with_context("asking for the shards");
    caf::scoped_actor self{sys};
    status outcome;
    self->request(*target, bound, protocol::manifest_atom::value)
      .receive(
        [&](protocol::task_manifest& manifest) {
          for (auto& [variable, shard] : manifest.shards)
            shards[variable] = shard;
        },
        [&](caf::error& err) {
          outcome = status_from_error(err).with_context("asking task " + name + " for its shards");
        });
    AF_RETURN_IF_ERROR(outcome);
  }
  return shards;
}

status report_task_done(caf::actor_system& sys, const cluster_spec& cluster,
                        const std::string& to_job, const std::string& job, int task,
                        double timeout_seconds) {
  return tell_tasks(sys, cluster, to_job, job + " task " + std::to_string(task) + " finished",
                    timeout_seconds, true, [&](caf::scoped_actor& self, auto& target, auto bound) {
                      return self->request(target, bound, protocol::task_done_atom::value, job,
                                           static_cast<std::int32_t>(task));
                    });
}

status report_task_joined(caf::actor_system& sys, const cluster_spec& cluster,
                          const std::string& to_job, const std::string& job, int task,
                          const protocol::task_actor& self_task, double timeout_seconds) {
  protocol::task_presence presence = self_task;
  return tell_tasks(sys, cluster, to_job, job + " task " + std::to_string(task) + " uses it",
                    timeout_seconds, false, [&](caf::scoped_actor& self, auto& target, auto bound) {
                      return self->request(target, bound, protocol::task_joined_atom::value, job,
                                           static_cast<std::int32_t>(task), presence);
                    });
}

} // namespace actorflow

#include "actors/task_client.hpp"

#include "actors/protocols/task.hpp"
#include "actors/protocols/wire.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>

namespace actorflow {

namespace {

/// Sends every task of `to_job` the request `ask` makes and waits (bounded) for each answer.
/// `gone_is_fine`: a task that cannot be reached, or that stops while answering, counts as
/// told (it stopped, which is what a done report asks).
template <class Ask>
status tell_tasks(caf::actor_system& sys, const cluster_spec& cluster, const std::string& to_job,
                  const std::string& what, double timeout_seconds, bool gone_is_fine, Ask ask) {
  if (!sys.has_middleman())
    return make_error(errc::failed_precondition,
                      "reporting to the cluster's tasks needs CAF's middleman in the actor system");
  auto bound = std::chrono::duration_cast<std::chrono::microseconds>(
    std::chrono::duration<double>(timeout_seconds));
  for (int i = 0; i < cluster.num_tasks(to_job); ++i) {
    auto name = "/job:" + to_job + "/replica:0/task:" + std::to_string(i);
    auto address = cluster.address(to_job, i);
    if (!address)
      return address.error();
    auto split = parse_host_port(*address);
    if (!split)
      return split.error();
    auto where = "telling task " + name + " at " + *address + " that " + what;
    auto target = sys.middleman().remote_actor<protocol::task_actor>(split->host, split->port);
    if (!target) {
      if (gone_is_fine)
        continue;
      return make_error(errc::unavailable, where + ": " + sys.render(target.error()));
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
  auto bound = std::chrono::duration_cast<std::chrono::microseconds>(
    std::chrono::duration<double>(timeout_seconds));
  for (int i = 0; i < cluster.num_tasks(job); ++i) {
    auto name = "/job:" + job + "/replica:0/task:" + std::to_string(i);
    auto address = cluster.address(job, i);
    if (!address)
      return address.error();
    auto split = parse_host_port(*address);
    if (!split)
      return split.error();
    auto target = sys.middleman().remote_actor<protocol::task_actor>(split->host, split->port);
    if (!target)
      return make_error(errc::unavailable, "asking task " + name + " at " + *address +
                                             " for its shards: " + sys.render(target.error()));
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

#include "actors/task_client.hpp"

#include "actors/protocols/task.hpp"
#include "actors/protocols/wire.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>

namespace actorflow {

status report_task_done(caf::actor_system& sys, const cluster_spec& cluster,
                        const std::string& to_job, const std::string& job, int task,
                        double timeout_seconds) {
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
    auto target = sys.middleman().remote_actor<protocol::task_actor>(split->host, split->port);
    if (!target)
      continue; // gone already: it no longer serves anyone
    caf::scoped_actor self{sys};
    status outcome;
    self->request(*target, bound, protocol::task_done_atom::value, job,
                  static_cast<std::int32_t>(task))
      .receive([](std::int32_t) {},
               [&](caf::error& err) {
                 // Stopping as the last worker reported is not a failure to report.
                 if (err != caf::sec::request_receiver_down)
                   outcome = status_from_error(err).with_context("telling task " + name + " at " +
                                                                 *address + " that " + job +
                                                                 " task " + std::to_string(task) +
                                                                 " finished");
               });
    AF_RETURN_IF_ERROR(outcome);
  }
  return {};
}

} // namespace actorflow

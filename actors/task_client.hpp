#pragma once
/// Blocking calls from plain code to a cluster's task services (actorflow-worker processes),
/// for what is not a session: telling the ps tasks a worker finished.
///   AF_RETURN_IF_ERROR(report_task_done(sys, cluster, "ps", "worker", 1, 10.0));

#include "actors/cluster_spec.hpp"
#include "actors/protocols/task.hpp"
#include "graph/status.hpp"

#include <caf/fwd.hpp>

#include <map>
#include <string>

namespace actorflow {

/// Tells every task of `to_job` that task `task` of job `job` has finished (protocols/task.hpp's
/// task_done_atom); once all of a job's tasks have, each ps task stops by itself. Waits at most
/// `timeout_seconds` for each. A task that is already gone counts as told (it stopped, which is
/// what the message asks). Errors name the task that could not be told.
status report_task_done(caf::actor_system& sys, const cluster_spec& cluster,
                        const std::string& to_job, const std::string& job, int task,
                        double timeout_seconds);

/// The parameter shards of every task of `job`, by variable name (from each task's manifest).
/// Errors name the task that could not be asked.
result<std::map<std::string, protocol::shard_actor>>
find_shards(caf::actor_system& sys, const cluster_spec& cluster, const std::string& job,
            double timeout_seconds);

/// Tells every task of `to_job` that task `task` of job `job`, served by `self_task`, works
/// with it (task_joined_atom): they watch `self_task` and stop when every such worker went
/// away without finishing. Errors name the task that could not be told.
status report_task_joined(caf::actor_system& sys, const cluster_spec& cluster,
                          const std::string& to_job, const std::string& job, int task,
                          const protocol::task_actor& self_task, double timeout_seconds);

} // namespace actorflow

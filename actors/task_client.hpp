#pragma once
/// Blocking calls from plain code to a cluster's task services (actorflow-worker processes),
/// for what is not a session: telling the ps tasks a worker finished.
///   AF_RETURN_IF_ERROR(report_task_done(sys, cluster, "ps", "worker", 1, 10.0));

#include "actors/cluster_spec.hpp"
#include "actors/protocols/task.hpp"
#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include <caf/fwd.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace actorflow {

class bulk_endpoint;
class bulk_sender;

/// Tells every task of `to_job` that task `task` of job `job` has finished (protocols/task.hpp's
/// task_done_atom); once all of a job's tasks have, each ps task stops by itself. Waits at most
/// `timeout_seconds` for each. A task that is already gone counts as told (it stopped, which is
/// what the message asks). Errors name the task that could not be told.
status report_task_done(caf::actor_system& sys, const cluster_spec& cluster,
                        const std::string& to_job, const std::string& job, int task,
                        double timeout_seconds);

/// Task `index` of `job` of `cluster`, reached over the middleman within `timeout_seconds`;
/// `name` and `address` are set for the caller's errors. Errors name the task and its address,
/// with the task as origin. Where nothing listens at its address yet, tries again for up to
/// `patience_seconds` (a task started later).
result<protocol::task_actor> reach_task(caf::actor_system& sys, const cluster_spec& cluster,
                                        const std::string& job, int index, double timeout_seconds,
                                        std::string& name, std::string& address,
                                        double patience_seconds = 0);

/// Ok when task `index` of `job` answers a probe (its incarnation; nothing is made for it)
/// within `timeout_seconds`; otherwise why not, naming the task. A coordinator asks a worker it
/// lost whether it is back; cluster_liveness asks every task every few seconds.
status probe_task(caf::actor_system& sys, const cluster_spec& cluster, const std::string& job,
                  int index, double timeout_seconds);

/// probe_task for every task of `job`: ok when all answer, else the first one's failure.
status probe_job(caf::actor_system& sys, const cluster_spec& cluster, const std::string& job,
                 double timeout_seconds);

/// probe_job from the process's default system (default_actor_system()), for plain code.
status probe_job(const cluster_spec& cluster, const std::string& job, double timeout_seconds);

/// How long a task that did not answer a step within `step_timeout_seconds` has to answer a
/// probe after it before it counts as hung: a live task answers at once (a quarter of the
/// step's bound, from 0.2 to 2 s). Step coordinators and the cluster coordinator use it.
double probe_after_step_seconds(double step_timeout_seconds);

/// Whether `failure` is one a lost connection or a task that stopped answering causes
/// (unavailable, deadline_exceeded, aborted, data_loss): then probing the tasks says whose.
bool connection_like(const status& failure);

/// A parameter shard and where its task takes bulk frames ("host:port"; empty when nowhere).
struct shard_location {
  protocol::shard_actor shard;
  std::string bulk_address;
  /// The shard's task: the origin of the shard's errors.
  task_origin task;
};

/// The parameter shards of every task of `job`, by variable name (from each task's manifest).
/// Errors name the task that could not be asked.
result<std::map<std::string, shard_location>>
find_shards(caf::actor_system& sys, const cluster_spec& cluster, const std::string& job,
            double timeout_seconds);

/// Sends large pushes to shards over their task's bulk channel, as device actors send large
/// tensors: ship() writes the tensor as a frame and gives the bulk_tensor to send in its
/// place; small tensors, and shards whose task has no endpoint, go in the message as usual.
///   shard_pusher pusher;
///   auto ticket = pusher.ship(where, "w", gradient);     // nullopt: send the tensor itself
///   AF_RETURN_IF_ERROR(pusher.flush());                  // every frame written, or why not
///   ticket ? send(where.shard, apply_gd_atom::value, lr, *ticket)
///          : send(where.shard, apply_gd_atom::value, lr, gradient);
/// Not thread-safe: one pusher per pushing thread.
class shard_pusher {
public:
  shard_pusher();
  ~shard_pusher();
  shard_pusher(const shard_pusher&) = delete;
  shard_pusher& operator=(const shard_pusher&) = delete;

  /// Starts writing `value` for `variable`'s shard at `where` when it has at least
  /// bulk_min_bytes() and the shard's task has an endpoint; the ticket then, else nothing.
  std::optional<protocol::bulk_tensor> ship(const shard_location& where,
                                            const std::string& variable, const tensor& value);
  /// Waits until every frame shipped so far is written; the first failure names the
  /// variable and the endpoint. Send the messages after this: a frame that failed never
  /// arrives, and its message would wait for it.
  status flush();

private:
  struct pending;
  std::shared_ptr<pending> pending_;
  std::shared_ptr<bulk_sender> sender_;
  std::string id_prefix_;
  std::uint64_t next_id_ = 0;
};

/// Tells every task of `to_job` that task `task` of job `job`, served by `self_task`, works
/// with it (task_joined_atom): they watch `self_task` and stop when every such worker went
/// away without finishing. Errors name the task that could not be told.
status report_task_joined(caf::actor_system& sys, const cluster_spec& cluster,
                          const std::string& to_job, const std::string& job, int task,
                          const protocol::task_actor& self_task, double timeout_seconds);

/// Reads large shards over the bulk channel: a bulk endpoint of its own (listening on `host`)
/// where the shards write the values it asks for, so they skip CAF's serialization.
///   auto puller = shard_puller::listen("127.0.0.1");
///   auto w = (*puller)->pull(sys, where, "w", 10.0);     // {value, version}
/// Thread-safe.
class shard_puller {
public:
  static result<std::unique_ptr<shard_puller>> listen(const std::string& host);
  ~shard_puller();
  shard_puller(const shard_puller&) = delete;
  shard_puller& operator=(const shard_puller&) = delete;

  /// The value and version of `variable`'s shard at `where`, waiting at most `timeout_seconds`
  /// for the answer and again for the frame (0: without bound); errors name the variable.
  result<protocol::shard_value> pull(caf::actor_system& sys, const shard_location& where,
                                     const std::string& variable, double timeout_seconds);

  /// "host:port" of the endpoint.
  const std::string& address() const;

private:
  struct inbox;
  shard_puller(std::shared_ptr<inbox> arrived, std::unique_ptr<bulk_endpoint> endpoint);

  std::shared_ptr<inbox> inbox_;
  std::unique_ptr<bulk_endpoint> endpoint_;
};

} // namespace actorflow

#pragma once
/// A server for one task of a cluster (TensorFlow's tf.train.Server): the task's devices as
/// actors and its task service, which also serves the master protocol, published over CAF's
/// network layer at the task's address.
///   auto server = server::start(cluster, "worker", 0);      // result<std::unique_ptr<server>>
///   std::cout << (*server)->target();                       // "caf://127.0.0.1:2222"
///   (*server)->join();                                      // until stop() or a stop message
/// server::create_local_server() is a one-task cluster (job "localhost") on a free loopback
/// port. actorflow-worker and actorflow-master are thin wrappers over this class.

#include "actors/cluster_spec.hpp"
#include "actors/protocols/master.hpp"
#include "actors/protocols/task.hpp"
#include "graph/status.hpp"

#include <caf/fwd.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace actorflow {

class runtime_env;
struct master_ref;

struct server_options {
  /// Address to listen on. Empty: the host of the task's address in the cluster spec (for
  /// start), 127.0.0.1 (for create_local_server and start_master). "0.0.0.0" listens on every
  /// interface.
  std::string bind_host;
  /// Port for create_local_server and start_master; 0 picks a free one. start uses the
  /// task's port from the spec.
  std::uint16_t port = 0;
  /// Threads of the task's inter-op and intra-op pools; 0 means one per core.
  int threads = 0;
  /// Number of CPU devices of the task.
  int cpu_device_count = 1;
  /// Bound on reaching a task and on its answers for the master this server serves.
  double timeout_seconds = 10;
  /// The server's master waits this long, on its first session, for a task of the cluster where
  /// nothing listens yet (master_options::connect_timeout_seconds); 0: fails at once.
  double connect_timeout_seconds = 60;
  /// Large tensors for this task's devices come over a TCP connection of their own
  /// (actors/bulk_channel.hpp): peers reach it at the host of the task's address, and it
  /// listens on bind_host (when given) at bulk_port.
  bool bulk_channel = true;
  /// The bulk endpoint's port (a Service or a firewall must know it); 0: one the system picks.
  std::uint16_t bulk_port = 0;
  /// Runs the server's actors in this system (it must have the middleman and actorflow's
  /// message types; check_actor_system says what is missing) instead of one of its own. The
  /// system must outlive the server.
  caf::actor_system* system = nullptr;
  /// Runs them in the process's default system (default_actor_system(), where sessions run),
  /// so that a session of this process reaches the server with local messages.
  bool in_default_system = false;
  /// A ps whose between-graph workers all went away without finishing stops this long after
  /// the last one (task_service_options::abandoned_grace_seconds); 0 never.
  double abandoned_grace_seconds = 60;
  /// The tasks of the cluster the server's master reaches (master_options::device_filters);
  /// empty: all.
  std::vector<std::string> device_filters;
  /// The task's per-process state (devices/runtime_env.hpp); null: the process default.
  std::shared_ptr<runtime_env> env;
};

class server {
public:
  /// Starts task `task` of job `job` of `cluster` and publishes it at the task's address.
  /// Errors name the task and the address (a job or task not in the spec, a port in use).
  static result<std::unique_ptr<server>> start(std::shared_ptr<const cluster_spec> cluster,
                                               const std::string& job, int task,
                                               server_options options = {});
  /// A one-task local server, job "localhost" (TensorFlow's create_local_server); its port is
  /// options.port, or a free one.
  static result<std::unique_ptr<server>> create_local_server(server_options options = {});
  /// A master with no devices of its own, for `cluster`'s tasks (actorflow-master --cluster),
  /// on options.bind_host:options.port.
  static result<std::unique_ptr<server>> start_master(std::shared_ptr<const cluster_spec> cluster,
                                                      server_options options = {});

  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// "caf://host:port": what clients pass as session_options::target.
  std::string target() const;
  /// The address it listens on and its port (the chosen one when 0 was asked for).
  const std::string& host() const { return host_; }
  std::uint16_t port() const { return port_; }
  /// "host:port" where peers send this task large tensors; empty without a bulk endpoint.
  const std::string& bulk_address() const { return bulk_address_; }
  /// "/job:worker/replica:0/task:0", or "master" for start_master.
  const std::string& name() const { return name_; }

  /// The served master protocol: the task service, or the bare master.
  protocol::master_actor master() const;
  /// The served master for a session of this process (session_options::master), which then
  /// reaches it with local messages when the server runs in the session's system.
  std::shared_ptr<const master_ref> local_master() const;
  /// The task service; a null handle for start_master.
  protocol::task_actor task() const;
  /// The actor system the server runs in.
  caf::actor_system& system();

  /// For a worker task that trains with the tasks of `to_job` (its ps tasks): tells them it
  /// joined (they watch it, and stop once every worker that joined went away without
  /// finishing), or that it finished (once all have, they stop). start() servers only; errors
  /// name the task that could not be told (actors/task_client.hpp).
  status report_joined(const std::string& to_job, double timeout_seconds);
  status report_done(const std::string& to_job, double timeout_seconds);

  /// Blocks until the server has stopped: stop() from another thread, or a stop message to
  /// its task (protocols/task.hpp).
  void join();
  /// After join(): whether the task stopped because its workers went away without finishing.
  bool abandoned() const;
  /// After join(): why the served actor ended when it died rather than stopped (an actor of
  /// the task was killed or crashed); empty after a stop. A supervisor should restart it.
  std::string failure() const;
  /// Unpublishes the server and stops its actors; waits (at most 10 s) until they are gone.
  /// Idempotent; any thread.
  void stop();

  /// The server's state (actors/server.cpp).
  struct impl;

private:
  explicit server(std::unique_ptr<impl> state);
  static result<std::unique_ptr<server>> launch(std::unique_ptr<impl> state);

  std::unique_ptr<impl> impl_;
  std::string host_;
  std::uint16_t port_ = 0;
  std::string name_;
  std::string bulk_address_;
};

} // namespace actorflow

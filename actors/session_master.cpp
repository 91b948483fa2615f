#include "actors/session_master.hpp"

#include "actors/logging.hpp"
#include "actors/master.hpp"
#include "actors/protocols/wire.hpp"
#include "actors/scheduler.hpp"
#include "actors/task_service.hpp"
#include "actors/transport_guard.hpp"
#include "devices/runtime_env.hpp"
#include "graph/tensor.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>

#include <typeinfo>

namespace actorflow {

namespace {

using namespace protocol;

/// How this session's own tasks run, on `pools`.
task_service_options own_task_options(const session_options& options, compute_pools pools) {
  task_service_options task;
  task.pools = std::move(pools);
  task.cpu_device_count = options.cpu_device_count;
  task.test_device_count = options.test_device_count;
  task.gpu = options.gpu;
  task.run_inline = options.run_inline;
  task.trace = options.trace;
  task.env = options.env;
  return task;
}

} // namespace

void session_master::release() {
  if (owned && master)
    caf::anon_send_exit(master, caf::exit_reason::user_shutdown);
  for (auto& task : owned_tasks)
    protocol::send_stop(task);
  owned_tasks.clear();
}

status check_actor_system(caf::actor_system& sys, const session_options& options) {
  bool crosses_processes = !options.target.empty() || options.cluster != nullptr;
  if (!crosses_processes)
    return {};
  return check_network_system(sys, options.target.empty() ? std::string{"a session on a cluster"}
                                                          : "a session on " + options.target);
}

std::unique_ptr<caf::actor_system_config> network_config(std::size_t max_threads, bool serving) {
  auto config = std::make_unique<caf::actor_system_config>();
  // Connections are made under these settings from now on: they can no longer change.
  freeze_process_transport_security();
  use_guarded_transport(*config, process_transport_security());
  add_actorflow_message_types(*config);
  // A shared queue whose idle workers poll briefly, then sleep (actors/scheduler.hpp). CAF's
  // work stealing polls and naps for milliseconds instead, burning cores that kernels need.
  use_actorflow_scheduler(*config, serving ? std::chrono::microseconds{0} : scheduler_spin());
  // Deserialize on the I/O thread instead of BASP's workers: one thread handoff less per
  // message from another process (5-10% more steps/s on the classic example), and large
  // tensors bypass BASP anyway (actors/bulk_channel.hpp).
  config->set("middleman.workers", std::size_t{0});
  if (max_threads > 0)
    config->set("scheduler.max-threads", max_threads);
  return config;
}

caf::duration request_bound(double seconds) {
  if (seconds <= 0)
    return caf::infinite;
  return caf::duration{std::chrono::microseconds{static_cast<std::int64_t>(seconds * 1e6)}};
}

status check_network_system(caf::actor_system& sys, const std::string& what) {
  // Never on a network without the security its environment asked for.
  AF_RETURN_IF_ERROR(process_transport_security_usable().with_context(what));
  if (!sys.has_middleman())
    return make_error(errc::failed_precondition,
                      what + " needs CAF's middleman in the actor system: call "
                             "config.load<caf::io::middleman>() before creating it");
  // Unregistered types cannot cross processes: CAF would fail every message at run time.
  if (sys.types().make_value(typeid(tensor)) == nullptr)
    return make_error(errc::failed_precondition,
                      what + " needs actorflow's message types in the actor system: call "
                             "actorflow::add_actorflow_message_types(config) before creating it");
  return {};
}

session_master make_session_master(caf::actor_system& sys, const session_options& options) {
  session_master out;
  if (options.master) {
    out.master = options.master->actor;
    return out;
  }
  master_options master;
  master.timeout_seconds = task_timeout(options);
  master.connect_timeout_seconds = options.connect_timeout_seconds;
  if (!options.in_process_cluster.empty()) {
    // The tasks share pools of their own whose kernels (and the BLAS) are single-threaded:
    // the tasks run their partitions side by side (one tower per worker), which is where the
    // parallelism comes from, and concurrent GEMMs each asking OpenBLAS for every core
    // oversubscribe them (measured: 2 threads ran data-parallel MLP steps 1.7x slower than 1).
    auto task_options =
      own_task_options(options, env_or_default(options.env).make_pools(options.inter_op_parallelism_threads, 1));
    task_options.cpu_device_count = 1;
    for (auto& [job, count] : options.in_process_cluster)
      for (int task = 0; task < count; ++task)
        out.owned_tasks.push_back(spawn_task_service(sys, job, task, task_options));
    master.task_services = out.owned_tasks;
  } else if (options.cluster) {
    master.cluster = options.cluster;
    master.device_filters = options.device_filters;
  } else {
    auto& env = env_or_default(options.env);
    auto pools = options.use_per_session_threads
                   ? env.make_pools(options.inter_op_parallelism_threads,
                                    options.intra_op_parallelism_threads)
                   : env.shared_pools(options.inter_op_parallelism_threads,
                                      options.intra_op_parallelism_threads);
    out.owned_tasks.push_back(
      spawn_task_service(sys, "localhost", 0, own_task_options(options, pools)));
    master.task_services = out.owned_tasks;
    master.own_task = "/job:localhost/replica:0/task:0";
  }
  out.master = spawn_master(sys, std::move(master));
  out.owned = true;
  return out;
}

void log_session_devices(const std::string& master_name, std::int64_t handle,
                         const std::vector<std::string>& devices) {
  if (!verbose())
    return;
  for (auto& device : devices)
    log_verbose("session " + std::to_string(handle) + " on " + master_name + ": device " + device);
}

double task_timeout(const session_options& options) {
  if (options.timeout_seconds > 0)
    return options.timeout_seconds;
  return options.cluster || !options.target.empty() ? 10.0 : 0.0;
}

protocol::session_config session_config_for(const session_options& options, caf::actor owner) {
  auto config = protocol::make_session_config(
    options.allow_soft_placement, options.log_device_placement,
    static_cast<std::int64_t>(task_timeout(options) * 1000), std::move(owner),
    options.default_task);
  config.memory_limit_bytes = static_cast<std::int64_t>(options.memory_limit_bytes);
  config.fuse_ops = options.fuse_ops;
  config.mixed_precision = options.mixed_precision;
  return config;
}

double master_timeout(const session_options& options) {
  auto tasks = task_timeout(options);
  return tasks > 0 ? 3 * tasks + 1.0 : 0.0;
}

} // namespace actorflow

#include "actors/session.hpp"

#include "actors/master.hpp"
#include "actors/protocols/master.hpp"
#include "actors/protocols/task.hpp"
#include "actors/protocols/wire.hpp"
#include "actors/task_service.hpp"
#include "devices/device.hpp"
#include "devices/pool_allocator.hpp"
#include "devices/thread_pool.hpp"
#include "serialization/graph_io.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>
#include <iostream>
#include <mutex>

namespace actorflow {

namespace {

using namespace protocol;

/// Process-wide pools, made by the first session that needs them (TensorFlow does the same).
/// The BLAS's thread count is process-wide: a session on these pools sets it back to match
/// them, since an in-process cluster may have set it to 1 since.
const compute_pools& process_pools(const session_options& options) {
  static std::mutex mutex;
  static compute_pools pools;
  static int intra_threads = 0;
  std::lock_guard<std::mutex> guard{mutex};
  if (!pools.intra_op) {
    intra_threads = resolve_thread_count(options.intra_op_parallelism_threads);
    pools = make_compute_pools(options.inter_op_parallelism_threads, intra_threads);
  } else {
    set_blas_threads(intra_threads);
  }
  return pools;
}

} // namespace

namespace {
std::mutex default_system_mutex;
int default_scheduler_threads = 0;
caf::actor_system* default_system = nullptr;
} // namespace

bool set_default_scheduler_threads(int threads) {
  std::lock_guard<std::mutex> guard{default_system_mutex};
  if (default_system != nullptr)
    return false;
  default_scheduler_threads = threads;
  return true;
}

caf::actor_system& default_actor_system() {
  std::lock_guard<std::mutex> guard{default_system_mutex};
  if (default_system == nullptr) {
    // Both live until exit: actors of sessions in static objects may outlive main's locals.
    auto* config = new caf::actor_system_config;
    config->load<caf::io::middleman>();
    add_actorflow_message_types(*config);
    // A shared queue with a condition variable: idle workers sleep until a message arrives.
    // Work stealing polls and naps instead, burning cores that kernels need and adding latency.
    config->set("scheduler.policy", caf::atom("sharing"));
    // Deserialize on the I/O thread: one thread handoff less per message from another process
    // (see apps/support/server.cpp).
    config->set("middleman.workers", std::size_t{0});
    // Embedders who build their own actor_system call this on their config too.
    add_actorflow_message_types(*config);
    if (default_scheduler_threads > 0)
      config->set("scheduler.max-threads", static_cast<size_t>(default_scheduler_threads));
    default_system = new caf::actor_system{*config};
  }
  return *default_system;
}

struct session::impl {
  impl(caf::actor_system& sys, graph& g, session_options opts)
    : system(sys), g(g), options(std::move(opts)) {
    install_host_pool_allocator();
    if (!options.target.empty()) {
      setup = connect_target();
      return;
    }
    master_options master;
    master.timeout_seconds = effective_timeout();
    if (!options.in_process_cluster.empty()) {
      // The tasks share pools of their own whose kernels (and the BLAS) are single-threaded:
      // the tasks run their partitions side by side (one tower per worker), which is where the
      // parallelism comes from, and concurrent GEMMs each asking OpenBLAS for every core
      // oversubscribe them (measured: 2 threads ran data-parallel MLP steps 1.7x slower than 1).
      auto task_options =
        own_task_options(make_compute_pools(options.inter_op_parallelism_threads, 1));
      task_options.cpu_device_count = 1;
      for (auto& [job, count] : options.in_process_cluster)
        for (int task = 0; task < count; ++task)
          owned_tasks.push_back(spawn_task_service(system, job, task, task_options));
      master.task_services = owned_tasks;
    } else if (options.cluster) {
      master.cluster = options.cluster;
    } else {
      auto pools = options.use_per_session_threads
                     ? make_compute_pools(options.inter_op_parallelism_threads,
                                          options.intra_op_parallelism_threads)
                     : process_pools(options);
      owned_tasks.push_back(spawn_task_service(system, "localhost", 0, own_task_options(pools)));
      master.task_services = owned_tasks;
    }
    master_actor = spawn_master(system, std::move(master));
    owns_master = true;
  }

  /// How this session's own tasks run, on `pools`.
  task_service_options own_task_options(compute_pools pools) const {
    task_service_options task;
    task.pools = std::move(pools);
    task.cpu_device_count = options.cpu_device_count;
    task.run_inline = options.run_inline;
    task.trace = options.trace;
    return task;
  }

  /// Reaches the master at options.target; errors quote the target.
  status connect_target() {
    auto address = parse_target(options.target);
    if (!address)
      return address.error();
    auto master = system.middleman().remote_actor(address->host, address->port);
    if (!master)
      return make_error(errc::unavailable, "cannot reach the master at " + options.target + ": " +
                                             system.render(master.error()));
    master_actor = *master;
    return {};
  }

  ~impl() {
    if (handle != 0) {
      // Frees the session's partitions on every task; waits (bounded) when the master is
      // remote, so that the message leaves before this process may exit.
      if (owns_master) {
        caf::anon_send(master_actor, close_atom::value, handle);
      } else {
        status closed;
        static_cast<void>(ask_within(effective_timeout(), closed, master_actor,
                                     close_atom::value, handle));
      }
    }
    if (owner)
      caf::anon_send_exit(owner, caf::exit_reason::user_shutdown);
    if (owns_master)
      caf::anon_send_exit(master_actor, caf::exit_reason::user_shutdown);
    for (auto& task : owned_tasks)
      caf::anon_send(task, stop_atom::value);
    if (options.drive)
      options.drive();
  }

  /// Bound on answers: the option, or 10 s with a cluster (a hung task must not hang the client).
  double effective_timeout() const {
    if (options.timeout_seconds > 0)
      return options.timeout_seconds;
    return options.cluster || !options.target.empty() ? 10.0 : 0.0;
  }

  /// How long the client waits for its master: unbounded for a master in this process (it
  /// bounds every task's answer itself); for a remote one, its three bounded phases (reaching
  /// tasks, registering partitions, the step) plus a margin, so a dead master cannot hang us.
  double master_timeout() const {
    return owns_master ? 0.0 : 3 * effective_timeout() + 1.0;
  }

  /// Sends `args` to `dest` and waits for the single answer, stored in `answer`, at most
  /// `timeout_seconds` (0: without bound).
  template <class T, class... Ts>
  status ask_within(double timeout_seconds, T& answer, const caf::actor& dest, Ts&&... args) {
    caf::scoped_actor self{system};
    self->send(dest, std::forward<Ts>(args)...);
    if (options.drive)
      options.drive();
    status transport;
    auto on_error = [&](caf::error& err) { transport = status_from_error(err); };
    if (timeout_seconds > 0) {
      auto bound = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::duration<double>(timeout_seconds));
      self->receive([&](T& value) { answer = std::move(value); }, on_error,
                    caf::after(bound) >> [&] {
                      transport = make_error(errc::deadline_exceeded,
                                             "no answer within " +
                                               std::to_string(timeout_seconds) + " s");
                    });
    } else {
      self->receive([&](T& value) { answer = std::move(value); }, on_error);
    }
    return transport;
  }

  /// A copy of the client's graph for the master, which records placements in its own.
  result<graph_def> snapshot() const {
    auto bytes = serialize_graph(g);
    if (!bytes)
      return bytes.error();
    auto copy = std::make_shared<graph>();
    AF_RETURN_IF_ERROR(deserialize_graph(bytes->data(), bytes->size(), *copy));
    return graph_def{std::move(copy)};
  }

  std::string master_name() const {
    return options.target.empty() ? std::string{"the master"} : "the master at " + options.target;
  }

  /// Opens the session on the master the first time, and sends the graph again when it has
  /// grown since (TensorFlow's ExtendSession).
  status sync_graph() {
    AF_RETURN_IF_ERROR(setup);
    if (handle != 0 && g.size() == sent_nodes)
      return {};
    auto def = snapshot();
    if (!def)
      return def.error();
    if (handle == 0) {
      session_config config;
      config.allow_soft_placement = options.allow_soft_placement;
      config.log_device_placement = options.log_device_placement;
      config.default_task = options.default_task;
      config.timeout_ms = static_cast<std::int64_t>(effective_timeout() * 1000);
      // Lives as long as this session: if this process dies without closing the session, the
      // master sees it go down and frees the session's partitions.
      owner = system.spawn([]() -> caf::behavior { return {[](stop_atom) {}}; });
      config.owner = owner;
      session_created created;
      AF_RETURN_IF_ERROR(ask_within(master_timeout(), created, master_actor, create_atom::value,
                                    config, std::move(*def))
                           .with_context("opening a session on " + master_name()));
      AF_RETURN_IF_ERROR(created.outcome);
      handle = created.handle;
      devices = std::move(created.devices);
    } else {
      status extended;
      AF_RETURN_IF_ERROR(ask_within(master_timeout(), extended, master_actor, extend_atom::value,
                                    handle, std::move(*def))
                           .with_context("sending the grown graph to " + master_name()));
      AF_RETURN_IF_ERROR(extended);
    }
    sent_nodes = g.size();
    return {};
  }

  status check_feeds(const feed_list& feeds) {
    for (auto& [target, value] : feeds) {
      if (!target.valid() || target.owner != &g)
        return make_error(errc::invalid_argument, "a feed names no tensor of this graph");
      if (!value.is_initialized())
        return make_error(errc::invalid_argument,
                          "the value fed to '" + target.tensor_name() + "' is empty");
      if (value.type() != target.type())
        return make_error(errc::invalid_argument,
                          "cannot feed a " + std::string{to_string(value.type())} + " tensor to '" +
                            target.tensor_name() + "', which has dtype " + to_string(target.type()));
      if (!target.shape().is_compatible_with(value.shape()))
        return make_error(errc::invalid_argument,
                          "cannot feed a tensor of shape " + value.shape().to_string() + " to '" +
                            target.tensor_name() + "', which has shape " + target.shape().to_string());
    }
    return {};
  }

  /// Records placements the master made: the log, and each node's assigned_device in the
  /// client's graph (as a local session always did).
  void note_placements(const std::vector<std::string>& lines) {
    for (auto& line : lines) {
      if (options.log_device_placement)
        std::cerr << line << '\n';
      placement_log.push_back(line);
      auto colon = line.find(": ");
      if (colon == std::string::npos)
        continue;
      auto id = g.find(line.substr(0, colon));
      if (id >= 0)
        g.at(id).assigned_device = line.substr(colon + 2);
    }
  }

  result<std::vector<tensor>> run(const std::vector<output>& fetches, const feed_list& feeds,
                                  const std::vector<output>& targets, std::int64_t* execution_ns) {
    AF_RETURN_IF_ERROR(g.status());
    AF_RETURN_IF_ERROR(check_feeds(feeds));
    master_run_request request;
    for (auto& f : fetches) {
      if (!f.valid() || f.owner != &g)
        return make_error(errc::invalid_argument, "a fetch names no tensor of this graph");
      request.fetches.push_back(f.tensor_name());
    }
    for (auto& t : targets) {
      if (!t.valid() || t.owner != &g)
        return make_error(errc::invalid_argument, "a target names no node of this graph");
      request.targets.push_back(t.name());
    }
    for (auto& [target, value] : feeds)
      request.feeds.emplace_back(target.tensor_name(), value);
    master_run_result answer;
    {
      std::lock_guard<std::mutex> guard{mutex};
      AF_RETURN_IF_ERROR(sync_graph());
      request.handle = handle;
    }
    AF_RETURN_IF_ERROR(ask_within(master_timeout(), answer, master_actor, run_atom::value,
                                  std::move(request))
                         .with_context("running a step on " + master_name()));
    {
      std::lock_guard<std::mutex> guard{mutex};
      note_placements(answer.placed);
    }
    AF_RETURN_IF_ERROR(answer.outcome);
    *execution_ns = answer.execution_ns;
    return std::move(answer.fetched);
  }

  caf::actor_system& system;
  graph& g;
  session_options options;
  /// Why the session cannot run (a bad or unreachable target), or ok.
  status setup;
  caf::actor master_actor;
  /// The master is this session's own (local devices, an in-process cluster, or this process
  /// acting as master of a cluster) rather than a remote one reached through `target`.
  bool owns_master = false;
  /// Task services this session spawned (local devices, in-process clusters), stopped at its end.
  std::vector<caf::actor> owned_tasks;
  std::mutex mutex;
  /// Stands for this session on the master (session_config::owner).
  caf::actor owner;
  /// The session's handle on the master; 0 until the first run opens it.
  std::int64_t handle = 0;
  /// Nodes of the client's graph the master has.
  std::size_t sent_nodes = 0;
  std::vector<std::string> devices;
  std::vector<std::string> placement_log;
};

session::session(graph& g, session_options options)
  : session(default_actor_system(), g, std::move(options)) {}

session::session(caf::actor_system& system, graph& g, session_options options)
  : impl_(std::make_unique<impl>(system, g, std::move(options))) {}

session::~session() = default;

result<std::vector<tensor>> session::run(const std::vector<output>& fetches, const feed_list& feeds,
                                         const std::vector<output>& targets, step_stats* stats) {
  auto started = std::chrono::steady_clock::now();
  std::int64_t execution_ns = 0;
  auto r = impl_->run(fetches, feeds, targets, &execution_ns);
  if (stats != nullptr) {
    stats->total_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    stats->execution_seconds = static_cast<double>(execution_ns) * 1e-9;
  }
  return r;
}

status session::run_targets(const std::vector<output>& targets, const feed_list& feeds) {
  std::int64_t execution_ns = 0;
  auto r = impl_->run({}, feeds, targets, &execution_ns);
  return r ? status{} : r.error();
}

const std::vector<std::string>& session::placement_log() const { return impl_->placement_log; }

std::vector<std::string> session::device_names() const {
  std::lock_guard<std::mutex> guard{impl_->mutex};
  // Opens the session on its master if no step has yet: the master knows the devices.
  if (impl_->handle == 0 && !impl_->sync_graph().ok())
    return {};
  return impl_->devices;
}

} // namespace actorflow

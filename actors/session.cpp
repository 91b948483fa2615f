#include "actors/session.hpp"

#include "actors/device_actor.hpp"
#include "actors/protocols/wire.hpp"
#include "devices/device.hpp"
#include "devices/pool_allocator.hpp"
#include "devices/thread_pool.hpp"
#include "graph/partition.hpp"
#include "graph/placement.hpp"

#include "actors/protocols/task.hpp"
#include "actors/task_service.hpp"
#include "actors/protocols/wire.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>

namespace actorflow {

namespace {

using namespace protocol;

/// Process-wide pools, made by the first session that needs them (TensorFlow does the same).
struct shared_pools {
  std::shared_ptr<thread_pool> inter_op;
  std::shared_ptr<thread_pool> intra_op;
};

shared_pools& process_pools(const session_options& options) {
  static std::mutex mutex;
  static shared_pools pools;
  std::lock_guard<std::mutex> guard{mutex};
  if (!pools.intra_op) {
    auto intra = resolve_thread_count(options.intra_op_parallelism_threads);
    pools.intra_op = std::make_shared<thread_pool>("intra_op", intra - 1 > 0 ? intra - 1 : 0);
    pools.inter_op = std::make_shared<thread_pool>(
      "inter_op", resolve_thread_count(options.inter_op_parallelism_threads));
    set_blas_threads(intra);
  }
  return pools;
}

device_name local_device(const std::string& type, int id) {
  device_name name;
  name.job = "localhost";
  name.replica = 0;
  name.task = 0;
  name.type = type;
  name.id = id;
  return name;
}

std::string tensor_name(const output& o) { return o.tensor_name(); }

/// What one run signature needs on each device, made once.
struct run_plan {
  struct per_device {
    std::string name;
    caf::actor actor;
    std::int64_t handle = 0;
    /// (index into the caller's feeds, tensor name)
    std::vector<std::pair<std::size_t, std::string>> feeds;
    /// (index into the caller's fetches, tensor name)
    std::vector<std::pair<std::size_t, std::string>> fetches;
  };
  std::vector<per_device> devices;
};

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
    std::shared_ptr<thread_pool> inter_op, intra_op;
    if (options.use_per_session_threads) {
      auto intra = resolve_thread_count(options.intra_op_parallelism_threads);
      intra_op = std::make_shared<thread_pool>("intra_op", intra - 1 > 0 ? intra - 1 : 0);
      inter_op = std::make_shared<thread_pool>(
        "inter_op", resolve_thread_count(options.inter_op_parallelism_threads));
      set_blas_threads(intra);
    } else {
      auto& pools = process_pools(options);
      intra_op = pools.intra_op;
      inter_op = pools.inter_op;
    }
    device_actor_options actor_options;
    actor_options.inter_op_pool = options.run_inline ? nullptr : inter_op;
    actor_options.trace = options.trace;
    if (!options.in_process_cluster.empty()) {
      setup = start_in_process_cluster();
      return;
    }
    if (options.cluster) {
      // Ids unique across sessions: tasks of a cluster serve several sessions at once.
      std::random_device entropy;
      id_base = (static_cast<std::int64_t>(entropy()) << 20) & 0x7fffffffffffffffLL;
      next_handle = id_base;
      next_step = id_base;
      setup = connect_cluster();
      return;
    }
    std::vector<std::pair<device_name, std::unique_ptr<device>>> made;
    for (int i = 0; i < std::max(1, options.cpu_device_count); ++i)
      made.emplace_back(local_device("CPU", i), make_cpu_device(local_device("CPU", i), intra_op));
    for (auto& [name, dev] : made) {
      auto actor = spawn_device_actor(system, std::move(dev), actor_options);
      devices.emplace_back(name, actor);
      owned_devices.push_back(actor);
    }
    share_peer_table();
    coordinator = spawn_step_coordinator(system);
  }

  void share_peer_table() {
    peer_table peers;
    for (auto& [name, actor] : devices)
      peers.devices.emplace(name.to_string(), actor);
    for (auto& [name, actor] : devices)
      caf::anon_send(actor, peers_atom::value, peers);
  }

  /// Finds every task's service and its devices; errors name the task and its address.
  status connect_cluster() {
    auto& cluster = *options.cluster;
    for (auto& job : cluster.jobs()) {
      for (int task = 0; task < cluster.num_tasks(job); ++task) {
        auto address = cluster.address(job, task);
        if (!address)
          return address.error();
        auto where = "/job:" + job + "/replica:0/task:" + std::to_string(task) + " at " + *address;
        auto colon = address->rfind(':');
        auto host = address->substr(0, colon);
        if (host.size() > 2 && host.front() == '[' && host.back() == ']')
          host = host.substr(1, host.size() - 2);
        auto port = static_cast<std::uint16_t>(std::stoi(address->substr(colon + 1)));
        auto service = system.middleman().remote_actor(host, port);
        if (!service)
          return make_error(errc::unavailable,
                            "cannot reach task " + where + ": " + system.render(service.error()));
        device_list listed;
        AF_RETURN_IF_ERROR(ask(listed, *service, devices_atom::value)
                             .with_context("task " + where));
        for (auto& [name, actor] : listed.devices) {
          auto parsed = device_name::parse(name);
          if (!parsed || !parsed->fully_specified())
            return make_error(errc::data_loss, "task " + where + " reported a bad device name '" +
                                                 name + "'");
          devices.emplace_back(*parsed, actor);
        }
      }
    }
    share_peer_table();
    coordinator = spawn_step_coordinator(system);
    return {};
  }

  /// Spawns every task of options.in_process_cluster and collects their devices.
  status start_in_process_cluster() {
    task_service_options task_options;
    task_options.threads = options.inter_op_parallelism_threads;
    task_options.trace = options.trace;
    for (auto& [job, count] : options.in_process_cluster) {
      for (int task = 0; task < count; ++task) {
        auto service = spawn_task_service(system, job, task, task_options);
        owned_tasks.push_back(service);
        device_list listed;
        AF_RETURN_IF_ERROR(ask(listed, service, devices_atom::value)
                             .with_context("task /job:" + job + "/task:" + std::to_string(task)));
        for (auto& [name, actor] : listed.devices) {
          auto parsed = device_name::parse(name);
          if (!parsed)
            return parsed.error();
          devices.emplace_back(*parsed, actor);
        }
      }
    }
    share_peer_table();
    coordinator = spawn_step_coordinator(system);
    return {};
  }

  device_name default_task_name() const {
    if (!options.default_task.empty())
      if (auto parsed = device_name::parse(options.default_task))
        return *parsed;
    std::vector<std::string> jobs;
    if (options.cluster)
      jobs = options.cluster->jobs();
    else
      for (auto& [job, count] : options.in_process_cluster)
        jobs.push_back(job);
    if (jobs.empty())
      return local_device("CPU", 0);
    device_name d;
    auto has_worker = std::find(jobs.begin(), jobs.end(), "worker") != jobs.end();
    d.job = has_worker ? std::string{"worker"} : jobs.front();
    d.replica = 0;
    d.task = 0;
    return d;
  }

  ~impl() {
    // Devices of a cluster outlive the session: only our partitions go.
    if (options.cluster)
      for (auto& [signature, plan] : plans)
        for (auto& d : plan.devices)
          caf::anon_send(d.actor, deregister_atom::value, d.handle);
    for (auto& actor : owned_devices)
      caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
    for (auto& task : owned_tasks)
      caf::anon_send(task, stop_atom::value);
    caf::anon_send_exit(coordinator, caf::exit_reason::user_shutdown);
    if (options.drive)
      options.drive();
  }

  /// Bound on answers: the option, or 10 s on a cluster (a hung task must not hang the client).
  double effective_timeout() const {
    if (options.timeout_seconds > 0)
      return options.timeout_seconds;
    return options.cluster ? 10.0 : 0.0;
  }

  /// Sends `args` to `dest` and waits for the single answer, at most effective_timeout().
  template <class T, class... Ts>
  status ask(T& answer, const caf::actor& dest, Ts&&... args) {
    return ask_within(effective_timeout(), answer, dest, std::forward<Ts>(args)...);
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

  result<run_plan*> plan_for(const std::vector<output>& fetches, const feed_list& feeds,
                             const std::vector<output>& targets) {
    std::string signature;
    for (auto& f : fetches)
      signature += f.tensor_name() + ",";
    signature += "|";
    for (auto& f : feeds)
      signature += f.first.tensor_name() + ",";
    signature += "|";
    for (auto& t : targets)
      signature += t.name() + ",";
    if (auto i = plans.find(signature); i != plans.end())
      return &i->second;

    std::vector<int> roots;
    for (auto& f : fetches) {
      if (!f.valid() || f.owner != &g)
        return make_error(errc::invalid_argument, "a fetch names no tensor of this graph");
      roots.push_back(f.node_id);
    }
    for (auto& t : targets) {
      if (!t.valid() || t.owner != &g)
        return make_error(errc::invalid_argument, "a target names no node of this graph");
      roots.push_back(t.node_id);
    }
    std::set<int> fed;
    for (auto& f : feeds)
      fed.insert(f.first.node_id);
    auto needed = prune(g, roots, fed);

    std::vector<device_name> names;
    for (auto& d : devices)
      names.push_back(d.first);
    placement_options placement;
    placement.allow_soft_placement = options.allow_soft_placement;
    placement.default_task = default_task_name();
    std::vector<std::string> placed;
    AF_RETURN_IF_ERROR(place_nodes(
      g, needed, names,
      [](const std::string& op, const std::string& type, dtype t) {
        return kernel_registry::global().has(op, type, t);
      },
      placement, &placed));
    for (auto& line : placed) {
      if (options.log_device_placement)
        std::cerr << line << '\n';
      placement_log.push_back(line);
    }

    auto parts = partition_graph(g, needed, fed);
    if (!parts)
      return parts.error();
    run_plan plan;
    for (auto& [device, part] : *parts) {
      run_plan::per_device entry;
      auto actor = actor_for(device);
      if (!actor)
        return make_error(errc::internal, "no device actor for " + device);
      entry.actor = *actor;
      entry.name = device;
      entry.handle = ++next_handle;
      status registered;
      auto where = "registering a partition on " + device;
      AF_RETURN_IF_ERROR(ask(registered, entry.actor, register_atom::value,
                             make_partition_registration(entry.handle, part))
                           .with_context(where));
      AF_RETURN_IF_ERROR(registered.with_context(where));
      for (std::size_t i = 0; i < feeds.size(); ++i)
        if (g.at(feeds[i].first.node_id).assigned_device == device)
          entry.feeds.emplace_back(i, tensor_name(feeds[i].first));
      for (std::size_t i = 0; i < fetches.size(); ++i)
        if (g.at(fetches[i].node_id).assigned_device == device)
          entry.fetches.emplace_back(i, tensor_name(fetches[i]));
      plan.devices.push_back(std::move(entry));
    }
    return &(plans[signature] = std::move(plan));
  }

  std::optional<caf::actor> actor_for(const std::string& device) {
    for (auto& [name, actor] : devices)
      if (name.to_string() == device)
        return actor;
    return std::nullopt;
  }

  result<std::vector<tensor>> run(const std::vector<output>& fetches, const feed_list& feeds,
                                  const std::vector<output>& targets, std::int64_t* execution_ns) {
    AF_RETURN_IF_ERROR(setup);
    AF_RETURN_IF_ERROR(g.status());
    AF_RETURN_IF_ERROR(check_feeds(feeds));
    run_plan* plan = nullptr;
    std::int64_t step_id = 0;
    {
      std::lock_guard<std::mutex> guard{mutex};
      auto made = plan_for(fetches, feeds, targets);
      if (!made)
        return made.error();
      plan = *made;
      step_id = ++next_step;
    }
    step_plan step;
    step.step_id = step_id;
    step.timeout_ms = static_cast<std::int64_t>(effective_timeout() * 1000);
    for (auto& d : plan->devices) {
      step.device_names.push_back(d.name);
      std::vector<std::pair<std::string, tensor>> device_feeds;
      for (auto& [index, name] : d.feeds)
        device_feeds.emplace_back(name, feeds[index].second);
      std::vector<std::string> device_fetches;
      for (auto& f : d.fetches)
        device_fetches.push_back(f.second);
      step.calls.emplace_back(d.actor, make_run_request(d.handle, step_id, std::move(device_feeds),
                                                        std::move(device_fetches)));
    }
    step_outcome outcome;
    // The coordinator bounds each device's answer; waiting on it needs no bound of its own.
    AF_RETURN_IF_ERROR(ask_within(0, outcome, coordinator, run_atom::value, std::move(step)));
    AF_RETURN_IF_ERROR(outcome.outcome);
    *execution_ns = outcome.execution_ns;
    std::vector<tensor> out(fetches.size());
    for (std::size_t k = 0; k < plan->devices.size(); ++k) {
      auto& d = plan->devices[k];
      auto& fetched = outcome.fetched[k];
      for (std::size_t j = 0; j < d.fetches.size() && j < fetched.size(); ++j)
        out[d.fetches[j].first] = fetched[j];
    }
    return out;
  }

  caf::actor_system& system;
  graph& g;
  session_options options;
  std::vector<std::pair<device_name, caf::actor>> devices;
  /// Device actors this session spawned (local sessions) and stops when it ends.
  std::vector<caf::actor> owned_devices;
  /// Task services of an in-process cluster, stopped when the session ends.
  std::vector<caf::actor> owned_tasks;
  caf::actor coordinator;
  /// Why the session cannot run (a cluster task unreachable), or ok.
  status setup;
  std::int64_t id_base = 0;
  std::mutex mutex;
  std::map<std::string, run_plan> plans;
  std::vector<std::string> placement_log;
  std::int64_t next_handle = 0;
  std::int64_t next_step = 0;
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
  std::vector<std::string> out;
  for (auto& d : impl_->devices)
    out.push_back(d.first.to_string());
  return out;
}

} // namespace actorflow

#include "actors/server.hpp"
#include "actors/task_client.hpp"

#include "actors/master.hpp"
#include "actors/protocols/wire.hpp"
#include "actors/session.hpp"
#include "actors/session_actor.hpp"
#include "actors/session_master.hpp"
#include "actors/sigpipe.hpp"
#include "actors/task_service.hpp"
#include "actors/transport_security.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <atomic>
#include <chrono>

namespace actorflow {

struct server::impl {
  /// A system of the server's own, unless options.system named the host's.
  std::unique_ptr<caf::actor_system_config> config;
  std::unique_ptr<caf::actor_system> owned_system;
  caf::actor_system* sys = nullptr;
  protocol::task_actor task;
  protocol::master_actor master;
  std::string host;
  std::uint16_t port = 0;
  std::string name;
  /// The cluster, job and task index start() served (null for the others).
  std::shared_ptr<const cluster_spec> cluster;
  std::string job;
  int task_index = -1;
  /// The task's bulk endpoint as peers reach it (its device list says); empty without one.
  std::string bulk_address;
  std::mutex mutex;
  bool stopped = false;
  /// Set by join(): the task stopped because its workers went away (see ended_abandoned).
  std::atomic<bool> abandoned{false};
  /// Set by join(): why the served actor ended, when that was not a stop (its actors died).
  std::string failure;

  /// The published actor: the task service, or the bare master.
  caf::actor served() const {
    return task ? caf::actor_cast<caf::actor>(task) : caf::actor_cast<caf::actor>(master);
  }

  /// Sends the served actor a stop and waits (bounded) until it has gone.
  void stop_served() {
    caf::scoped_actor self{*sys};
    auto whom = served();
    self->monitor(whom);
    self->send(master, protocol::stop_atom::value);
    self->receive([](const caf::down_msg&) {},
                  caf::after(std::chrono::seconds(10)) >> [&] {
                    self->send_exit(whom, caf::exit_reason::kill);
                  });
  }
};

namespace {

/// A system for serving: actors here only dispatch (kernels run on the task's own pools), so
/// one scheduler thread is enough and keeps message hops from contending for the cores the
/// kernels use (the classic example's step rate on 4 processes rose from 899-936 to 1058-1064
/// steps/s).
std::unique_ptr<caf::actor_system_config> serving_config() { return network_config(1, true); }

/// Prepares the system the server runs in: the host's (checked) or its own.
status prepare_system(server::impl& state, const server_options& options) {
  if (options.system != nullptr || options.in_default_system) {
    auto& sys = options.system != nullptr ? *options.system : default_actor_system();
    AF_RETURN_IF_ERROR(check_network_system(sys, "a server"));
    state.sys = &sys;
    return {};
  }
  AF_RETURN_IF_ERROR(process_transport_security_usable().with_context("a server"));
  state.config = serving_config();
  // Its threads keep SIGPIPE blocked (see default_actor_system).
  sigpipe_blocked during_start;
  state.owned_system = std::make_unique<caf::actor_system>(*state.config);
  state.sys = state.owned_system.get();
  return {};
}

} // namespace

server::server(std::unique_ptr<impl> state)
  : impl_(std::move(state)), host_(impl_->host), port_(impl_->port), name_(impl_->name),
    bulk_address_(impl_->bulk_address) {}

server::~server() {
  stop();
}

result<std::unique_ptr<server>> server::launch(std::unique_ptr<impl> state) {
  // Published with its typed interface: clients and masters check it when they connect.
  auto* host = state->host == "0.0.0.0" ? nullptr : state->host.c_str();
  auto& mm = state->sys->middleman();
  auto published = state->task ? mm.publish(state->task, state->port, host, true)
                               : mm.publish(state->master, state->port, host, true);
  if (!published) {
    state->stop_served();
    return make_error(errc::unavailable, "cannot listen on " + state->host + ":" +
                                           std::to_string(state->port) + " for " + state->name +
                                           ": " + state->sys->render(published.error()));
  }
  state->port = *published;
  if (state->task) {
    // The endpoint's address, for the server's start line (and a Service's port list).
    caf::scoped_actor self{*state->sys};
    self->request(state->task, std::chrono::seconds(10), protocol::devices_atom::value)
      .receive([&](protocol::device_list& listed) { state->bulk_address = listed.bulk_address; },
               [](caf::error&) {});
  }
  return std::unique_ptr<server>{new server{std::move(state)}};
}

result<std::unique_ptr<server>> server::start(std::shared_ptr<const cluster_spec> cluster,
                                              const std::string& job, int task,
                                              server_options options) {
  if (!cluster)
    return make_error(errc::invalid_argument, "a server needs a cluster spec");
  auto name = task_name(job, task);
  if (!cluster->has_job(job))
    return make_error(errc::not_found, "job '" + job + "' is not in the cluster spec");
  auto address = cluster->address(job, task);
  if (!address)
    return make_error(errc::not_found, "task " + name + " is not in the cluster spec (job '" +
                                         job + "' has " +
                                         std::to_string(cluster->num_tasks(job)) + " tasks)");
  auto split = parse_host_port(*address);
  if (!split)
    return split.error();
  // Two tasks at one address (localhost and 127.0.0.1) would talk to themselves and hang.
  AF_RETURN_IF_ERROR(check_distinct_addresses(*cluster));
  auto state = std::make_unique<impl>();
  AF_RETURN_IF_ERROR(prepare_system(*state, options));
  state->name = name;
  state->cluster = cluster;
  state->job = job;
  state->task_index = task;
  state->host = options.bind_host.empty() ? split->host : options.bind_host;
  state->port = split->port;
  task_service_options task_options;
  task_options.cpu_device_count = options.cpu_device_count;
  task_options.threads = options.threads;
  task_options.cluster = cluster;
  task_options.master_timeout_seconds = options.timeout_seconds;
  task_options.master_connect_timeout_seconds = options.connect_timeout_seconds;
  task_options.master_device_filters = options.device_filters;
  task_options.abandoned_grace_seconds = options.abandoned_grace_seconds;
  task_options.env = options.env;
  if (options.bulk_channel) {
    task_options.bulk_host = split->host;
    task_options.bulk_bind_host = options.bind_host;
    task_options.bulk_port = options.bulk_port;
  }
  state->task = spawn_task_service(*state->sys, job, task, std::move(task_options));
  state->master = state->task;
  return launch(std::move(state));
}

result<std::unique_ptr<server>> server::create_local_server(server_options options) {
  auto state = std::make_unique<impl>();
  AF_RETURN_IF_ERROR(prepare_system(*state, options));
  state->name = "/job:localhost/replica:0/task:0";
  state->host = options.bind_host.empty() ? std::string{"127.0.0.1"} : options.bind_host;
  state->port = options.port;
  task_service_options task_options;
  task_options.cpu_device_count = options.cpu_device_count;
  task_options.threads = options.threads;
  task_options.master_timeout_seconds = options.timeout_seconds;
  task_options.env = options.env;
  state->task = spawn_task_service(*state->sys, "localhost", 0, std::move(task_options));
  state->master = state->task;
  return launch(std::move(state));
}

result<std::unique_ptr<server>> server::start_master(std::shared_ptr<const cluster_spec> cluster,
                                                     server_options options) {
  if (!cluster)
    return make_error(errc::invalid_argument, "a master server needs a cluster spec");
  AF_RETURN_IF_ERROR(check_distinct_addresses(*cluster));
  auto state = std::make_unique<impl>();
  AF_RETURN_IF_ERROR(prepare_system(*state, options));
  state->name = "master";
  state->host = options.bind_host.empty() ? std::string{"127.0.0.1"} : options.bind_host;
  state->port = options.port;
  master_options master;
  master.cluster = std::move(cluster);
  master.timeout_seconds = options.timeout_seconds;
  master.connect_timeout_seconds = options.connect_timeout_seconds;
  state->master = spawn_master(*state->sys, std::move(master));
  return launch(std::move(state));
}

std::string server::target() const {
  auto host = host_ == "0.0.0.0" ? std::string{"127.0.0.1"} : host_;
  if (host.find(':') != std::string::npos)
    host = "[" + host + "]";
  return "caf://" + host + ":" + std::to_string(port_);
}

protocol::master_actor server::master() const { return impl_->master; }

protocol::task_actor server::task() const { return impl_->task; }

std::shared_ptr<const master_ref> server::local_master() const {
  return existing_master(impl_->master);
}

caf::actor_system& server::system() { return *impl_->sys; }

status server::report_joined(const std::string& to_job, double timeout_seconds) {
  if (!impl_->cluster)
    return make_error(errc::failed_precondition, name_ + " is not a task of a cluster");
  return report_task_joined(*impl_->sys, *impl_->cluster, to_job, impl_->job, impl_->task_index,
                            impl_->task, timeout_seconds);
}

status server::report_done(const std::string& to_job, double timeout_seconds) {
  if (!impl_->cluster)
    return make_error(errc::failed_precondition, name_ + " is not a task of a cluster");
  return report_task_done(*impl_->sys, *impl_->cluster, to_job, impl_->job, impl_->task_index,
                          timeout_seconds);
}

void server::join() {
  caf::scoped_actor self{*impl_->sys};
  self->monitor(impl_->served());
  self->receive([&](const caf::down_msg& down) {
    if (ended_abandoned(down.reason)) {
      impl_->abandoned = true;
    } else if (down.reason && down.reason != caf::exit_reason::user_shutdown) {
      std::lock_guard<std::mutex> guard{impl_->mutex};
      impl_->failure = impl_->sys->render(down.reason);
    }
  });
}

bool server::abandoned() const { return impl_->abandoned.load(); }

std::string server::failure() const {
  std::lock_guard<std::mutex> guard{impl_->mutex};
  return impl_->failure;
}

void server::stop() {
  {
    std::lock_guard<std::mutex> guard{impl_->mutex};
    if (impl_->stopped)
      return;
    impl_->stopped = true;
  }
  static_cast<void>(impl_->sys->middleman().unpublish(impl_->served(), impl_->port));
  impl_->stop_served();
}

} // namespace actorflow

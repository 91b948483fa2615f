// actorflow-worker: runs one task of a cluster. It creates the task's devices as actors,
// publishes its task service (actors/protocols/task.hpp) through CAF's middleman on the task's
// address in the cluster spec, prints "actorflow-worker: /job:J/replica:0/task:N serving on
// HOST:PORT" once it listens, and runs until SIGINT or SIGTERM, then stops cleanly (exit 0).
// Exit codes: 2 for bad flags or an unusable spec, 1 for runtime failures (port in use, ...).
#include "actors/cluster_spec.hpp"
#include "actors/protocols/task.hpp"
#include "actors/protocols/wire.hpp"
#include "actors/task_service.hpp"
#include "support/flags.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <string>

using namespace actorflow;

namespace {

constexpr const char* usage_text = R"(usage: actorflow-worker --cluster SPEC --job NAME --task N [options]
Runs one task of an actorflow cluster: its devices as actors, published on the task's address.
Stops cleanly on SIGINT or SIGTERM.

  --cluster SPEC     the cluster: a JSON file, JSON text ({"ps": ["host:port"], ...}) or the
                     inline form ps=host:port;worker=host:port,host:port. Without it, the
                     TF_CONFIG environment variable gives the cluster and (unless --job and
                     --task say otherwise) this task
  --job NAME         this task's job in the cluster
  --task N           this task's index in its job (default 0)
  --threads N        threads of the task's inter-op and intra-op pools; 0 = one per core
                     (default 0)
  --cpu-devices N    number of CPU devices (default 1)
  --help             this text
)";

struct worker_options {
  std::optional<std::string> cluster;
  std::optional<std::string> job;
  std::optional<int> task;
  int threads = 0;
  int cpu_devices = 1;
  bool help = false;
};

/// A failure with the exit code it leads to.
struct failure {
  int exit_code = 2;
  std::string message;
};

int fail(const failure& f) {
  std::cerr << "actorflow-worker: " << f.message << std::endl;
  return f.exit_code;
}

std::optional<failure> parse_flags(int argc, char** argv, worker_options& o) {
  int task = 0;
  bool task_given = false;
  apps::flag_set flags;
  flags.values = {
    {"--cluster", [&](const std::string& v) { o.cluster = v; return status{}; }},
    {"--job", [&](const std::string& v) { o.job = v; return status{}; }},
    {"--task",
     [&](const std::string& v) {
       task_given = true;
       return apps::parse_int_flag("--task", v, 0, task);
     }},
    {"--threads", [&](const std::string& v) { return apps::parse_int_flag("--threads", v, 0, o.threads); }},
    {"--cpu-devices",
     [&](const std::string& v) { return apps::parse_int_flag("--cpu-devices", v, 1, o.cpu_devices); }},
  };
  flags.switches = {{"--help", &o.help}, {"-h", &o.help}};
  if (auto s = apps::parse_flags(argc, argv, flags); !s.ok())
    return failure{2, s.message()};
  if (task_given)
    o.task = task;
  return std::nullopt;
}

/// Which task this process is, in which cluster.
struct task_identity {
  cluster_spec cluster;
  std::string job;
  int task = 0;
  std::string address;
  std::string host;
  std::uint16_t port = 0;
};

std::optional<failure> resolve_task(const worker_options& o, task_identity& id) {
  if (o.cluster) {
    auto spec = cluster_spec::parse(*o.cluster);
    if (!spec)
      return failure{2, "invalid --cluster: " + spec.error().message()};
    id.cluster = std::move(*spec);
    if (!o.job)
      return failure{2, "--job is required with --cluster (see --help)"};
    id.job = *o.job;
    id.task = o.task.value_or(0);
  } else {
    auto config = tf_config_from_environment();
    if (!config) {
      if (config.error().code() == errc::not_found)
        return failure{2, "--cluster is required when TF_CONFIG is not set (see --help)"};
      return failure{2, config.error().message()};
    }
    id.cluster = config->cluster;
    id.job = o.job.value_or(config->job);
    id.task = o.task.value_or(o.job ? 0 : config->task_index);
  }
  if (!id.cluster.has_job(id.job)) {
    std::string jobs;
    for (auto& job : id.cluster.jobs())
      jobs += (jobs.empty() ? "'" : ", '") + job + "'";
    return failure{2, "job '" + id.job + "' is not in the cluster spec (its jobs: " + jobs + ")"};
  }
  auto address = id.cluster.address(id.job, id.task);
  if (!address)
    return failure{2, "task " + std::to_string(id.task) + " of job '" + id.job +
                        "' is not in the cluster spec (it has " +
                        std::to_string(id.cluster.num_tasks(id.job)) + " tasks)"};
  id.address = *address;
  // cluster_spec validated "host:port" with a port from 1 to 65535.
  auto colon = id.address.rfind(':');
  id.host = id.address.substr(0, colon);
  id.port = static_cast<std::uint16_t>(std::stoi(id.address.substr(colon + 1)));
  return std::nullopt;
}

std::string task_prefix(const task_identity& id) {
  return "/job:" + id.job + "/replica:0/task:" + std::to_string(id.task);
}

/// Stops the task service and waits (bounded) until it and its devices have gone.
void stop_task(caf::actor_system& sys, const caf::actor& task) {
  caf::scoped_actor self{sys};
  self->monitor(task);
  self->send(task, protocol::stop_atom::value);
  self->receive([](const caf::down_msg&) {},
                caf::after(std::chrono::seconds(10)) >> [] {
                  std::cerr << "actorflow-worker: the task service did not stop within 10 s; "
                               "killing it"
                            << std::endl;
                });
  self->send_exit(task, caf::exit_reason::kill);
}

int serve(const task_identity& id, const worker_options& o, const sigset_t& stop_signals) {
  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  add_actorflow_message_types(cfg);
  // A shared queue: idle scheduler threads sleep instead of polling (see actors/session.cpp).
  cfg.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system sys{cfg};

  task_service_options options;
  options.cpu_device_count = o.cpu_devices;
  options.threads = o.threads;
  auto task = spawn_task_service(sys, id.job, id.task, options);

  auto published = sys.middleman().publish(task, id.port, id.host.c_str(), true);
  if (!published) {
    stop_task(sys, task);
    return fail({1, "cannot listen on " + id.address + " for " + task_prefix(id) + ": " +
                      sys.render(published.error())});
  }
  std::cout << "actorflow-worker: " << task_prefix(id) << " serving on " << id.host << ':'
            << *published << std::endl;

  // SIGINT and SIGTERM are blocked in every thread (the mask was set before any thread
  // started), so they stay pending until this thread takes one.
  int received = 0;
  while (sigwait(&stop_signals, &received) != 0) {
  }
  std::cerr << "actorflow-worker: " << task_prefix(id) << " stopping on signal " << received
            << std::endl;
  sys.middleman().unpublish(task, *published);
  stop_task(sys, task);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  worker_options o;
  if (auto bad = parse_flags(argc, argv, o))
    return fail(*bad);
  if (o.help) {
    std::cout << usage_text;
    return 0;
  }
  task_identity id;
  if (auto bad = resolve_task(o, id))
    return fail(*bad);

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  if (pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr) != 0)
    return fail({1, "cannot block SIGINT and SIGTERM"});
  // A peer that goes away must not kill us with SIGPIPE; CAF sees the EPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  return serve(id, o, stop_signals);
}

// actorflow-worker: runs one task of a cluster. It creates the task's devices as actors,
// publishes its task service (actors/protocols/task.hpp) through CAF's middleman on the task's
// address in the cluster spec, prints "actorflow-worker: /job:J/replica:0/task:N serving on
// HOST:PORT" once it listens, and runs until SIGINT or SIGTERM, then stops cleanly (exit 0).
// Every task also serves the master protocol (actors/master.hpp), so clients may open sessions
// on any task; --master is still accepted and changes nothing. A thin wrapper over
// actors/server.hpp.
// Exit codes: 2 for bad flags or an unusable spec, 1 for runtime failures (port in use, ...),
// 3 for a ps whose between-graph workers all went away without finishing (--worker-grace), 4
// when the task's actors died (killed or crashed) rather than stopped: restart it.
#include "actors/cluster_spec.hpp"
#include "actors/server.hpp"
#include "support/flags.hpp"
#include "support/metrics_http.hpp"
#include "support/security_flags.hpp"
#include "support/server.hpp"


#include <iostream>
#include <memory>
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
  --bind HOST        address to listen on, e.g. 0.0.0.0 in a pod whose address in the spec
                     is a Service name (default: the host of the task's address); peers still
                     use the spec's address
  --bulk-port N      port of the task's second listener, for large tensors (64 KiB and up)
                     between tasks; a Service or firewall must let it through as well as the
                     task's port (default 0: a free port, printed on start)
  --metrics-port N   serve Prometheus metrics at http://HOST:N/metrics (HOST: --bind, else
                     the host of the task's address): device steps and their latency, bytes
                     per peer and channel, shard updates, stale gradients, allocator bytes,
                     open sessions (default 0: none). With a cluster token a scrape presents
                     "Authorization: Bearer TOKEN"; with TLS it is HTTPS, and the scraper
                     presents a certificate of the cluster CA
  --worker-grace S   a ps whose between-graph workers all went away without finishing stops
                     S seconds after the last one, with exit code 3 (default 60; 0: never)
  --master           accepted for old scripts: every task serves as a master, clients open
                     sessions on any task with --target caf://HOST:PORT (its address)
  --help             this text
)";

struct worker_options {
  apps::security_flags security;
  std::optional<std::string> cluster;
  std::optional<std::string> job;
  std::optional<int> task;
  int threads = 0;
  int cpu_devices = 1;
  std::string bind;
  int bulk_port = 0;
  int worker_grace = 60;
  int metrics_port = 0;
  int connect_timeout = 60;
  bool master = false;
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
    {"--threads", [&](const std::string& v) { return apps::parse_int_flag("--threads", v, 0, o.threads, apps::max_threads_flag); }},
    {"--bind", [&](const std::string& v) { o.bind = v; return status{}; }},
    {"--bulk-port", [&](const std::string& v) { return apps::parse_int_flag("--bulk-port", v, 0, o.bulk_port, 65535); }},
    {"--worker-grace",
     [&](const std::string& v) { return apps::parse_int_flag("--worker-grace", v, 0, o.worker_grace); }},
    {"--cpu-devices",
     [&](const std::string& v) { return apps::parse_int_flag("--cpu-devices", v, 1, o.cpu_devices, apps::max_cpu_devices_flag); }},
  };
  apps::add_security_flags(flags, o.security);
  apps::add_metrics_port_flag(flags, o.metrics_port);
  apps::add_connect_timeout_flag(flags, o.connect_timeout);
  flags.switches = {{"--master", &o.master}, {"--help", &o.help}, {"-h", &o.help}};
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
  // server::start checks this too; here it is a bad spec (exit 2), not a failure to serve.
  if (auto distinct = check_distinct_addresses(id.cluster); !distinct.ok())
    return failure{2, distinct.message()};
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
  auto split = parse_host_port(id.address);
  if (!split)
    return failure{2, split.error().message()};
  id.host = split->host;
  id.port = split->port;
  return std::nullopt;
}

std::string task_prefix(const task_identity& id) {
  return task_name(id.job, id.task);
}

} // namespace

int run(int argc, char** argv) {
  worker_options o;
  if (auto bad = parse_flags(argc, argv, o))
    return fail(*bad);
  if (o.help) {
    std::cout << usage_text << apps::connect_timeout_help << apps::security_flags_help;
    return 0;
  }
  if (auto s = apps::apply_security_flags(o.security); !s.ok())
    return fail({2, s.message()});
  task_identity id;
  if (auto bad = resolve_task(o, id))
    return fail(*bad);

  if (!apps::catch_stop_signals())
    return fail({1, "cannot catch SIGINT and SIGTERM"});
  // Where the task listens, guarded as its other ports are.
  auto metrics_served = apps::serve_metrics("actorflow-worker", apps::metrics_host(o.bind, id.host),
                                            o.metrics_port, process_transport_security());
  if (!metrics_served)
    return fail({apps::metrics_exit_code(metrics_served.error()), metrics_served.error().message()});
  server_options options;
  options.cpu_device_count = o.cpu_devices;
  options.threads = o.threads;
  options.bind_host = o.bind;
  options.bulk_port = static_cast<std::uint16_t>(o.bulk_port);
  options.abandoned_grace_seconds = o.worker_grace;
  options.connect_timeout_seconds = o.connect_timeout;
  auto served = server::start(std::make_shared<const cluster_spec>(id.cluster), id.job, id.task,
                              options);
  if (!served)
    return fail({1, served.error().message()});
  return apps::serve_until_signal("actorflow-worker", **served);
}

int main(int argc, char** argv) { return apps::run_main("actorflow-worker", run, argc, argv); }

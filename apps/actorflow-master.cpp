// actorflow-master: the master service clients open sessions on (actors/master.hpp), published
// through CAF's middleman. With --cluster it places sessions over that cluster's tasks (reached
// lazily, so workers may start after it); without, it is a one-task local server (job
// "localhost") that runs sessions on its own devices, like TensorFlow's create_local_server().
// Prints "actorflow-master: ... serving on HOST:PORT" once it listens; SIGINT or SIGTERM stop it
// cleanly (exit 0). Exit codes: 2 for bad flags or an unusable spec, 1 when it cannot listen, 4
// when its actors died (killed or crashed) rather than stopped: restart it.
#include "actors/cluster_liveness.hpp"
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

constexpr const char* usage_text = R"(usage: actorflow-master [--port P] [--cluster SPEC] [options]
Serves the master that clients open sessions on (--target caf://HOST:P). Stops cleanly on
SIGINT or SIGTERM.

  --port P           port to listen on (default 0: a free port, printed on start)
  --host H           address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)
  --cluster SPEC     the cluster whose tasks (actorflow-worker) run the sessions: a JSON file,
                     JSON text or the inline form ps=host:port;worker=host:port,host:port.
                     Without it, this process is a one-task local server: job "localhost",
                     running sessions on its own CPU devices
  --threads N        local server only: threads of its pools; 0 = one per core (default 0)
  --cpu-devices N    local server only: number of CPU devices (default 1)
  --metrics-port N   serve Prometheus metrics at http://HOST:N/metrics (HOST: --host, else
                     127.0.0.1): open sessions, steps, bytes per peer and channel, and with
                     --cluster whether each task answers (default 0: none). With a cluster
                     token a scrape presents "Authorization: Bearer TOKEN"; with TLS it is
                     HTTPS, and the scraper presents a certificate of the cluster CA
  --help             this text
)";

struct master_flags {
  apps::security_flags security;
  std::optional<std::string> cluster;
  std::string host;
  int port = 0;
  int threads = 0;
  int cpu_devices = 1;
  int metrics_port = 0;
  int connect_timeout = 60;
  bool help = false;
};

int fail(const std::string& message, int code = 2) {
  std::cerr << "actorflow-master: " << message << std::endl;
  return code;
}

} // namespace

int run(int argc, char** argv) {
  master_flags o;
  apps::flag_set flags;
  flags.values = {
    {"--cluster", [&](const std::string& v) { o.cluster = v; return status{}; }},
    {"--host", [&](const std::string& v) { o.host = v; return status{}; }},
    {"--port", [&](const std::string& v) { return apps::parse_int_flag("--port", v, 0, o.port); }},
    {"--threads", [&](const std::string& v) { return apps::parse_int_flag("--threads", v, 0, o.threads, apps::max_threads_flag); }},
    {"--cpu-devices",
     [&](const std::string& v) { return apps::parse_int_flag("--cpu-devices", v, 1, o.cpu_devices, apps::max_cpu_devices_flag); }},
  };
  apps::add_security_flags(flags, o.security);
  apps::add_metrics_port_flag(flags, o.metrics_port);
  apps::add_connect_timeout_flag(flags, o.connect_timeout);
  flags.switches = {{"--help", &o.help}, {"-h", &o.help}};
  if (auto s = apps::parse_flags(argc, argv, flags); !s.ok())
    return fail(s.message());
  if (o.help) {
    std::cout << usage_text << apps::connect_timeout_help << apps::security_flags_help;
    return 0;
  }
  if (auto s = apps::apply_security_flags(o.security); !s.ok())
    return fail(s.message());
  if (o.port > 65535)
    return fail("--port: must be at most 65535, got " + std::to_string(o.port));
  std::shared_ptr<const cluster_spec> cluster;
  if (o.cluster) {
    auto spec = cluster_spec::parse(*o.cluster);
    if (!spec)
      return fail("invalid --cluster: " + spec.error().message());
    if (auto distinct = check_distinct_addresses(*spec); !distinct.ok())
      return fail("invalid --cluster: " + distinct.message());
    cluster = std::make_shared<const cluster_spec>(std::move(*spec));
  }

  if (!apps::catch_stop_signals())
    return fail("cannot catch SIGINT and SIGTERM", 1);
  server_options options;
  options.bind_host = o.host;
  options.port = static_cast<std::uint16_t>(o.port);
  options.threads = o.threads;
  options.cpu_device_count = o.cpu_devices;
  options.connect_timeout_seconds = o.connect_timeout;
  // Where the master listens, guarded as its own port is.
  auto metrics_served = apps::serve_metrics("actorflow-master", apps::metrics_host(o.host, ""),
                                            o.metrics_port, process_transport_security());
  if (!metrics_served)
    return fail(metrics_served.error().message(), apps::metrics_exit_code(metrics_served.error()));
  auto served = cluster ? server::start_master(cluster, options)
                        : server::create_local_server(options);
  if (!served)
    return fail(served.error().message(), 1);
  // With metrics served: whether each task of the cluster answers.
  std::unique_ptr<cluster_liveness> liveness;
  if (*metrics_served && cluster)
    liveness = std::make_unique<cluster_liveness>((*served)->system(), *cluster);
  return apps::serve_until_signal("actorflow-master", **served);
}

int main(int argc, char** argv) { return apps::run_main("actorflow-master", run, argc, argv); }

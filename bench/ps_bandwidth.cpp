// Parameter pull and push bandwidth between a worker and a ps over loopback: a 64 MiB float32
// variable on /job:ps/task:0, two actorflow-worker processes (ps, worker) and this process the
// client of a session over the cluster.
//   pull: /job:worker/task:0 reads the variable (Identity on the worker) and reduces it to a
//         scalar, so 64 MiB cross ps -> worker and only the scalar returns to the client.
//   push: a 64 MiB Fill on the worker is assign_add'ed into the variable on the ps, so 64 MiB
//         cross worker -> ps (the client fetches nothing).
// MB/s = 64 MiB / seconds per step (1 MB = 1e6 bytes), beside raw TCP bandwidth on loopback
// measured in the same run (one thread sends 64 MiB N times with large write() calls to another
// reading on 127.0.0.1). Each step's time includes the Fill/Reduce/AssignAdd compute and the
// step's control messages, so the figure is a lower bound on the transfer rate.
// Extra figures: the same computations run entirely on the ps (no tensor crosses processes;
// ms per step), and a transfer-only estimate: 64 MiB / (step - compute-only step).
// The 64 MiB cross on the bulk channel (actors/bulk_channel.hpp); to measure CAF's path instead,
// run with ACTORFLOW_BULK_MIN_BYTES=1000000000000 (the worker processes inherit it).
// Then the same again with mutual TLS (a child run of this program with --tls: certificates
// from deploy/tls/make-cluster-certs.sh, the _tls figures), where the tensors take the bulk
// channel's TLS connections; that run also measures raw TLS (the bulk channel's OpenSSL code
// between two threads, nothing else), the most TLS gives here. Each run measures raw TCP itself.
#include "support/processes.hpp"
#include "bench_util.hpp"
#include "raw_loopback.hpp"

#include "actors/bulk_channel.hpp"
#include "actors/bulk_socket.hpp"
#include "actors/cluster_spec.hpp"
#include "actors/session.hpp"
#include "actors/transport_security.hpp"
#include "graph/ops.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <cstdio>
#include <memory>
#include <optional>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace actorflow;

namespace {

constexpr std::int64_t elements = 16 * 1024 * 1024; // 64 MiB of float32
constexpr double bytes = 4.0 * elements;
constexpr int warmup_steps = 2;
constexpr int timed_steps = 15;
constexpr int raw_rounds = 16;

double mb_per_s(double seconds_per_transfer) { return bytes / seconds_per_transfer / 1e6; }

double raw_loopback_mbps(const transport_security* server = nullptr,
                         const transport_security* client = nullptr) {
  return bench::raw_loopback_mbps(static_cast<std::size_t>(bytes), raw_rounds, server, client);
}

result<double> seconds_per_step(session& s, const std::vector<output>& fetches,
                                const std::vector<output>& targets, const char* label) {
  for (int i = 0; i < warmup_steps; ++i) {
    auto r = s.run(fetches, {}, targets);
    if (!r)
      return r.error();
  }
  std::vector<double> times;
  for (int i = 0; i < timed_steps; ++i) {
    status failure;
    times.push_back(bench::time_seconds([&] {
      auto r = s.run(fetches, {}, targets);
      if (!r)
        failure = r.error();
    }));
    AF_RETURN_IF_ERROR(failure);
  }
  std::fprintf(stderr, "%s: median %.1f ms per step (min %.1f ms)\n", label,
               1e3 * bench::median(times), 1e3 * *std::min_element(times.begin(), times.end()));
  return bench::median(times);
}

/// The --tls run, as a child of the plain one: its figures go to this run's stdout.
int run_tls_child(const char* self) {
  actorflow::testing::child_process child{self, {"--tls"}, false};
  for (;;) {
    auto line = child.wait_for_line("", std::chrono::minutes(10));
    if (!line)
      break;
    std::printf("%s\n", line->c_str());
    std::fflush(stdout);
  }
  return child.wait_exit(std::chrono::seconds(30));
}

} // namespace

int main(int argc, char** argv) {
  bool tls = argc > 1 && std::string{argv[1]} == "--tls";
  const char* suffix = tls ? "_tls" : "";
  actorflow::testing::cluster_processes::task_args tls_flags;
  struct removed_at_exit {
    std::string path;
    ~removed_at_exit() {
      if (!path.empty())
        std::filesystem::remove_all(path);
    }
  } certificates;
  if (tls) {
    char made[] = "/tmp/actorflow-bench-certs-XXXXXX";
    if (::mkdtemp(made) == nullptr) {
      std::fprintf(stderr, "error: cannot make a directory for certificates\n");
      return 1;
    }
    certificates.path = made;
    auto dir = certificates.path;
    actorflow::testing::child_process script{ACTORFLOW_BENCH_SOURCE_DIR "/../deploy/tls/make-cluster-certs.sh",
                                             {dir, "ps0", "worker0", "client"}};
    if (script.wait_exit(std::chrono::seconds(60)) != 0) {
      std::fprintf(stderr, "error: cannot make certificates\n");
      return 1;
    }
    transport_security security;
    security.tls_certificate = dir + "/client.pem";
    security.tls_key = dir + "/client.key";
    security.tls_ca = dir + "/ca.pem";
    if (auto st = set_process_transport_security(security); !st.ok()) {
      std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
      return 1;
    }
    tls_flags = [dir](const std::string& job, int task) {
      auto name = dir + "/" + job + std::to_string(task);
      return std::vector<std::string>{"--tls-cert", name + ".pem", "--tls-key", name + ".key",
                                      "--tls-ca", dir + "/ca.pem"};
    };
  }
  double raw = raw_loopback_mbps();
  std::fprintf(stderr, "raw loopback TCP: %.0f MB/s\n", raw);
  double raw_tls = 0;
  if (tls) {
    transport_security server = process_transport_security(), client = server;
    server.tls_certificate = certificates.path + "/ps0.pem";
    server.tls_key = certificates.path + "/ps0.key";
    raw_tls = raw_loopback_mbps(&server, &client);
    std::fprintf(stderr, "raw loopback TLS (the bulk channel's OpenSSL code alone): %.0f MB/s\n",
                 raw_tls);
    std::fprintf(stderr, "mutual TLS: tensors cross on the bulk channel's TLS connections\n");
  } else
    std::fprintf(stderr, "tensors of at least %zu bytes cross on the bulk channel\n",
                 bulk_min_bytes());

  actorflow::testing::cluster_processes cluster{ACTORFLOW_WORKER_BINARY, {{"ps", 1}, {"worker", 1}},
                                                1, tls_flags};
  if (!cluster.ready())
    return 1;
  auto spec = cluster_spec::parse(cluster.spec_json());
  if (!spec) {
    std::fprintf(stderr, "error: %s\n", spec.error().to_string().c_str());
    return 1;
  }
  graph g;
  actorflow::variable v;
  {
    auto d = g.device("/job:ps/task:0");
    v = ops::variable(g, ops::zeros(g, {elements}), "params");
  }
  output pulled, update;
  {
    auto d = g.device("/job:worker/task:0");
    pulled = ops::reduce_sum(ops::identity(v.read));
    update = ops::fill(g, {elements}, ops::constant(g, 1.f));
  }
  // Colocated with the variable on the ps (outside the worker's device scope, which would
  // conflict with the colocation); its 64 MiB input crosses worker -> ps.
  auto pushed = ops::assign_add(v, update);
  // The same work without the transfer: everything on the ps. The local push adds zeros so the
  // sanity check below still counts only the real pushes.
  output pulled_locally, update_locally;
  {
    auto d = g.device("/job:ps/task:0");
    pulled_locally = ops::reduce_sum(ops::identity(v.read));
    update_locally = ops::fill(g, {elements}, ops::constant(g, 0.f));
  }
  auto pushed_locally = ops::assign_add(v, update_locally);
  if (!g.status().ok()) {
    std::fprintf(stderr, "error: %s\n", g.status().to_string().c_str());
    return 1;
  }
  session_options options;
  options.cluster = std::make_shared<cluster_spec>(*spec);
  options.timeout_seconds = 60;
  session s{g, options};
  if (auto st = s.run_targets({ops::global_variables_initializer(g)}); !st.ok()) {
    std::fprintf(stderr, "error: init: %s\n", st.to_string().c_str());
    return 1;
  }
  auto pull = seconds_per_step(s, {pulled}, {}, "pull");
  if (!pull) {
    std::fprintf(stderr, "error: pull: %s\n", pull.error().to_string().c_str());
    return 1;
  }
  auto push = seconds_per_step(s, {}, {pushed}, "push");
  if (!push) {
    std::fprintf(stderr, "error: push: %s\n", push.error().to_string().c_str());
    return 1;
  }
  auto pull_compute = seconds_per_step(s, {pulled_locally}, {}, "pull compute only (on the ps)");
  auto push_compute = seconds_per_step(s, {}, {pushed_locally}, "push compute only (on the ps)");
  if (!pull_compute || !push_compute) {
    std::fprintf(stderr, "error: compute-only steps: %s\n",
                 (!pull_compute ? pull_compute.error() : push_compute.error()).to_string().c_str());
    return 1;
  }
  // Sanity: after the pushes every element is warmup + timed steps.
  if (auto r = s.run({ops::reduce_sum(v.read)}); r) {
    double expected = double(elements) * (warmup_steps + timed_steps);
    double got = r->at(0).scalar_value<double>();
    if (std::abs(got - expected) > 1e-3 * expected)
      std::fprintf(stderr, "warning: the variable sums to %g, expected %g\n", got, expected);
  }

  auto emit = [&](const std::string& base, double seconds, const char* what) {
    bench::figure f{base + suffix, mb_per_s(seconds), "MB/s"};
    if (raw > 0) {
      f.baseline = raw;
      f.ratio = f.value / raw;
    }
    f.note = std::string("64 MiB float32 variable, ") + what + " over loopback" +
             (tls ? " with mutual TLS" : "") + "; baseline: raw TCP";
    bench::emit(f);
  };
  emit("ps_pull_MBps", *pull, "ps -> worker");
  emit("ps_push_MBps", *push, "worker -> ps");
  auto emit_compute = [&](const std::string& base, double seconds, const char* what) {
    bench::emit({base + suffix, 1e3 * seconds, "ms", std::nullopt, std::nullopt,
                 std::string("the ") + what + " step's compute alone, all on the ps (no transfer)"});
  };
  emit_compute("ps_pull_compute_only_ms", *pull_compute, "pull");
  emit_compute("ps_push_compute_only_ms", *push_compute, "push");
  // Transfer-only estimate: what the step costs beyond its compute (an estimate: on two
  // processes the compute of one side may overlap the other's work).
  emit("ps_pull_transfer_estimate_MBps", std::max(1e-9, *pull - *pull_compute),
       "ps -> worker, step time minus compute-only time");
  emit("ps_push_transfer_estimate_MBps", std::max(1e-9, *push - *push_compute),
       "worker -> ps, step time minus compute-only time");
  if (tls && raw_tls > 0) {
    bench::emit({"raw_loopback_tls_MBps", raw_tls, "MB/s", raw, raw_tls / raw,
                 "64 MiB through the bulk channel's TLS code alone (AES-128-GCM, OpenSSL), one "
                 "connection; baseline: raw TCP"});
    auto against_tls = [&](const std::string& name, double seconds, const char* what) {
      bench::emit({name, mb_per_s(seconds), "MB/s", raw_tls, mb_per_s(seconds) / raw_tls,
                   std::string("64 MiB float32 variable, ") + what +
                     " with mutual TLS, whole step; baseline: raw loopback TLS, same run"});
    };
    against_tls("ps_pull_MBps_tls_vs_raw_tls", *pull, "ps -> worker");
    against_tls("ps_push_MBps_tls_vs_raw_tls", *push, "worker -> ps");
  }
  return tls ? 0 : run_tls_child(argv[0]);
}

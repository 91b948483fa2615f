// 32 tasks as real processes on loopback (issue 31): 4 ps (actorflow-worker) and 28 between-graph
// workers (actorflow-train), one thread each, the MLP on the first 1792 training examples of
// Fashion-MNIST (each worker loads the set: the whole one would be 28 x 190 MB). Baselines: a
// lone task, or the same ps with 2 workers (what grows with the workers):
//   idle_task_rss_mib: the largest VmRSS of the 32 tasks of an idle cluster (actorflow-worker,
//     all serving, no session); baseline: a lone task of the same job;
//   cluster_ready_seconds_32_tasks: from the last process start to the last worker's
//     "training on" line, i.e. every worker has its session: it reached every ps and is past
//     the wait for the chief's initialisation (what a user waits for);
//   training_{worker,ps}_rss_mib_32_tasks: the largest VmRSS seen while the 32 train;
//   task_open_fds_32_tasks: a training worker's most open fds, with the tasks it is connected
//     to (from /proc/net/tcp); ps_open_fds_32_tasks the same for a ps;
//   between_graph_run_seconds_32_tasks: last start to the last process's exit, every one by
//     itself with exit code 0 (otherwise the benchmark fails).
// Arguments: ps tasks and workers (default 4 28).
#include "support/cluster_scale.hpp"
#include "bench_util.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using actorflow::testing::cluster_processes;
using actorflow::testing::open_fd_count;

namespace {

constexpr double mib = 1024.0 * 1024.0;

struct idle_task {
  double rss_mib = 0;
  int fds = 0;
  int connections = 0;
};

/// Every task of an idle cluster of actorflow-worker tasks (`jobs`), a second after the last
/// serves: RSS, open fds and TCP connections; the seconds until all served. Empty on failure.
std::vector<idle_task> idle_cluster(const std::vector<std::pair<std::string, int>>& jobs,
                                    double& serving_seconds) {
  auto started = std::chrono::steady_clock::now();
  cluster_processes cluster{ACTORFLOW_WORKER_BINARY, jobs};
  if (!cluster.ready())
    return {};
  serving_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // Whatever a task does once serving (connecting to peers, say) has had time to happen.
  std::this_thread::sleep_for(1s);
  std::size_t count = 0;
  for (auto& [job, n] : jobs)
    count += static_cast<std::size_t>(n);
  std::vector<pid_t> pids;
  for (std::size_t i = 0; i < count; ++i)
    pids.push_back(cluster.task(i).pid());
  auto peers = actorflow::testing::tcp_peers(pids);
  std::vector<idle_task> tasks;
  for (std::size_t i = 0; i < count; ++i) {
    idle_task t{cluster.task(i).resident_bytes() / mib, open_fd_count(pids[i]), 0};
    for (auto [peer, n] : peers[i])
      t.connections += n;
    tasks.push_back(t);
  }
  if (!cluster.stop())
    return {};
  return tasks;
}

/// printf's `pattern` with `values` (numbers, shown as doubles).
template <class... Values>
std::string format(const char* pattern, Values... values) {
  char text[512];
  std::snprintf(text, sizeof text, pattern, static_cast<double>(values)...);
  return text;
}

/// The maxima over a between-graph run's ps tasks and workers.
struct role_maxima {
  double rss_mib = 0;
  int fds = 0;
  int peers = 0;        // tasks it held TCP connections with
  int connections = 0;  // TCP connections
  int worker_links = 0; // for workers: connections to other workers (none expected)
  int threads = 0;
  double ready_seconds = 0;
};

std::pair<role_maxima, role_maxima> maxima(const actorflow::testing::cluster_run& run, int ps) {
  role_maxima ps_tasks, workers;
  for (auto& t : run.tasks) {
    auto& m = t.is_ps ? ps_tasks : workers;
    int connections = 0;
    for (auto [peer, count] : t.peers) {
      // -1: a far end already closed (a worker that has finished), or not of this cluster.
      if (peer < 0)
        continue;
      connections += count;
      if (!t.is_ps && peer >= ps)
        m.worker_links += count;
    }
    m.rss_mib = std::max(m.rss_mib, t.max_rss_bytes / mib);
    m.fds = std::max(m.fds, t.max_fds);
    m.peers = std::max(m.peers, static_cast<int>(t.peers.size() - t.peers.count(-1)));
    m.threads = std::max(m.threads, t.max_threads);
    m.connections = std::max(m.connections, connections);
    m.ready_seconds = std::max(m.ready_seconds, t.ready_seconds);
  }
  return {ps_tasks, workers};
}

/// A between-graph run of `ps` and `workers` on the data in `data_dir`; nothing, having said why,
/// when a process failed or a worker never got ready.
std::optional<actorflow::testing::cluster_run> between_graph(int ps, int workers, int epochs,
                                                             const std::string& data_dir) {
  // Batch 16 of the 1792 examples: 4 steps per epoch per worker with 28 workers. Learning rate
  // 0.01: at 0.1, 28 asynchronous workers' stale gradients drove the loss to NaN within 20 steps.
  std::vector<std::string> flags{"--epochs", std::to_string(epochs), "--batch-size", "16",
                                 "--learning-rate", "0.01", "--threads", "1", "--log-every",
                                 "100000", "--data-dir", data_dir, "--output-dir", data_dir + "/output"};
  auto run = actorflow::testing::run_between_graph_cluster(ACTORFLOW_TRAIN_BINARY,
                                                           ACTORFLOW_WORKER_BINARY, ps, workers,
                                                           flags, 300s);
  if (run.all_exited_zero && run.ready_seconds >= 0)
    return run;
  for (auto& t : run.tasks)
    if (t.exit_code != 0 || (!t.is_ps && t.ready_seconds < 0))
      std::fprintf(stderr, "error: %s: %s, ready after %.2f s: %s\n", t.name.c_str(),
                   t.ending.c_str(), t.ready_seconds, t.stderr_text.c_str());
  return std::nullopt;
}

} // namespace

int main(int argc, char** argv) {
  const int ps = bench::positive_arg(argc, argv, 1, 4);
  const int workers = bench::positive_arg(argc, argv, 2, 28);
  const int tasks = ps + workers;
  const std::string n = std::to_string(tasks);

  double ignored = 0, idle_serving = 0;
  auto lone_ps = idle_cluster({{"ps", 1}}, ignored);
  auto lone_worker = idle_cluster({{"worker", 1}}, ignored);
  auto idle = idle_cluster({{"ps", ps}, {"worker", workers}}, idle_serving);
  if (lone_ps.empty() || lone_worker.empty() || idle.empty()) {
    std::fprintf(stderr, "error: an idle cluster of actorflow-worker tasks did not serve or stop\n");
    return 1;
  }
  std::size_t largest = 0;
  for (std::size_t i = 0; i < idle.size(); ++i)
    if (idle[i].rss_mib > idle[largest].rss_mib)
      largest = i;
  const bool largest_is_ps = largest < static_cast<std::size_t>(ps);
  const auto& lone = largest_is_ps ? lone_ps[0] : lone_worker[0];
  int idle_connections = 0, idle_fds = 0;
  for (auto& t : idle) {
    idle_connections += t.connections;
    idle_fds = std::max(idle_fds, t.fds);
  }
  {
    bench::figure f{"idle_task_rss_mib", idle[largest].rss_mib, "MiB"};
    f.baseline = lone.rss_mib;
    f.ratio = f.value / lone.rss_mib;
    f.note = "the largest VmRSS of the " + n + " actorflow-worker tasks (" + std::to_string(ps) +
             " ps, " + std::to_string(workers) + " worker, --threads 1) of an idle cluster, 1 s " +
             format("after all served (%.2f s after the first start); it is a ", idle_serving) +
             (largest_is_ps ? "ps" : "worker") + "; baseline: a lone task of that job (lone ps " +
             format("%.1f MiB, lone worker %.1f MiB); the idle tasks hold %.0f TCP connections in "
                    "all and at most %.0f fds each",
                    lone_ps[0].rss_mib, lone_worker[0].rss_mib, idle_connections, idle_fds);
    bench::emit(f);
  }

  // The data set: each worker loads it whole (global order) and takes 1 in `workers` of every
  // global batch.
  auto scratch = std::filesystem::temp_directory_path() /
                 ("af-bench-cluster-scale-" + std::to_string(::getpid()));
  std::filesystem::create_directories(scratch);
  if (!actorflow::testing::write_fashion_mnist_subset(scratch.string(), 1792, 500)) {
    std::fprintf(stderr, "error: cannot write a Fashion-MNIST subset to %s\n", scratch.c_str());
    return 1;
  }
  // The same ps with 2 workers, for what grows with the workers: 1 epoch, 56 steps each, about
  // the 40 (10 epochs of 4) each of the many workers takes.
  auto small = between_graph(ps, 2, 1, scratch.string());
  auto run = small ? between_graph(ps, workers, 10, scratch.string()) : std::nullopt;
  std::error_code kept;
  std::filesystem::remove_all(scratch, kept);
  if (!run)
    return 1;
  auto [small_ps, small_workers] = maxima(*small, ps);
  auto [many_ps, many_workers] = maxima(*run, ps);
  std::string accuracy = "none";
  for (auto& line : run->tasks[static_cast<std::size_t>(ps)].lines)
    if (line.rfind("test accuracy: ", 0) == 0)
      accuracy = line.substr(15);
  const std::string layout = std::to_string(ps) + " ps (actorflow-worker) + " + std::to_string(workers) +
                             " between-graph workers (actorflow-train), --threads 1 each, started back to "
                             "back on loopback, the chief last";
  const std::string small_layout = "the same " + std::to_string(ps) + " ps with 2 workers";
  {
    bench::figure f{"cluster_ready_seconds_" + n + "_tasks", run->ready_seconds, "s"};
    f.baseline = small->ready_seconds;
    f.ratio = run->ready_seconds / small->ready_seconds;
    f.note = layout + "; from the last start to the last worker's 'training on' line (its session "
                      "created: every ps reached, past the wait for the chief's initialisation)" +
             format("; every ps served within %.2f s of it; baseline: ", many_ps.ready_seconds) +
             small_layout;
    bench::emit(f);
  }
  {
    bench::figure f{"training_worker_rss_mib_" + n + "_tasks", many_workers.rss_mib, "MiB"};
    f.baseline = small_workers.rss_mib;
    f.ratio = f.value / small_workers.rss_mib;
    f.note = layout + "; the largest VmRSS of a worker, sampled every 50 ms while training (the MLP, "
                      "1792 + 500 examples loaded); baseline: " + small_layout +
             format("; a lone idle task: %.1f MiB", lone_worker[0].rss_mib);
    bench::emit(f);
  }
  {
    bench::figure f{"training_ps_rss_mib_" + n + "_tasks", many_ps.rss_mib, "MiB"};
    f.baseline = small_ps.rss_mib;
    f.ratio = f.value / small_ps.rss_mib;
    f.note = layout + "; the largest VmRSS of a ps while serving the workers (the ps holding the 784x256 "
                      "weights); baseline: " + small_layout +
             format("; a lone idle ps: %.1f MiB; threads of a ps: at most %.0f (%.0f with 2 workers: "
                    "the bulk channel has a reader and a writer thread per worker it exchanges large "
                    "tensors with)",
                    lone_ps[0].rss_mib, many_ps.threads, small_ps.threads);
    bench::emit(f);
  }
  {
    bench::figure f{"task_open_fds_" + n + "_tasks", static_cast<double>(many_workers.fds), "fds"};
    f.baseline = small_workers.fds;
    f.ratio = f.value / small_workers.fds;
    f.note = layout + format("; a training worker's most open fds (an idle task: %.0f); its TCP "
                             "connections: at most %.0f, with at most %.0f tasks, %.0f of them to other "
                             "workers: it exchanges tensors with the %.0f ps only; baseline: ",
                             idle_fds, many_workers.connections, many_workers.peers,
                             many_workers.worker_links, ps) +
             small_layout;
    bench::emit(f);
  }
  {
    bench::figure f{"ps_open_fds_" + n + "_tasks", static_cast<double>(many_ps.fds), "fds"};
    f.baseline = small_ps.fds;
    f.ratio = f.value / small_ps.fds;
    f.note = layout + format("; a ps's most open fds while serving; its TCP connections: at most %.0f, "
                             "with at most %.0f tasks (%.0f workers and the other ps); baseline: ",
                             many_ps.connections, many_ps.peers, workers) +
             small_layout + format(" (%.0f connections with at most %.0f tasks)", small_ps.connections,
                                   small_ps.peers);
    bench::emit(f);
  }
  {
    bench::figure f{"between_graph_run_seconds_" + n + "_tasks", run->total_seconds, "s"};
    f.note = layout + "; 10 epochs of batch 16 over 1792 examples (4 steps per epoch per worker at 28 "
                      "workers), async; from the last start until every process had exited by itself "
                      "with code 0 (the ps once every worker reported done); the chief's test accuracy "
                      "on 500 examples " + accuracy;
    bench::emit(f);
  }
  return 0;
}

#pragma once
/// A between-graph cluster of real processes on loopback, watched from outside: what each
/// process holds (RSS, open file descriptors, the tasks it has TCP connections with) over its
/// life, when the workers are ready to train, and how each one ended. For the scale test
/// (tests/apps/cluster_scale.test.cpp) and benchmark (bench/cluster_scale.cpp).
///   write_fashion_mnist_subset(dir, 1792, 500);          // a small data set: short steps
///   auto run = run_between_graph_cluster(train_binary, worker_binary, 2, 6,
///                                        {"--epochs", "2", "--data-dir", dir, ...}, 120s);
///   run.ready_seconds, run.tasks[i].max_fds, run.tasks[i].peers ...
/// No test framework in here: the test and the benchmark check the results.

#include "serialization/idx_reader.hpp"
#include "support/processes.hpp"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <dirent.h>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <sys/types.h>
#include <vector>

namespace actorflow::testing {

/// The number of open file descriptors of `pid` (entries of /proc/PID/fd); -1 when it cannot be
/// read (the process is gone).
inline int open_fd_count(pid_t pid) {
  DIR* dir = ::opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (dir == nullptr)
    return -1;
  int count = 0;
  while (auto* entry = ::readdir(dir))
    if (entry->d_name[0] != '.')
      ++count;
  ::closedir(dir);
  return count;
}

/// The number of threads of `pid` (Threads: in /proc/PID/status); 0 when it cannot be read.
inline int thread_count(pid_t pid) {
  std::ifstream status{"/proc/" + std::to_string(pid) + "/status"};
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Threads:", 0) == 0)
      return std::stoi(line.substr(8));
  return 0;
}

/// The socket inodes among `pid`'s open file descriptors.
inline std::vector<unsigned long> socket_inodes(pid_t pid) {
  std::vector<unsigned long> inodes;
  auto base = "/proc/" + std::to_string(pid) + "/fd";
  DIR* dir = ::opendir(base.c_str());
  if (dir == nullptr)
    return inodes;
  while (auto* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.')
      continue;
    char target[128];
    auto n = ::readlink((base + "/" + entry->d_name).c_str(), target, sizeof target - 1);
    if (n <= 0)
      continue;
    target[n] = '\0';
    unsigned long inode = 0;
    if (std::sscanf(target, "socket:[%lu]", &inode) == 1)
      inodes.push_back(inode);
  }
  ::closedir(dir);
  return inodes;
}

/// For each of `pids`, how many established TCP connections it holds with each other one (by
/// index in `pids`): its sockets' inodes matched against /proc/net/tcp{,6}, and each
/// connection's far end (a port) to the process whose socket has that port as its near end.
/// Listening sockets are not connections; a far end outside `pids` (or of a process that has
/// just closed its end) counts under index -1.
inline std::vector<std::map<int, int>> tcp_peers(const std::vector<pid_t>& pids) {
  struct endpoint_pair {
    unsigned local_port = 0, remote_port = 0;
  };
  std::map<unsigned long, endpoint_pair> established;
  for (auto* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in{table};
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields{line};
      std::string slot, local, remote, state, skip;
      unsigned long inode = 0;
      fields >> slot >> local >> remote >> state;
      for (int i = 0; i < 5; ++i)
        fields >> skip;  // tx:rx queues, timer, retransmits, uid, timeout
      fields >> inode;
      if (state != "01" || inode == 0)  // 01: ESTABLISHED
        continue;
      auto port = [](const std::string& address) {
        return static_cast<unsigned>(std::stoul(address.substr(address.find(':') + 1), nullptr, 16));
      };
      established[inode] = {port(local), port(remote)};
    }
  }
  // Loopback only: a connection (near port, far port) is the far process's (far, near) socket.
  // Near ports alone may repeat: the kernel gives the same port to connections to different
  // destinations.
  std::vector<std::vector<endpoint_pair>> connections(pids.size());
  std::map<std::pair<unsigned, unsigned>, int> owner_of;
  for (std::size_t i = 0; i < pids.size(); ++i)
    for (auto inode : socket_inodes(pids[i]))
      if (auto found = established.find(inode); found != established.end()) {
        connections[i].push_back(found->second);
        owner_of[{found->second.local_port, found->second.remote_port}] = static_cast<int>(i);
      }
  std::vector<std::map<int, int>> peers(pids.size());
  for (std::size_t i = 0; i < pids.size(); ++i)
    for (auto& c : connections[i]) {
      auto owner = owner_of.find({c.remote_port, c.local_port});
      ++peers[i][owner == owner_of.end() ? -1 : owner->second];
    }
  return peers;
}

/// Writes the first `train` and `test` examples of Fashion-MNIST (`source`: Debian's
/// dataset-fashion-mnist) to `dir` as uncompressed idx files of the same names, so that
/// `--data-dir dir` trains the same model on a data set small enough for many processes to
/// load at once. False when the source cannot be read or `dir` written.
inline bool write_fashion_mnist_subset(const std::string& dir, std::int64_t train, std::int64_t test,
                                       const std::string& source = fashion_mnist_default_dir) {
  auto big_endian = [](std::ofstream& out, std::uint32_t value) {
    for (int shift = 24; shift >= 0; shift -= 8)
      out.put(static_cast<char>((value >> shift) & 0xff));
  };
  for (auto [split, n] : {std::pair<const char*, std::int64_t>{"train", train}, {"t10k", test}}) {
    auto whole = load_fashion_mnist(source, split);
    if (!whole || whole->size() < n)
      return false;
    auto features = whole->features();
    std::ofstream images{dir + "/" + split + "-images-idx3-ubyte", std::ios::binary};
    big_endian(images, idx_images_magic);
    big_endian(images, static_cast<std::uint32_t>(n));
    big_endian(images, 28);
    big_endian(images, static_cast<std::uint32_t>(features / 28));
    // The loader divided each byte by 255: multiplying back and rounding gives the byte again.
    auto* pixels = whole->images.data<float>();
    for (std::int64_t i = 0; i < n * features; ++i)
      images.put(static_cast<char>(static_cast<std::uint8_t>(std::lround(pixels[i] * 255.f))));
    std::ofstream labels{dir + "/" + split + "-labels-idx1-ubyte", std::ios::binary};
    big_endian(labels, idx_labels_magic);
    big_endian(labels, static_cast<std::uint32_t>(n));
    auto* label = whole->labels.data<std::int64_t>();
    for (std::int64_t i = 0; i < n; ++i)
      labels.put(static_cast<char>(label[i]));
    if (!images.good() || !labels.good())
      return false;
  }
  return true;
}

/// What one process of the cluster held and how it ended.
struct watched_task {
  std::string name;  // "ps 0", "worker 3"
  bool is_ps = false;
  std::size_t max_rss_bytes = 0;
  int max_fds = 0;
  int max_threads = 0;
  /// The most connections seen at once with each other task (index into the run's tasks).
  std::map<int, int> peers;
  /// Seconds from the last start to its ready line ("serving on" for a ps, the worker's
  /// "training on" after its session was created); negative when it never printed it.
  double ready_seconds = -1;
  int exit_code = -1;
  std::string ending;  // "exit code 0", "signal 9", "still running at the limit", "not started"
  std::string stderr_text;
  std::vector<std::string> lines;  // stdout
};

struct cluster_run {
  /// ps tasks first, then workers by task index.
  std::vector<watched_task> tasks;
  /// From the last process start to the last worker's "training on" line: every worker has its
  /// session, so it reached every ps and is past the wait for the chief's initialisation;
  /// negative when one never got there.
  double ready_seconds = -1;
  /// From the last start until every process had exited (or the limit).
  double total_seconds = 0;
  /// Whether every process exited by itself with code 0 within the limit.
  bool all_exited_zero = false;
};

/// Starts `ps` actorflow-worker ps tasks and `workers` actorflow-train between-graph workers
/// (each with `worker_flags` after --cluster/--job/--task) back to back on free loopback
/// ports, the chief last, and watches them until every one has exited or `limit` passed: their
/// stdout is drained as it comes, and every ~50 ms each live process's RSS, fd count, threads
/// and TCP peers are sampled (the maxima kept). Processes still running at the limit are
/// stopped (only they) and reported as such.
inline cluster_run run_between_graph_cluster(const std::string& train_binary,
                                             const std::string& worker_binary, int ps, int workers,
                                             const std::vector<std::string>& worker_flags,
                                             std::chrono::milliseconds limit) {
  using clock = std::chrono::steady_clock;
  cluster_run run;
  auto ports = free_loopback_ports(static_cast<std::size_t>(ps + workers));
  if (ports.empty()) {
    run.tasks.push_back({"no free loopback ports"});
    return run;
  }
  std::string spec = "ps=";
  for (int t = 0; t < ps + workers; ++t)
    spec += (t == ps ? ";worker=" : t == 0 ? "" : ",") + ("127.0.0.1:" + std::to_string(ports[t]));
  std::vector<std::unique_ptr<child_process>> processes(static_cast<std::size_t>(ps + workers));
  run.tasks.resize(processes.size());
  for (int t = 0; t < ps; ++t) {
    run.tasks[t].name = "ps " + std::to_string(t);
    run.tasks[t].is_ps = true;
    processes[t] = std::make_unique<child_process>(
      worker_binary, std::vector<std::string>{"--cluster", spec, "--job", "ps", "--task",
                                              std::to_string(t), "--threads", "1"});
  }
  for (int k = workers - 1; k >= 0; --k) {
    std::vector<std::string> args{"--cluster", spec, "--job", "worker", "--task", std::to_string(k)};
    args.insert(args.end(), worker_flags.begin(), worker_flags.end());
    run.tasks[ps + k].name = "worker " + std::to_string(k);
    processes[ps + k] = std::make_unique<child_process>(train_binary, args);
  }
  auto started = clock::now();
  auto seconds_since_start = [&] { return std::chrono::duration<double>(clock::now() - started).count(); };
  std::vector<pid_t> pids;
  for (auto& p : processes)
    pids.push_back(p->pid());
  auto deadline = started + limit;
  auto next_sample = started;
  for (;;) {
    bool running = false;
    for (std::size_t i = 0; i < processes.size(); ++i) {
      auto& p = *processes[i];
      auto& task = run.tasks[i];
      // A line at a time, waiting about a millisecond for each (wait_for_line reads nothing when
      // less than a whole one is left): every process's pipe keeps draining.
      while (auto line = p.wait_for_line("", std::chrono::milliseconds(2))) {
        if (task.ready_seconds < 0 &&
            line->find(task.is_ps ? "serving on" : ": training on") != std::string::npos)
          task.ready_seconds = seconds_since_start();
        task.lines.push_back(*line);
      }
      if (!p.exited())
        p.wait_exit(std::chrono::milliseconds(0));
      running = running || (p.started() && !p.exited());
    }
    if (!running || clock::now() > deadline)
      break;
    if (clock::now() < next_sample)
      continue;
    next_sample = clock::now() + std::chrono::milliseconds(50);
    auto peers = tcp_peers(pids);
    for (std::size_t i = 0; i < processes.size(); ++i) {
      if (processes[i]->exited())
        continue;
      auto& task = run.tasks[i];
      task.max_rss_bytes = std::max(task.max_rss_bytes, processes[i]->resident_bytes());
      task.max_fds = std::max(task.max_fds, open_fd_count(pids[i]));
      task.max_threads = std::max(task.max_threads, thread_count(pids[i]));
      for (auto [peer, count] : peers[i])
        task.peers[peer] = std::max(task.peers[peer], count);
    }
  }
  run.total_seconds = seconds_since_start();
  run.all_exited_zero = true;
  run.ready_seconds = 0;
  for (std::size_t i = 0; i < processes.size(); ++i) {
    auto& p = *processes[i];
    auto& task = run.tasks[i];
    if (!p.started()) {
      task.ending = "not started";
      run.all_exited_zero = false;
    } else if (!p.exited()) {
      task.ending = "still running at the limit";
      run.all_exited_zero = false;
      // Past the limit: stopped here, so that its stderr can be read to the end.
      p.signal(SIGTERM);
      if (p.wait_exit(std::chrono::milliseconds(5000)) == -1 && !p.exited()) {
        p.signal(SIGKILL);
        p.wait_exit(std::chrono::milliseconds(5000));
      }
    } else {
      task.exit_code = p.wait_exit(std::chrono::milliseconds(0));
      task.ending = p.ending(task.exit_code);
      run.all_exited_zero = run.all_exited_zero && task.exit_code == 0;
    }
    task.stderr_text = p.stderr_text();
    if (!task.is_ps)
      run.ready_seconds = task.ready_seconds < 0 || run.ready_seconds < 0
                            ? -1
                            : std::max(run.ready_seconds, task.ready_seconds);
  }
  return run;
}

} // namespace actorflow::testing

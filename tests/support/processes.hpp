#pragma once
/// Real processes for multi-process tests and benchmarks: free loopback ports, children that
/// are stopped (only they) when their owner goes, and a cluster of actorflow-worker tasks.
///   auto port = free_loopback_port();                     // 0 when none could be found
///   auto ports = free_loopback_ports(32);                 // distinct; empty when not found
///   child_process worker{worker_binary, {"--cluster", spec, "--job", "ps"}};
///   if (!worker.wait_for_line("serving on", 20s)) ...;
///   worker.signal(SIGTERM);  worker.wait_exit(10s) == 0;
///   cluster_processes cluster{worker_binary, {{"ps", 1}, {"worker", 2}}};
///   auto ps = start_ps_cluster(worker_binary, 2, 3);     // ps tasks serving; ps.spec for workers
///   if (cluster.ready()) ... cluster_spec::parse(cluster.spec_json()) ...
/// No test framework in here: Catch tests and benchmarks both use it and check the results.

#include <algorithm>
#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <memory>
#include <netinet/in.h>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>
#include <cstdio>
#include <random>

extern char** environ;

namespace actorflow::testing {

/// What a shell command printed (standard output and error together) and its exit code (-1
/// when it did not exit normally or could not be started).
struct command_result {
  int exit_code = -1;
  std::string output;
};

/// Runs `command` through the shell and waits for it.
inline command_result run_command(const std::string& command) {
  command_result r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr)
    return r;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr)
    r.output += buffer;
  auto status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

/// Whether 127.0.0.1:`port` can be bound right now (bind, close).
inline bool loopback_port_bindable(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return false;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return free;
}

/// A port nobody listens on right now; 0 on failure. Drawn at random below the kernel's
/// ephemeral range (ip_local_port_range): a port the kernel handed out for 127.0.0.1:0 could be
/// handed out again, to another process's connection or listener, before the test binds it.
inline std::uint16_t free_loopback_port() {
  int ephemeral_low = 32768;
  if (std::FILE* range = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(range, "%d", &ephemeral_low) != 1)
      ephemeral_low = 32768;
    std::fclose(range);
  }
  if (ephemeral_low > 12000) {
    static std::mt19937 draw{std::random_device{}() ^ static_cast<unsigned>(::getpid())};
    std::uniform_int_distribution<int> below{10000, ephemeral_low - 1};
    for (int attempt = 0; attempt < 200; ++attempt) {
      auto port = static_cast<std::uint16_t>(below(draw));
      if (loopback_port_bindable(port))
        return port;
    }
  }
  // A kernel whose ephemeral range leaves no room below: take one of its ports.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  std::uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
    port = ntohs(address.sin_port);
  ::close(fd);
  return port;
}

/// `count` free loopback ports, all different: free_loopback_port alone can draw one port twice
/// (nothing holds it), which in a cluster spec of 32 tasks happens about once in 45 runs. Empty
/// on failure.
inline std::vector<std::uint16_t> free_loopback_ports(std::size_t count) {
  std::vector<std::uint16_t> ports;
  for (int attempt = 0; ports.size() < count && attempt < 1000; ++attempt) {
    auto port = free_loopback_port();
    if (port == 0)
      return {};
    if (std::find(ports.begin(), ports.end(), port) == ports.end())
      ports.push_back(port);
  }
  return ports.size() == count ? ports : std::vector<std::uint16_t>{};
}

/// A TCP listener on a free loopback port, and its "127.0.0.1:PORT"; fd -1 on failure. For
/// tests that play a server by hand or hold a port taken.
inline std::pair<int, std::string> loopback_listener(int backlog = 4) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(fd, backlog) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (fd >= 0)
      ::close(fd);
    return {-1, {}};
  }
  return {fd, "127.0.0.1:" + std::to_string(ntohs(address.sin_port))};
}

/// A TCP connection to `port` on 127.0.0.1; -1 on failure.
inline int connect_to_loopback(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// A process this program started, with stdout on a pipe (read by wait_for_line) and stderr on
/// a pipe too unless it should go to this process's stderr. If it has not been seen to exit, the
/// destructor sends SIGTERM, waits up to 5 s, then SIGKILLs it, so nothing outlives its owner.
/// It starts with SIGPIPE at its default disposition and unblocked, as from a shell, whatever
/// this process (or the thread starting it) did with SIGPIPE: a program that would die of it
/// dies in the tests too.
class child_process {
public:
  /// `environment`: "NAME=value" entries added to (or replacing those of) this process's.
  child_process(const std::string& binary, const std::vector<std::string>& args,
                bool capture_stderr = true, const std::vector<std::string>& environment = {}) {
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    if (::pipe2(out, O_CLOEXEC) != 0 || (capture_stderr && ::pipe2(err, O_CLOEXEC) != 0))
      return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    if (capture_stderr)
      posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
    std::vector<std::string> all{binary};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<std::string> merged = environment;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string entry{*e};
      auto name = entry.substr(0, entry.find('=') + 1);
      bool replaced = false;
      for (auto& given : environment)
        replaced = replaced || given.rfind(name, 0) == 0;
      if (!replaced)
        merged.push_back(std::move(entry));
    }
    std::vector<char*> envp;
    for (auto& e : merged)
      envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t sigpipe_only, mask;
    sigemptyset(&sigpipe_only);
    sigaddset(&sigpipe_only, SIGPIPE);
    pthread_sigmask(SIG_SETMASK, nullptr, &mask);
    sigdelset(&mask, SIGPIPE);
    posix_spawnattr_setsigdefault(&attributes, &sigpipe_only);
    posix_spawnattr_setsigmask(&attributes, &mask);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    if (::posix_spawn(&pid_, all[0].c_str(), &actions, &attributes, argv.data(), envp.data()) != 0)
      pid_ = -1;
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    out_ = out[0];
    if (capture_stderr) {
      ::close(err[1]);
      err_ = err[0];
    }
  }

  ~child_process() {
    if (started() && !exit_code_) {
      ::kill(pid_, SIGTERM);
      if (wait_exit(std::chrono::milliseconds(5000)) == -1 && !exit_code_) {
        ::kill(pid_, SIGKILL);
        int status = 0;
        ::waitpid(pid_, &status, 0);
      }
    }
    if (out_ >= 0)
      ::close(out_);
    if (err_ >= 0)
      ::close(err_);
  }

  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  /// The child's resident memory (VmRSS) in bytes; 0 when it cannot be read.
  std::size_t resident_bytes() const { return status_bytes("VmRSS:"); }
  /// The most it was resident so far (VmHWM); 0 once it is gone.
  std::size_t peak_resident_bytes() const { return status_bytes("VmHWM:"); }

  /// Reads stdout until a line containing `text` arrives, for at most `limit`; the line, or
  /// nothing when the child closed stdout or time ran out.
  std::optional<std::string> wait_for_line(const std::string& text,
                                           std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      for (auto end = stdout_.find('\n'); end != std::string::npos; end = stdout_.find('\n')) {
        auto line = stdout_.substr(0, end);
        stdout_.erase(0, end + 1);
        if (line.find(text) != std::string::npos)
          return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || out_ < 0)
        return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0)
        continue;
      char buffer[4096];
      auto n = ::read(out_, buffer, sizeof buffer);
      if (n <= 0)
        return std::nullopt;
      stdout_.append(buffer, static_cast<std::size_t>(n));
    }
  }

  /// Every line the child prints on stdout until it closes it or `limit` passes.
  std::string read_all_lines(std::chrono::milliseconds limit) {
    std::string all;
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      auto line = wait_for_line("", std::chrono::duration_cast<std::chrono::milliseconds>(
                                      deadline - std::chrono::steady_clock::now()));
      if (!line)
        break;
      all += *line + "\n";
    }
    return all;
  }

  /// Whether wait_exit saw the child exit.
  bool exited() const { return exit_code_.has_value(); }

  /// Waits at most `limit` for the child to exit; its exit code, or -1 for a signal or when it
  /// is still running.
  int wait_exit(std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!exit_code_ && started()) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        exit_signal_ = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        break;
      }
      if (std::chrono::steady_clock::now() > deadline)
        return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return exit_code_.value_or(-1);
  }

  /// The signal that ended the child (e.g. SIGPIPE) once wait_exit saw it end by one; 0
  /// otherwise.
  int exit_signal() const { return exit_signal_; }

  /// How the child ended, for messages: "signal 13" or "exit code 0" (`code` from wait_exit).
  std::string ending(int code) const {
    return exit_signal_ != 0 ? "signal " + std::to_string(exit_signal_)
                             : "exit code " + std::to_string(code);
  }

  /// Everything the child wrote to stderr (call after it exited; empty when not captured).
  std::string stderr_text() {
    std::string text;
    char buffer[4096];
    for (ssize_t n; err_ >= 0 && (n = ::read(err_, buffer, sizeof buffer)) > 0;)
      text.append(buffer, static_cast<std::size_t>(n));
    return text;
  }

  void signal(int sig) {
    if (started())
      ::kill(pid_, sig);
  }

  /// Waits at most `limit` until the kernel reports the child stopped (state T in
  /// /proc/PID/stat): a SIGSTOP takes effect a moment after kill() returns.
  bool wait_stopped(std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (started()) {
      std::ifstream stat{"/proc/" + std::to_string(pid_) + "/stat"};
      std::string text{std::istreambuf_iterator<char>{stat}, std::istreambuf_iterator<char>{}};
      auto after_name = text.rfind(')');
      if (after_name != std::string::npos && after_name + 2 < text.size() &&
          (text[after_name + 2] == 'T' || text[after_name + 2] == 't'))
        return true;
      if (std::chrono::steady_clock::now() > deadline)
        return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

private:
  /// A "Field:  N kB" line of /proc/PID/status, in bytes; 0 when it cannot be read.
  std::size_t status_bytes(const std::string& field) const {
    std::ifstream status{"/proc/" + std::to_string(pid_) + "/status"};
    std::string line;
    while (std::getline(status, line))
      if (line.rfind(field, 0) == 0)
        return std::stoull(line.substr(field.size())) * 1024;
    return 0;
  }

  pid_t pid_ = -1;
  int out_ = -1;
  int err_ = -1;
  std::string stdout_;
  std::optional<int> exit_code_;
  int exit_signal_ = 0;
};

/// One actorflow-worker per task of `jobs` ({job, task count}) on free loopback ports, each
/// with `--threads threads` and whatever `extra_args(job, task)` adds (e.g. --master); their
/// stderr goes to this process's stderr.
class cluster_processes {
public:
  using task_args = std::function<std::vector<std::string>(const std::string& job, int task)>;

  cluster_processes(const std::string& worker_binary,
                    const std::vector<std::pair<std::string, int>>& jobs, int threads = 1,
                    const task_args& extra_args = {})
    : worker_binary_(worker_binary) {
    std::string json = "{";
    std::vector<std::pair<std::string, int>> members;
    std::size_t tasks = 0;
    for (auto& job : jobs)
      tasks += static_cast<std::size_t>(job.second);
    auto ports = free_loopback_ports(tasks);
    ready_ = ports.size() == tasks;
    ports.resize(tasks, 0);
    for (auto& [job, count] : jobs) {
      json += (json.size() > 1 ? ", \"" : "\"") + job + "\": [";
      for (int task = 0; task < count; ++task) {
        auto port = ports[members.size()];
        json += (task > 0 ? ", \"127.0.0.1:" : "\"127.0.0.1:") + std::to_string(port) + "\"";
        addresses_.push_back("127.0.0.1:" + std::to_string(port));
        members.emplace_back(job, task);
      }
      json += "]";
    }
    spec_json_ = json + "}";
    if (!ready_)
      return;
    for (auto& [job, task] : members) {
      std::vector<std::string> args{"--cluster", spec_json_, "--job", job, "--task",
                                    std::to_string(task), "--threads", std::to_string(threads)};
      if (extra_args)
        for (auto& extra : extra_args(job, task))
          args.push_back(extra);
      tasks_.push_back(std::make_unique<child_process>(worker_binary, args, false));
      args_.push_back(std::move(args));
    }
    for (auto& t : tasks_)
      ready_ = ready_ && t->started() &&
               t->wait_for_line("serving on", std::chrono::milliseconds(20000)).has_value();
  }

  /// Whether every task is serving.
  bool ready() const { return ready_; }
  const std::string& spec_json() const { return spec_json_; }
  /// Tasks in the order of `jobs`, then task index.
  child_process& task(std::size_t i) { return *tasks_[i]; }
  /// Task i's "host:port".
  std::string address(std::size_t i) const { return addresses_[i]; }

  /// Starts task i again at its address (as a supervisor would), once the test killed it and
  /// saw it exit; true when it serves within 20 s. task(i) is the new process from then on.
  bool restart(std::size_t i) {
    if (!tasks_[i]->exited())
      return false;
    tasks_[i] = std::make_unique<child_process>(worker_binary_, args_[i], false);
    return tasks_[i]->started() &&
           tasks_[i]->wait_for_line("serving on", std::chrono::milliseconds(20000)).has_value();
  }

  /// SIGTERMs every task the test did not see exit; true when each exited 0 within 10 s.
  bool stop() {
    std::vector<child_process*> running;
    for (auto& t : tasks_)
      if (!t->exited()) {
        t->signal(SIGTERM);
        running.push_back(t.get());
      }
    bool clean = true;
    for (auto* t : running)
      clean = t->wait_exit(std::chrono::milliseconds(10000)) == 0 && clean;
    return clean;
  }

private:
  std::string worker_binary_;
  std::vector<std::vector<std::string>> args_;
  std::string spec_json_;
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<child_process>> tasks_;
  bool ready_ = true;
};

/// A cluster spec ("ps=...;worker=...") of `ps` ps tasks and `workers` worker tasks on free
/// loopback ports, its ps tasks (actorflow-worker, one thread each) started and serving, for
/// tests whose workers are other programs (actorflow-train, Python). `ready` is false when ports
/// or a serving ps could not be had.
struct ps_cluster {
  std::string spec;
  std::vector<std::unique_ptr<child_process>> ps;
  bool ready = false;
};

inline ps_cluster start_ps_cluster(const std::string& worker_binary, int ps, int workers,
                                   std::chrono::milliseconds serving_within = std::chrono::seconds(20)) {
  ps_cluster out;
  auto ports = free_loopback_ports(static_cast<std::size_t>(ps + workers));
  if (ports.size() != static_cast<std::size_t>(ps + workers))
    return out;
  auto address = [&](int i) { return "127.0.0.1:" + std::to_string(ports[static_cast<std::size_t>(i)]); };
  out.spec = "ps=";
  for (int t = 0; t < ps; ++t)
    out.spec += (t > 0 ? "," : "") + address(t);
  out.spec += ";worker=";
  for (int t = 0; t < workers; ++t)
    out.spec += (t > 0 ? "," : "") + address(ps + t);
  for (int t = 0; t < ps; ++t) {
    out.ps.push_back(std::make_unique<child_process>(
      worker_binary, std::vector<std::string>{"--cluster", out.spec, "--job", "ps", "--task",
                                              std::to_string(t), "--threads", "1"}));
    if (!out.ps.back()->wait_for_line("serving on", serving_within))
      return out;
  }
  out.ready = true;
  return out;
}

} // namespace actorflow::testing

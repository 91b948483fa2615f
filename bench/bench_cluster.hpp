#pragma once
/// Worker processes for the cluster benchmarks: free loopback ports and actorflow-worker
/// children (only they are killed when the benchmark ends).
///   bench::cluster_processes cluster{{{"ps", 1}, {"worker", 1}}};
///   if (!cluster.ready()) return 1;
///   auto spec = cluster_spec::parse(cluster.spec_json);
/// The workers' stderr goes to this process's stderr; their stdout is read for "serving on".

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <memory>
#include <netinet/in.h>
#include <poll.h>
#include <spawn.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

extern char** environ;

#ifndef ACTORFLOW_WORKER_BINARY
#define ACTORFLOW_WORKER_BINARY "actorflow-worker"
#endif

namespace bench {

/// A port nobody listens on right now (bind 127.0.0.1:0, read it, close); 0 on failure.
inline std::uint16_t free_loopback_port() {
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

/// One child process with stdout on a pipe; SIGTERMed (then SIGKILLed) by the destructor.
class child_process {
public:
  child_process(const std::string& binary, const std::vector<std::string>& args) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0)
      return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    std::vector<std::string> all{binary};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (::posix_spawn(&pid_, all[0].c_str(), &actions, nullptr, argv.data(), environ) != 0)
      pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    out_ = out[0];
  }

  ~child_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      for (int i = 0; i < 250; ++i) { // up to 5 s
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
          pid_ = -1;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        int status = 0;
        ::waitpid(pid_, &status, 0);
      }
    }
    if (out_ >= 0)
      ::close(out_);
  }

  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  bool started() const { return pid_ > 0; }

  /// Reads stdout until a line containing `text` arrives, for at most `limit`.
  bool wait_for_line(const std::string& text, std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      for (auto end = stdout_.find('\n'); end != std::string::npos; end = stdout_.find('\n')) {
        auto line = stdout_.substr(0, end);
        stdout_.erase(0, end + 1);
        if (line.find(text) != std::string::npos)
          return true;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || out_ < 0)
        return false;
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0)
        continue;
      char buffer[4096];
      auto n = ::read(out_, buffer, sizeof buffer);
      if (n <= 0)
        return false;
      stdout_.append(buffer, static_cast<std::size_t>(n));
    }
  }

private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string stdout_;
};

/// One actorflow-worker per task of `jobs` ({job, task count}) on free loopback ports.
struct cluster_processes {
  std::string spec_json;
  std::vector<std::unique_ptr<child_process>> tasks;
  bool ok = true;

  explicit cluster_processes(const std::vector<std::pair<std::string, int>>& jobs, int threads = 1) {
    std::string json = "{";
    std::vector<std::pair<std::string, int>> members;
    for (auto& [job, count] : jobs) {
      json += (json.size() > 1 ? ", \"" : "\"") + job + "\": [";
      for (int task = 0; task < count; ++task) {
        json += (task > 0 ? ", \"127.0.0.1:" : "\"127.0.0.1:") + std::to_string(free_loopback_port()) + "\"";
        members.emplace_back(job, task);
      }
      json += "]";
    }
    spec_json = json + "}";
    for (auto& [job, task] : members)
      tasks.push_back(std::make_unique<child_process>(
        ACTORFLOW_WORKER_BINARY,
        std::vector<std::string>{"--cluster", spec_json, "--job", job, "--task", std::to_string(task),
                                 "--threads", std::to_string(threads)}));
    for (auto& t : tasks)
      if (!t->started() || !t->wait_for_line("serving on", std::chrono::milliseconds(20000))) {
        std::fprintf(stderr, "error: an actorflow-worker (%s) did not start serving\n",
                     ACTORFLOW_WORKER_BINARY);
        ok = false;
        return;
      }
  }
};

} // namespace bench

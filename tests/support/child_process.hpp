#pragma once
/// Real processes for multi-process tests: free loopback ports and children that are killed
/// (only they) when a test ends early.
///   auto port = free_loopback_port();
///   child_process worker{ACTORFLOW_WORKER_BINARY, {"--cluster", spec, "--job", "ps"}};
///   REQUIRE(worker.wait_for_line("serving on", 20s));
///   worker.signal(SIGTERM);  CHECK(worker.wait_exit(10s) == 0);

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <optional>
#include <poll.h>
#include <spawn.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace actorflow::testing {

using namespace std::chrono_literals;

/// A port nobody listens on right now: bind 127.0.0.1:0, read the port, close the socket.
inline std::uint16_t free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  socklen_t length = sizeof address;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  ::close(fd);
  return ntohs(address.sin_port);
}

/// A process this test started, with its stdout and stderr on pipes. The destructor
/// SIGKILLs it (only it) if the test did not see it exit, so a failing test leaves nothing.
class child_process {
public:
  child_process(const std::string& binary, const std::vector<std::string>& args) {
    int out[2], err[2];
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
    std::vector<std::string> all{binary};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    auto spawned = ::posix_spawn(&pid_, all[0].c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    ::close(err[1]);
    out_ = out[0];
    err_ = err[0];
    REQUIRE(spawned == 0);
  }

  ~child_process() {
    if (pid_ > 0 && !exit_code_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    ::close(out_);
    ::close(err_);
  }

  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  /// Reads stdout until a line containing `text` arrives, for at most `limit`; the line, or
  /// nothing when the worker closed stdout or time ran out.
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
      if (left.count() <= 0)
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

  /// Waits at most `limit` for the worker to exit; its exit code, or -1 for a signal or when
  /// it is still running.
  int wait_exit(std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!exit_code_) {
      int status = 0;
      auto r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        break;
      }
      if (std::chrono::steady_clock::now() > deadline)
        return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return *exit_code_;
  }

  /// Everything the worker wrote to stderr (call after it exited).
  std::string stderr_text() {
    std::string text;
    char buffer[4096];
    for (ssize_t n; (n = ::read(err_, buffer, sizeof buffer)) > 0;)
      text.append(buffer, static_cast<std::size_t>(n));
    return text;
  }

  void signal(int sig) { ::kill(pid_, sig); }

private:
  pid_t pid_ = -1;
  int out_ = -1;
  int err_ = -1;
  std::string stdout_;
  std::optional<int> exit_code_;
};

} // namespace actorflow::testing

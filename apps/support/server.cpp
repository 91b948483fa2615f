#include "support/server.hpp"

#include "actors/server.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <iostream>
#include <thread>
#include <unistd.h>

namespace actorflow::apps {

namespace {

/// Written by the signal handler (the signal's number) and by a server that stopped by itself
/// (0); read by serve_until_signal.
int stop_pipe[2] = {-1, -1};

extern "C" void note_stop_signal(int signal) {
  auto saved = errno;
  auto code = static_cast<unsigned char>(signal);
  [[maybe_unused]] auto written = ::write(stop_pipe[1], &code, 1);
  errno = saved;
}

} // namespace

bool catch_stop_signals() {
  if (stop_pipe[0] < 0 && ::pipe2(stop_pipe, O_CLOEXEC) != 0)
    return false;
  struct sigaction action {};
  action.sa_handler = note_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (::sigaction(SIGINT, &action, nullptr) != 0 || ::sigaction(SIGTERM, &action, nullptr) != 0)
    return false;
  return true;
}

int serve_until_signal(const std::string& app, server& served) {
  std::cout << app << ": " << served.name() << " serving on " << served.host() << ':'
            << served.port() << " (target " << served.target()
            << (served.bulk_address().empty() ? "" : ", large tensors on " + served.bulk_address())
            << ")" << std::endl;
  std::atomic<bool> ended{false};
  std::thread joiner{[&] {
    served.join();
    ended = true;
    note_stop_signal(0);
  }};
  unsigned char received = 0;
  while (::read(stop_pipe[0], &received, 1) != 1 && errno == EINTR) {
  }
  if (!ended.load())
    std::cerr << app << ": " << served.name() << " stopping on signal " << int{received}
              << std::endl;
  served.stop();
  joiner.join();
  if (served.abandoned()) {
    std::cerr << app << ": " << served.name()
              << " stopped because its workers went away without finishing (exit code 3)"
              << std::endl;
    return 3;
  }
  if (auto why = served.failure(); !why.empty()) {
    std::cerr << app << ": " << served.name() << " ended because its actors died (" << why
              << "); exit code 4, so that a supervisor restarts it" << std::endl;
    return 4;
  }
  return 0;
}

} // namespace actorflow::apps

#include "support/server.hpp"

#include "actors/server.hpp"

#include <atomic>
#include <iostream>
#include <pthread.h>
#include <thread>

namespace actorflow::apps {

std::optional<sigset_t> block_stop_signals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  if (pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr) != 0)
    return std::nullopt;
  std::signal(SIGPIPE, SIG_IGN);
  return stop_signals;
}

int serve_until_signal(const std::string& app, server& served, const sigset_t& stop_signals) {
  std::cout << app << ": " << served.name() << " serving on " << served.host() << ':'
            << served.port() << " (target " << served.target() << ")" << std::endl;
  std::atomic<bool> ended{false};
  // The signals wait on this (the main) thread: a process-directed signal goes to the main
  // thread when it waits for it, and otherwise to any thread that does not block it, such as
  // those a library started before main (OpenBLAS's), which would die of it. A server that
  // stops by itself wakes this thread with a SIGTERM of its own, which is then not reported.
  auto main_thread = pthread_self();
  std::thread joiner{[&] {
    served.join();
    ended = true;
    pthread_kill(main_thread, SIGTERM);
  }};
  int received = 0;
  while (sigwait(&stop_signals, &received) != 0) {
  }
  if (!ended.load())
    std::cerr << app << ": " << served.name() << " stopping on signal " << received << std::endl;
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

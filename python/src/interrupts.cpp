/// Ctrl-C during a step (bindings.hpp's interruptible_step): from the first step on, actorflow's
/// SIGINT handler sits in front of Python's. It calls Python's (which records the
/// KeyboardInterrupt, as without it) and writes a byte to a pipe; a watcher thread reading the
/// pipe cancels the steps of every session with one in flight (none between steps). A signal
/// handler may do little else: cancelling sends a CAF message, which the watcher does outside
/// the handler. Installed once, not around every step: two sigaction calls a step cost more
/// than the rest of a scalar Session.run's Python overhead on these VMs. A handler the program
/// sets later (signal.signal) replaces it; steps then finish before the interrupt is raised.

#include "python/src/bindings.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <thread>
#include <unistd.h>

namespace actorflow::python {

namespace {

struct interrupt_state {
  std::mutex mutex;
  /// Sessions with steps in flight, and how many each.
  std::map<session*, int> running;
  bool install_tried = false;
  struct sigaction python_action {};
  int pipe_read = -1;
  std::atomic<int> pipe_write{-1};
};

interrupt_state& state() {
  // Never destroyed: the watcher thread and the handler may outlive static destruction.
  static auto* s = new interrupt_state;
  return *s;
}

void on_sigint(int signal, siginfo_t* info, void* context) {
  auto& s = state();
  // Python's handler first: it records the KeyboardInterrupt that the run raises after.
  if (s.python_action.sa_flags & SA_SIGINFO) {
    if (s.python_action.sa_sigaction)
      s.python_action.sa_sigaction(signal, info, context);
  } else if (s.python_action.sa_handler != SIG_IGN && s.python_action.sa_handler != SIG_DFL &&
             s.python_action.sa_handler) {
    s.python_action.sa_handler(signal);
  }
  auto saved_errno = errno;
  char byte = 1;
  if (auto fd = s.pipe_write.load(); fd >= 0)
    static_cast<void>(::write(fd, &byte, 1));
  errno = saved_errno;
}

void watch(int fd) {
  char byte;
  for (;;) {
    auto n = ::read(fd, &byte, 1);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return;
    auto& s = state();
    std::lock_guard<std::mutex> guard{s.mutex};
    for (auto& [running_session, steps] : s.running)
      running_session->cancel_running_steps();
  }
}

/// The pipe and its watcher, made once; false when they cannot be (Ctrl-C then waits for the
/// step, as before).
bool start_watcher(interrupt_state& s) {
  if (s.pipe_read >= 0)
    return true;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return false;
  ::fcntl(fds[1], F_SETFL, ::fcntl(fds[1], F_GETFL) | O_NONBLOCK);
  s.pipe_read = fds[0];
  s.pipe_write = fds[1];
  std::thread{watch, fds[0]}.detach();
  return true;
}

} // namespace

interruptible_step::interruptible_step(session* s) : session_(s) {
  if (session_ == nullptr)
    return;
  auto& st = state();
  std::lock_guard<std::mutex> guard{st.mutex};
  ++st.running[session_];
  if (st.install_tried)
    return;
  st.install_tried = true;
  if (!start_watcher(st))
    return;
  struct sigaction current {};
  if (::sigaction(SIGINT, nullptr, &current) != 0)
    return;
  // Only in front of a handler Python installed: an ignored or default SIGINT stays so.
  bool handled = (current.sa_flags & SA_SIGINFO) ? current.sa_sigaction != nullptr
                                                 : current.sa_handler != SIG_IGN &&
                                                     current.sa_handler != SIG_DFL;
  if (!handled)
    return;
  st.python_action = current;
  struct sigaction ours {};
  ours.sa_sigaction = on_sigint;
  ours.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&ours.sa_mask);
  ::sigaction(SIGINT, &ours, nullptr);
}

interruptible_step::~interruptible_step() {
  if (session_ == nullptr)
    return;
  auto& st = state();
  std::lock_guard<std::mutex> guard{st.mutex};
  if (--st.running[session_] == 0)
    st.running.erase(session_);
}

} // namespace actorflow::python

// SIGPIPE blocked per thread (actors/sigpipe.hpp).
#include "actors/sigpipe.hpp"

#include <csignal>
#include <ctime>
#include <pthread.h>

namespace actorflow {

namespace {

sigset_t only_sigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  return set;
}

} // namespace

sigpipe_blocked::sigpipe_blocked() {
  auto set = only_sigpipe();
  sigset_t before;
  pthread_sigmask(SIG_BLOCK, &set, &before);
  was_blocked_ = sigismember(&before, SIGPIPE) == 1;
  // One pending before the block is the caller's: leave it for the caller.
  sigset_t pending;
  sigpending(&pending);
  was_pending_ = sigismember(&pending, SIGPIPE) == 1;
}

sigpipe_blocked::~sigpipe_blocked() {
  if (was_blocked_)
    return;
  auto set = only_sigpipe();
  if (!was_pending_) {
    // A write here that met a closed peer raised one: unblocking would deliver it now.
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) == 1) {
      timespec now{};
      sigtimedwait(&set, nullptr, &now);
    }
  }
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

void block_sigpipe_in_this_thread() {
  auto set = only_sigpipe();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

} // namespace actorflow

#pragma once
/// SIGPIPE kept from the threads that write to sockets, whatever the embedder's disposition:
///   { sigpipe_blocked during; system = new caf::actor_system{cfg}; } // CAF's threads inherit it
///   std::thread{[] { block_sigpipe_in_this_thread(); serve(); }};    // and so do its children
/// A write to a peer that went away then fails with EPIPE instead of killing the process.
/// (Blocked, a SIGPIPE the kernel raises for a write stays pending on the writing thread,
/// harmless while the thread keeps it blocked.) No CAF or OpenSSL here.

namespace actorflow {

/// Blocks SIGPIPE in the calling thread for as long as it lives; threads it starts meanwhile
/// inherit the block. On destruction a SIGPIPE raised on this thread in the meantime is taken
/// (not delivered), then the thread's mask is restored. Not copyable; destroy on the same thread.
class sigpipe_blocked {
public:
  sigpipe_blocked();
  ~sigpipe_blocked();
  sigpipe_blocked(const sigpipe_blocked&) = delete;
  sigpipe_blocked& operator=(const sigpipe_blocked&) = delete;

private:
  bool was_blocked_ = false;
  bool was_pending_ = false;
};

/// Blocks SIGPIPE in the calling thread for the rest of its life (for threads actorflow starts
/// that write to sockets through code it cannot give MSG_NOSIGNAL, e.g. OpenSSL's or
/// cpp-httplib's); threads it starts inherit the block.
void block_sigpipe_in_this_thread();

} // namespace actorflow

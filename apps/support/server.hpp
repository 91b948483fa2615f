#pragma once
/// Serving an actor until stopped: what actorflow-worker and actorflow-master share.
///   sigset_t stop = block_stop_signals();          // first thing in main, before any thread
///   return serve_until_signal("actorflow-master", "the master", "0.0.0.0", 2222, stop,
///                             [](caf::actor_system& sys) { return spawn_master(sys, {}); });

#include <caf/fwd.hpp>

#include <csignal>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace actorflow::apps {

/// Blocks SIGINT and SIGTERM in this thread and every thread started after (they stay pending
/// until serve_until_signal takes one) and ignores SIGPIPE (a peer that goes away must not kill
/// the process; CAF sees EPIPE). nullopt when the mask cannot be set.
std::optional<sigset_t> block_stop_signals();

/// Starts an actor system with the middleman and actorflow's message types, spawns an actor
/// with `spawn`, publishes it on host:port (an empty host: every interface), prints
/// "<app>: <what> serving on HOST:PORT" to standard output once it listens, waits for SIGINT or
/// SIGTERM, then sends the actor a stop message (protocols/task.hpp's stop_atom) and waits up
/// to 10 s for it to go. Returns the exit code: 0 after a signal, 1 when it cannot listen.
int serve_until_signal(const std::string& app, const std::string& what, const std::string& host,
                       std::uint16_t port, const sigset_t& stop_signals,
                       const std::function<caf::actor(caf::actor_system&)>& spawn);

} // namespace actorflow::apps

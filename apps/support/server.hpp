#pragma once
/// Running a server (actors/server.hpp) until a signal: what actorflow-worker and
/// actorflow-master share.
///   sigset_t stop = *block_stop_signals();          // first thing in main, before any thread
///   auto s = server::start(cluster, "worker", 0);
///   return serve_until_signal("actorflow-worker", **s, stop);

#include <csignal>
#include <optional>
#include <string>

namespace actorflow {
class server;
}

namespace actorflow::apps {

/// Blocks SIGINT and SIGTERM in this thread and every thread started after (they stay pending
/// until serve_until_signal takes one) and ignores SIGPIPE (a peer that goes away must not kill
/// the process; CAF sees EPIPE). nullopt when the mask cannot be set.
std::optional<sigset_t> block_stop_signals();

/// Prints "<app>: <name> serving on HOST:PORT (target caf://HOST:PORT)" to standard output,
/// waits for SIGINT or SIGTERM or for the server to stop by itself (a stop message to its
/// task), then stops it. Returns the exit code: 0, or 3 when the task stopped because the
/// workers that used it all went away without finishing (server::abandoned).
int serve_until_signal(const std::string& app, server& served, const sigset_t& stop_signals);

} // namespace actorflow::apps

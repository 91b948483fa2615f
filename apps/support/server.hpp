#pragma once
/// Running a server (actors/server.hpp) until a signal: what actorflow-worker and
/// actorflow-master share.
///   if (!catch_stop_signals()) ...;                 // before the server starts
///   auto s = server::start(cluster, "worker", 0);
///   return serve_until_signal("actorflow-worker", **s);

#include <string>

namespace actorflow {
class server;
}

namespace actorflow::apps {

/// From now on SIGINT and SIGTERM, whichever thread the kernel hands them to (those a library
/// started before main, such as OpenBLAS's, block nothing), are noted for serve_until_signal
/// instead of killing the process, even before it waits for them (SIGPIPE is ignored already,
/// by run_main). False when that cannot be set up.
bool catch_stop_signals();

/// Prints "<app>: <name> serving on HOST:PORT (target caf://HOST:PORT, large tensors on
/// HOST:PORT)" to standard output, waits for SIGINT or SIGTERM or for the server to stop by
/// itself (a stop message to its task), then stops it. Returns the exit code: 0; 3 when the
/// task stopped because the workers that used it all went away without finishing
/// (server::abandoned); 4 when its actors died.
int serve_until_signal(const std::string& app, server& served);

} // namespace actorflow::apps

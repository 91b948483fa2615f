#pragma once
/// CAF's network layer with actorflow's guard on every connection (actors/transport_guard.cpp):
/// a cluster token presented before anything else is read, mutual TLS, and a cap on what one
/// message may claim, enforced before CAF's BASP allocates for it.
///   caf::actor_system_config config;
///   use_guarded_transport(config, process_transport_security());  // instead of load<io::middleman>()
///
/// network_config() does this for actorflow's own systems. A host that loads the plain middleman
/// keeps CAF's behaviour: it cannot reach a cluster that requires a token or TLS.

#include "actors/transport_security.hpp"

#include <caf/actor_control_block.hpp>
#include <caf/fwd.hpp>

#include <cstdint>
#include <set>
#include <string>

namespace actorflow {

/// Loads CAF's middleman into `config` with the guarded backend, and CAF's OpenSSL module
/// (with `security`'s files) when it asks for TLS.
void use_guarded_transport(caf::actor_system_config& config, const transport_security& security);

/// Why connecting to `host`:`port` failed, in words: CAF's error, and for a handshake that did
/// not finish, the likely cause: the peer said nothing (this process closed the connection
/// after the handshake timeout: not an actorflow process, or a stopped one), or it closed the
/// connection itself (it requires a cluster token or certificate this process lacks).
std::string describe_connect_error(caf::actor_system& sys, const caf::error& err,
                                   const std::string& host, std::uint16_t port);

/// The actor published at a host and port, and the interface it was published with (for
/// caf::actor_system::assignable).
struct reached_actor {
  caf::strong_actor_ptr actor;
  std::set<std::string> interface;
};

/// Connects to `host`:`port` through the middleman actor, waiting at most `bound_seconds` (0:
/// without bound). Unlike remote_actor(), whose wait has no bound, a peer that accepts the
/// connection but never answers fails in time. Errors (unavailable) say why in words: that
/// silence, a refused handshake (describe_connect_error), or no actor published there.
result<reached_actor> reach_published_actor(caf::actor_system& sys, const std::string& host,
                                            std::uint16_t port, double bound_seconds);

/// How long to wait for a peer that refuses connections because nothing listens at its address
/// yet (started later, or restarting), as TensorFlow's client waits for its workers
/// ("CreateSession still waiting for response from worker").
struct connect_patience {
  /// Tries again every half second for up to this long; 0: fail at once.
  double wait_seconds = 0;
  /// Named in the lines said every 5 s while waiting ("the master at caf://h:p").
  std::string what;
};

/// reach_published_actor, waiting as `patience` says for an address where nothing listens yet
/// (every other failure, e.g. a refused handshake, fails at once). Says what it waits for every
/// 5 s (log_info); the error after the wait names its bound.
result<reached_actor> reach_published_actor(caf::actor_system& sys, const std::string& host,
                                            std::uint16_t port, double bound_seconds,
                                            const connect_patience& patience);

/// An actor that answers (connect_atom, host, port) as the middleman does, with (node_id,
/// strong_actor_ptr, interface) or an error, after waiting as `patience` says for an address
/// where nothing listens yet: for actors that reach peers by request (a master reaching its
/// tasks). Each connector answers one request on a thread of its own, then quits.
caf::actor spawn_patient_connector(caf::actor_system& sys, double bound_seconds,
                                   connect_patience patience);

/// Counts of the guard's refusals in this process since it started, for tests and logs.
struct transport_guard_counters {
  std::uint64_t refused_token = 0;
  std::uint64_t refused_size = 0;
  std::uint64_t timed_out = 0;
};
transport_guard_counters transport_guard_counts();

} // namespace actorflow

#pragma once
/// A session for code that runs inside actors: a typed actor that opens a session on a master
/// the first time it is asked to run, and answers each run with a master_run_result instead of
/// blocking a thread (the blocking `session` would deadlock an actor on a one-thread scheduler).
///   auto s = spawn_session(sys, g, options);            // result<protocol::session_actor>
///   auto run = protocol::make_session_run({loss}, {{x, batch}}, {train});
///   self->request(*s, std::chrono::seconds(30), protocol::run_atom::value, *run)
///     .then([](protocol::master_run_result& r) { ... r.outcome, r.fetched ... });
/// It monitors its master: a master that goes down fails every waiting and later request with
/// an error naming it, and every request to the master is bounded by the session's timeout.
/// Give it an existing master with `options.master = existing_master(handle)`.

#include "actors/protocols/master.hpp"
#include "actors/session.hpp"

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <memory>

namespace actorflow {

namespace protocol {

/// A session (actors/session_actor.hpp). Runs take master_run_requests without a handle
/// (make_session_run): the session actor knows its handle on the master.
using session_actor = caf::typed_actor<
  // Runs one step; placements it made come back in `placed` (and are logged to standard error
  // when options.log_device_placement is set).
  caf::replies_to<run_atom, master_run_request>::with<master_run_result>,
  // The session's graph grew: a new copy of it (make_graph_def), sent before the next run.
  caf::replies_to<extend_atom, graph_def>::with<status>,
  // Closes the session on its master (freeing its partitions) and stops the actor.
  caf::replies_to<close_atom>::with<status>>;

/// A run for a session actor: make_master_run_request without a handle.
inline result<master_run_request> make_session_run(const std::vector<output>& fetches,
                                                   const feed_list& feeds = {},
                                                   const std::vector<output>& targets = {}) {
  return make_master_run_request(0, fetches, feeds, targets);
}

} // namespace protocol

/// Names a master already running in this process for session_options::master.
std::shared_ptr<const master_ref> existing_master(protocol::master_actor master);

/// Spawns a session actor on a copy of `g` with `options` (run_inline and trace apply; drive
/// is for blocking waits and is ignored). Fails when the graph has a construction error or the
/// actor system cannot run these options (check_actor_system's message says what to add). The
/// actor closes its session and stops what it spawned when it exits; an actor system shutting
/// down ends it.
result<protocol::session_actor> spawn_session(caf::actor_system& sys, const graph& g,
                                              session_options options = {});

} // namespace actorflow

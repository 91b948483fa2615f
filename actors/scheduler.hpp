#pragma once
/// The scheduler of every actor system actorflow creates (network_config()):
///   use_actorflow_scheduler(config);
/// CAF's sharing policy (one queue, a condition variable), except that a worker with nothing
/// to do first polls the queue for a short while before it sleeps, and enqueues wake only a
/// worker that sleeps. A step is a burst of messages with short gaps between them (a client's
/// own work between runs, a peer's answer on loopback); a worker that sleeps in each gap pays
/// a futex wake-up and a reschedule on the next message, tens of microseconds on these VMs.
/// The spin yields the core on every poll, so kernels' threads on a loaded core still run.
///
/// ACTORFLOW_SCHEDULER_SPIN_US sets how long a worker polls (default 50, 0: sleep at once,
/// as CAF's sharing policy); read once per process. Serving processes (actorflow-worker,
/// tf.train.Server) do not poll: their device actors run on the I/O thread, so an idle
/// scheduler thread there would only take a core from the cluster's other processes.

#include <caf/fwd.hpp>

#include <chrono>

namespace actorflow {

/// Installs the scheduler above in `config`, its idle workers polling for `idle_poll`
/// (scheduler_spin() for a client, 0 for a server); scheduler.max-threads still applies.
void use_actorflow_scheduler(caf::actor_system_config& config, std::chrono::microseconds idle_poll);

/// How long an idle worker polls before it sleeps (ACTORFLOW_SCHEDULER_SPIN_US).
std::chrono::microseconds scheduler_spin();

/// How long `system`'s idle workers poll: its idle_poll under this scheduler, 0 under CAF's.
std::chrono::microseconds idle_poll_of(caf::actor_system& system);

/// What a blocking wait does first (a client waiting for its step's answer): polls `self`'s
/// mailbox for `duration` at most (its system's idle_poll_of, found once), so that an answer
/// that comes at once does not find the thread asleep. The caller's receive waits after it.
void poll_mailbox_briefly(caf::blocking_actor& self, std::chrono::microseconds duration);

} // namespace actorflow

// Compiled by compile_fail.cmake: as is, it must compile (the messages are right); with one
// WRONG_* macro defined, it must not, and the error must come from CAF's type check of the
// message (no caf::response_type for it) or of the handle conversion. Proves that actorflow's
// protocols are typed: a wrong message is a build error, not an unexpected_message at run time.
#include "actors/protocols/device.hpp"
#include "actors/protocols/master.hpp"
#include "actors/protocols/ps.hpp"
#include "actors/protocols/task.hpp"
#include "actors/session_actor.hpp"

#include <caf/all.hpp>

using namespace actorflow::protocol;

void talk(caf::event_based_actor* self, master_actor master, task_actor task,
          device_actor device, session_actor session, shard_actor shard) {
  self->request(master, caf::infinite, sessions_atom::value);
  self->request(task, caf::infinite, devices_atom::value);
  self->request(device, caf::infinite, deregister_atom::value, std::int64_t{1});
  self->request(session, caf::infinite, close_atom::value);
  self->request(shard, caf::infinite, apply_gd_atom::value, 0.1, actorflow::tensor{});
#if defined(WRONG_MASTER_MESSAGE)
  // A run request needs a master_run_request, not a handle.
  self->request(master, caf::infinite, run_atom::value, std::int64_t{1});
#elif defined(WRONG_DEVICE_MESSAGE)
  // Devices do not list devices: that is the task's protocol.
  self->request(device, caf::infinite, devices_atom::value);
#elif defined(WRONG_SHARD_MESSAGE)
  // A gradient step needs its learning rate.
  self->request(shard, caf::infinite, apply_gd_atom::value, actorflow::tensor{});
#elif defined(WRONG_MASTER_IS_NOT_A_TASK)
  // A master handle does not convert to a task handle (the reverse does).
  task_actor not_a_task = master;
  static_cast<void>(not_a_task);
#endif
}

#pragma once
/// Every atom of actorflow's protocols, in one place: message tags that the typed actor
/// interfaces in actors/protocols/ are made of.
///   self->request(master, timeout, protocol::run_atom::value, request);

#include <caf/atom.hpp>

namespace actorflow::protocol {

// Device protocol (protocols/device.hpp).
using register_atom = caf::atom_constant<caf::atom("register")>;
using deregister_atom = caf::atom_constant<caf::atom("dereg")>;
using peers_atom = caf::atom_constant<caf::atom("peers")>;
using run_atom = caf::atom_constant<caf::atom("run")>;
using tensor_atom = caf::atom_constant<caf::atom("tensor")>;
using abort_atom = caf::atom_constant<caf::atom("abort")>;
using probe_atom = caf::atom_constant<caf::atom("probe")>;
/// All-or-nothing steps: a device's first updates are all held, ready to apply (device ->
/// step coordinator); then apply them (coordinator -> devices, and device -> device).
using prepared_atom = caf::atom_constant<caf::atom("prepared")>;
using commit_atom = caf::atom_constant<caf::atom("commit")>;
using committed_atom = caf::atom_constant<caf::atom("committed")>;

// Master protocol (protocols/master.hpp).
using create_atom = caf::atom_constant<caf::atom("create")>;
using extend_atom = caf::atom_constant<caf::atom("extend")>;
using close_atom = caf::atom_constant<caf::atom("close")>;
using sessions_atom = caf::atom_constant<caf::atom("sessions")>;
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;

// Task protocol (protocols/task.hpp).
using devices_atom = caf::atom_constant<caf::atom("devices")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;
using manifest_atom = caf::atom_constant<caf::atom("manifest")>;
using shard_atom = caf::atom_constant<caf::atom("shard")>;
using task_done_atom = caf::atom_constant<caf::atom("taskdone")>;
using task_joined_atom = caf::atom_constant<caf::atom("taskjoin")>;

// Parameter-shard protocol (protocols/ps.hpp).
using read_atom = caf::atom_constant<caf::atom("read")>;
using assign_atom = caf::atom_constant<caf::atom("assign")>;
using assign_add_atom = caf::atom_constant<caf::atom("assignadd")>;
using apply_gd_atom = caf::atom_constant<caf::atom("applygd")>;
using version_atom = caf::atom_constant<caf::atom("version")>;
using restore_atom = caf::atom_constant<caf::atom("restore")>;
using accumulate_atom = caf::atom_constant<caf::atom("accum")>;

// Collective protocol (protocols/collective.hpp).
using group_atom = caf::atom_constant<caf::atom("group")>;
using collective_atom = caf::atom_constant<caf::atom("collect")>;

} // namespace actorflow::protocol

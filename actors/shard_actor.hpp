#pragma once
/// The actor that serves one parameter shard (protocol: actors/protocols/ps.hpp): its mailbox
/// orders the protocol's reads and updates; the variable_shard it owns shares storage with the
/// device running the graph's ops on the variable.
///   protocol::shard_actor w = spawn_shard_actor(sys, variable_shard{"w", state});

#include "actors/protocols/ps.hpp"
#include "devices/variable_shard.hpp"

#include <caf/fwd.hpp>

namespace actorflow {

protocol::shard_actor spawn_shard_actor(caf::actor_system& sys, variable_shard shard);

} // namespace actorflow

#pragma once
/// Actors that run on CAF's I/O thread (the middleman's multiplexer) as typed brokers: a
/// message from another process reaches them, and theirs reach the network, without waking a
/// scheduler thread. Their handlers must never block: that would stall every connection of the
/// process (docs/design.md, "Threads").
///   using broker_self = io_thread_self<my_state, my_actor>;   // for behavior<broker_self>
///   my_actor a = spawn_on_io_thread<my_actor>(sys, behavior<broker_self>, args...);
/// Include only in translation units that spawn such actors (it brings CAF's I/O headers).

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/typed_broker.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_actor.hpp>

#include <utility>

namespace actorflow {

template <class Handle>
struct typed_broker_of;

template <class... Sigs>
struct typed_broker_of<caf::typed_actor<Sigs...>> {
  using type = caf::io::typed_broker<Sigs...>;
};

/// The self pointer of a stateful actor with Handle's interface that runs as a broker.
template <class State, class Handle>
using io_thread_self = caf::stateful_actor<State, typename typed_broker_of<Handle>::type>*;

/// Spawns `behavior` as a broker of `sys`'s middleman (which it must have).
template <class Handle, class F, class... Ts>
Handle spawn_on_io_thread(caf::actor_system& sys, F behavior, Ts&&... args) {
  return caf::actor_cast<Handle>(sys.middleman().spawn_broker(behavior, std::forward<Ts>(args)...));
}

} // namespace actorflow

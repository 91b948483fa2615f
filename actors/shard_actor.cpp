#include "actors/shard_actor.hpp"

#include "actors/protocols/wire.hpp"

#include <caf/all.hpp>

namespace actorflow {

namespace {

using namespace protocol;

struct shard_state {
  std::optional<variable_shard> shard;
  static inline const char* name = "actorflow.shard";
};

/// An answer, or the status as an "actorflow" error the requester receives.
template <class T>
caf::result<T> answer(result<T> r) {
  if (r)
    return std::move(*r);
  return make_wire_error(r.error().code(), r.error().message());
}

shard_actor::behavior_type shard_behavior(shard_actor::stateful_pointer<shard_state> self,
                                          variable_shard shard) {
  self->state.shard.emplace(std::move(shard));
  auto& s = *self->state.shard;
  return {
    [&s](read_atom) -> caf::result<shard_value> {
      auto now = s.read();
      if (!now)
        return make_wire_error(now.error().code(), now.error().message());
      return shard_value{std::move(now->value), now->version};
    },
    [&s](assign_atom, tensor& value) { return answer(s.assign(std::move(value))); },
    [&s](assign_add_atom, const tensor& delta) { return answer(s.assign_add(delta)); },
    [&s](apply_gd_atom, double learning_rate, const tensor& gradient) {
      return answer(s.apply_gradient_descent(learning_rate, gradient));
    },
    [&s](version_atom) { return s.version(); },
    [&s](restore_atom, shard_value& snapshot) {
      return answer(s.restore({std::move(snapshot.value), snapshot.version}));
    },
  };
}

} // namespace

shard_actor spawn_shard_actor(caf::actor_system& sys, variable_shard shard) {
  return sys.spawn(shard_behavior, std::move(shard));
}

} // namespace actorflow

#include "actors/shard_actor.hpp"

#include "actors/protocols/wire.hpp"
#include "devices/gradient_accumulator.hpp"

#include <caf/all.hpp>

namespace actorflow {

namespace {

using namespace protocol;

struct shard_state {
  std::optional<variable_shard> shard;
  /// Synchronous training: the current round's gradients, and who waits for it to be applied.
  std::optional<gradient_accumulator> accumulator;
  std::vector<caf::typed_response_promise<sync_outcome>> waiting;
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
    [self, &s](accumulate_atom, sync_gradient& offered) -> caf::result<sync_outcome> {
      auto& st = self->state;
      if (!st.accumulator) {
        auto now = s.read();
        if (!now)
          return make_wire_error(now.error().code(), now.error().message());
        st.accumulator.emplace(s.name(), now->value.type(), now->value.shape(),
                               offered.replicas_to_aggregate);
      }
      auto& acc = *st.accumulator;
      auto outcome = acc.offer(offered.local_step, offered.worker, offered.gradient);
      if (!outcome)
        return make_wire_error(outcome.error().code(), outcome.error().message());
      if (*outcome != gradient_accumulator::offer_outcome::accepted)
        return sync_outcome{false, acc.global_step()};
      auto rp = self->make_response_promise<sync_outcome>();
      st.waiting.push_back(rp);
      if (auto average = acc.take_average()) {
        // The round is complete: apply its average once and release everyone in it.
        auto applied = s.apply_gradient_descent(offered.learning_rate, *average);
        auto waiting = std::move(st.waiting);
        st.waiting.clear();
        for (auto& w : waiting) {
          if (applied)
            w.deliver(sync_outcome{true, acc.global_step()});
          else
            w.deliver(make_wire_error(applied.error().code(), applied.error().message()));
        }
      }
      return rp;
    },
  };
}

} // namespace

shard_actor spawn_shard_actor(caf::actor_system& sys, variable_shard shard) {
  return sys.spawn(shard_behavior, std::move(shard));
}

} // namespace actorflow

#include "actors/shard_actor.hpp"

#include "actors/protocols/wire.hpp"
#include "devices/gradient_accumulator.hpp"

#include <caf/all.hpp>

namespace actorflow {

/// In-process only: one of the graph's updates waiting in a shard's mailbox. The message's
/// copies share one pending update, applied once by the shard, or cancelled (the kernel then
/// fails and its step ends) when the message dies unread because the shard stopped first.
struct queued_update {
  struct once {
    pending_update update;
    ~once() {
      if (update)
        update(false);
    }
  };
  std::shared_ptr<once> work;

  void apply() {
    auto update = std::move(work->update);
    work->update = nullptr;
    if (update)
      update(true);
  }
};

} // namespace actorflow

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actorflow::queued_update)

namespace actorflow {

namespace {

using namespace protocol;

using update_atom = caf::atom_constant<caf::atom("update")>;

/// What a shard handles: its protocol and the graph's queued updates.
using shard_actor_impl = shard_actor::extend<caf::reacts_to<update_atom, queued_update>>;

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

shard_actor_impl::behavior_type shard_behavior(shard_actor_impl::stateful_pointer<shard_state> self,
                                               variable_shard shard) {
  self->state.shard.emplace(std::move(shard));
  auto& s = *self->state.shard;
  // The device's update kernels queue behind this mailbox from now on. A weak handle: the
  // variable must not keep its shard alive; once the shard is gone, updates apply in place.
  caf::weak_actor_ptr me{self->ctrl()};
  s.order_updates_through([me](pending_update update) {
    if (auto strong = me.lock()) {
      auto work = std::make_shared<queued_update::once>();
      work->update = std::move(update);
      caf::anon_send(caf::actor_cast<shard_actor_impl>(strong), update_atom::value,
                     queued_update{std::move(work)});
      return;
    }
    update(true);
  });
  return {
    [](update_atom, queued_update& queued) { queued.apply(); },
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

// --- shard_table ---------------------------------------------------------------------------

shard_table::~shard_table() { stop(); }

void shard_table::serve(const std::shared_ptr<device>& dev) {
  std::weak_ptr<shard_table> table = shared_from_this();
  std::weak_ptr<device> served = dev;
  dev->resources().on_variable_created([table, served](const std::string& name) {
    auto self = table.lock();
    auto on = served.lock();
    if (!self || !on)
      return;
    std::lock_guard<std::mutex> guard{self->mutex_};
    if (!self->stopped_ && self->shards_.count(name) == 0)
      self->spawn_locked(name, on);
  });
  std::lock_guard<std::mutex> guard{mutex_};
  devices_.push_back(dev);
}

shard_actor shard_table::spawn_locked(const std::string& name, const std::shared_ptr<device>& dev) {
  auto shard = spawn_shard_actor(system_, variable_shard{name, dev});
  shards_.emplace(name, shard);
  return shard;
}

shard_actor shard_table::find(const std::string& name) {
  std::lock_guard<std::mutex> guard{mutex_};
  if (auto i = shards_.find(name); i != shards_.end())
    return i->second;
  if (stopped_)
    return {};
  for (auto& dev : devices_)
    if (dev->resources().find_variable(name))
      return spawn_locked(name, dev);
  return {};
}

std::vector<std::pair<std::string, shard_actor>> shard_table::all() {
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    for (auto& dev : devices_)
      for (auto& name : dev->resources().variable_names())
        names.push_back(name);
  }
  std::vector<std::pair<std::string, shard_actor>> out;
  for (auto& name : names)
    if (auto shard = find(name))
      out.emplace_back(name, std::move(shard));
  return out;
}

void shard_table::stop() {
  std::map<std::string, shard_actor> shards;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    stopped_ = true;
    shards.swap(shards_);
    for (auto& dev : devices_)
      dev->resources().on_variable_created(nullptr);
    devices_.clear();
  }
  for (auto& [name, shard] : shards)
    caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
}

} // namespace actorflow

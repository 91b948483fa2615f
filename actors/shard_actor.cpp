#include "actors/shard_actor.hpp"

#include "actors/bulk_channel.hpp"
#include "actors/protocols/wire.hpp"
#include "devices/gradient_accumulator.hpp"
#include "graph/metrics.hpp"
#include "devices/worker_lives.hpp"

#include <caf/all.hpp>

#include <string_view>

namespace actorflow {

/// In-process only: one of the graph's updates waiting in a shard's mailbox. The message's
/// copies share one pending update, applied once by the shard, or cancelled (the kernel then
/// fails and its step ends) when the message dies unread because the shard stopped first.
struct queued_update {
  struct once {
    pending_update update;
    update_claim claim;
    ~once() {
      if (update)
        update(update_turn::cancelled);
    }
  };
  std::shared_ptr<once> work;

  /// Applies the update, or lets it succeed untouched when `book` has seen its claim.
  void take_turn(update_fence_book& book) {
    auto update = std::move(work->update);
    work->update = nullptr;
    if (update)
      update(book.admit(work->claim) ? update_turn::apply : update_turn::repeat);
  }
};

} // namespace actorflow

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actorflow::queued_update)

namespace actorflow {

namespace {

using namespace protocol;

using update_atom = caf::atom_constant<caf::atom("update")>;
/// A bulk frame for this shard arrived at its task (shard_table::deliver_bulk).
using bulk_arrived_atom = caf::atom_constant<caf::atom("bulkin")>;
/// A read's frame was written (or failed): (read id, outcome).
using read_written_atom = caf::atom_constant<caf::atom("readout")>;
/// The bound of the synchronous round at this global step ran out.
using round_bound_atom = caf::atom_constant<caf::atom("roundend")>;

/// What a shard handles: its protocol, the graph's queued updates and bulk frames.
using shard_actor_impl =
  shard_actor::extend<caf::reacts_to<update_atom, queued_update>,
                      caf::reacts_to<bulk_arrived_atom, std::string, tensor>,
                      caf::reacts_to<read_written_atom, std::uint64_t, status>,
                      caf::reacts_to<round_bound_atom, std::int64_t>>;

struct shard_state {
  std::optional<variable_shard> shard;
  /// The process's count of this shard's dropped gradients (graph/metrics.hpp).
  metric_counter* stale_gradients = nullptr;
  /// The fenced updates applied (coordinator closures): a repeat of one is refused.
  update_fence_book fences;
  /// Workers' lives, for updates that say where they come from (update_origin).
  worker_lives lives;
  /// Synchronous training: the current round's gradients, and who waits for it to be applied.
  std::optional<gradient_accumulator> accumulator;
  std::vector<caf::typed_response_promise<sync_outcome>> waiting;
  /// The round's learning rate and bound (the first gradient's).
  double learning_rate = 0;
  std::int64_t round_timeout_ms = 0;
  /// Bulk pushes by frame key: frames that came before their message, and messages waiting for
  /// their frame. Bounded by the pushers' one frame per message.
  std::map<std::string, tensor> frames;
  std::map<std::string, std::function<void(tensor)>> awaiting_frames;
  /// Reads over the bulk channel: the task's sender, and the reads whose frame is on its way,
  /// with the version each answers.
  std::shared_ptr<bulk_sender> bulk;
  std::uint64_t next_read = 0;
  std::map<std::uint64_t, std::pair<caf::typed_response_promise<std::int64_t>, std::int64_t>> reads;

  /// Runs `use` with the bulk frame `key`: now when it is here, else when it comes.
  void with_frame(const std::string& key, std::function<void(tensor)> use) {
    if (auto i = frames.find(key); i != frames.end()) {
      auto value = std::move(i->second);
      frames.erase(i);
      use(std::move(value));
      return;
    }
    awaiting_frames.emplace(key, std::move(use));
  }

  void frame_arrived(const std::string& key, tensor value) {
    if (auto i = awaiting_frames.find(key); i != awaiting_frames.end()) {
      auto use = std::move(i->second);
      awaiting_frames.erase(i);
      use(std::move(value));
      return;
    }
    frames.emplace(key, std::move(value));
  }

  static inline const char* name = "actorflow.shard";
};

using shard_self = shard_actor_impl::stateful_pointer<shard_state>;

/// Delivers an update's outcome (the version after it, or its error) to `rp`.
void deliver(caf::typed_response_promise<std::int64_t>& rp, const result<std::int64_t>& r) {
  if (r)
    rp.deliver(*r);
  else
    rp.deliver(make_wire_error(r.error()));
}

/// Applies a closed round's average once and answers everyone who contributed to it.
void apply_round(shard_self self, const tensor& average) {
  auto& st = self->state;
  auto applied = st.shard->apply_gradient_descent(st.learning_rate, average);
  auto waiting = std::move(st.waiting);
  st.waiting.clear();
  for (auto& w : waiting) {
    if (applied)
      w.deliver(sync_outcome{true, st.accumulator->global_step(), st.accumulator->short_rounds(),
                             st.accumulator->stale_dropped(), st.accumulator->last_round().loss,
                             st.accumulator->last_round().accuracy,
                             st.accumulator->last_round().gradients});
    else
      w.deliver(make_wire_error(applied.error()));
  }
}

/// A gradient for the current synchronous round: answered through `rp` once its round has been
/// applied, or at once when stale or wrong.
void accumulate(shard_self self, sync_gradient& offered,
                caf::typed_response_promise<sync_outcome> rp) {
  auto& st = self->state;
  auto& s = *st.shard;
  if (!st.accumulator) {
    auto now = s.read();
    if (!now) {
      rp.deliver(make_wire_error(now.error()));
      return;
    }
    // Rounds start at the first gradient's step: 0 in a new job, the restored global step on a
    // ps restarted under a running job (every worker reads it before pushing again).
    st.accumulator.emplace(s.name(), now->value.type(), now->value.shape(),
                           offered.replicas_to_aggregate, offered.local_step);
    st.round_timeout_ms = offered.round_timeout_ms;
  }
  auto& acc = *st.accumulator;
  auto outcome = acc.offer(offered.local_step, offered.worker, offered.gradient, offered.incarnation,
                           offered.loss, offered.accuracy);
  if (!outcome) {
    rp.deliver(make_wire_error(outcome.error()));
    return;
  }
  if (*outcome != gradient_accumulator::offer_outcome::accepted) {
    // The same count the chief reports as stale_gradients_dropped (stale_dropped()).
    if (*outcome == gradient_accumulator::offer_outcome::stale)
      st.stale_gradients->add();
    rp.deliver(sync_outcome{false, acc.global_step(), acc.short_rounds(), acc.stale_dropped()});
    return;
  }
  st.waiting.push_back(std::move(rp));
  st.learning_rate = offered.learning_rate;
  // The round's first gradient starts its bound: a worker that never comes holds it no longer.
  if (acc.pending() == 1 && st.round_timeout_ms > 0 && !acc.ready())
    self->delayed_send(self, std::chrono::milliseconds(st.round_timeout_ms),
                       round_bound_atom::value, acc.global_step());
  // The round is complete: apply its average once and release everyone in it.
  if (auto average = acc.take_average())
    apply_round(self, *average);
}

/// The error for an update from a retired life of its worker; nothing when it counts.
std::optional<caf::error> refuse_retired(shard_self self, const update_origin& from) {
  if (self->state.lives.admit(from.worker, from.incarnation))
    return std::nullopt;
  return make_wire_error(errc::aborted, "an update of shard '" + self->state.shard->name() +
                                          "' from an earlier life of worker '" + from.worker +
                                          "' was refused: the worker has restarted since");
}

/// An answer, or the status as an "actorflow" error the requester receives.
template <class T>
caf::result<T> answer(result<T> r) {
  if (r)
    return std::move(*r);
  return make_wire_error(r.error());
}

/// `update()`'s version, unless `from` is a retired life of its worker.
template <class Update>
caf::result<std::int64_t> update_from(shard_self self, const update_origin& from, Update update) {
  if (auto refused = refuse_retired(self, from))
    return std::move(*refused);
  return answer(update());
}

/// `update(value)` of the bulk frame `key` once it is here (it comes either way: taken, and
/// dropped when `from` is a retired life of its worker); answered with the version after it.
template <class Update>
caf::typed_response_promise<std::int64_t> bulk_update(shard_self self, const std::string& key,
                                                      const update_origin& from, Update update) {
  auto rp = self->make_response_promise<std::int64_t>();
  self->state.with_frame(key, [self, rp, from, update](tensor value) mutable {
    if (auto refused = refuse_retired(self, from))
      rp.deliver(std::move(*refused));
    else
      deliver(rp, update(value));
  });
  return rp;
}

shard_actor_impl::behavior_type shard_behavior(shard_self self, variable_shard shard,
                                               std::shared_ptr<bulk_sender> bulk) {
  self->state.shard.emplace(std::move(shard));
  self->state.stale_gradients = &default_metrics().counter(
    "actorflow_stale_gradients_total",
    "Gradients a parameter shard dropped as stale (for an earlier round), by variable.",
    {{"variable", self->state.shard->name()}});
  self->state.bulk = std::move(bulk);
  auto& s = *self->state.shard;
  // The device's update kernels queue behind this mailbox from now on. A weak handle: the
  // variable must not keep its shard alive; once the shard is gone, updates apply in place.
  caf::weak_actor_ptr me{self->ctrl()};
  s.order_updates_through([me](pending_update update, update_claim claim) {
    if (auto strong = me.lock()) {
      auto work = std::make_shared<queued_update::once>();
      work->update = std::move(update);
      work->claim = std::move(claim);
      caf::anon_send(caf::actor_cast<shard_actor_impl>(strong), update_atom::value,
                     queued_update{std::move(work)});
      return;
    }
    update(update_turn::apply);
  });
  return {
    [self](update_atom, queued_update& queued) { queued.take_turn(self->state.fences); },
    [&s](read_atom) -> caf::result<shard_value> {
      auto now = s.read();
      if (!now)
        return make_wire_error(now.error());
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
    [self](round_bound_atom, std::int64_t step) {
      // Still that round, and someone came: close it with those who did.
      auto& st = self->state;
      if (!st.accumulator || st.accumulator->global_step() != step)
        return;
      if (auto average = st.accumulator->take_short_average())
        apply_round(self, *average);
    },
    [self](accumulate_atom, sync_gradient& offered) {
      auto rp = self->make_response_promise<sync_outcome>();
      accumulate(self, offered, rp);
      return rp;
    },
    [self, &s](read_atom, const bulk_tensor& reply, const std::string& endpoint)
      -> caf::result<std::int64_t> {
      auto& st = self->state;
      if (!st.bulk)
        return make_wire_error(errc::unimplemented, "the task of shard '" + s.name() +
                                                      "' has no bulk channel to write reads from");
      auto now = s.read();
      if (!now)
        return make_wire_error(now.error());
      auto rp = self->make_response_promise<std::int64_t>();
      auto id = ++st.next_read;
      st.reads.emplace(id, std::make_pair(rp, now->version));
      // The frame shares the stored buffer: an update meanwhile replaces it, never writes it.
      caf::weak_actor_ptr me{self->ctrl()};
      st.bulk->send(endpoint, 0, reply.key, std::move(now->value), [me, id](const status& written) {
        if (auto strong = me.lock())
          caf::anon_send(caf::actor_cast<shard_actor_impl>(strong), read_written_atom::value, id,
                         written);
      });
      return rp;
    },
    [self, &s](read_written_atom, std::uint64_t id, const status& written) {
      auto& reads = self->state.reads;
      auto i = reads.find(id);
      if (i == reads.end())
        return;
      auto [rp, version] = std::move(i->second);
      reads.erase(i);
      if (written.ok())
        rp.deliver(version);
      else
        rp.deliver(make_wire_error(written.code(), "writing shard '" + s.name() +
                                                     "' over the bulk channel: " + written.message()));
    },
    [self](bulk_arrived_atom, const std::string& key, tensor& value) {
      self->state.frame_arrived(key, std::move(value));
    },
    [self, &s](assign_add_atom, const bulk_tensor& delta) {
      return bulk_update(self, delta.key, {}, [&s](const tensor& value) { return s.assign_add(value); });
    },
    [self, &s](apply_gd_atom, double learning_rate, const bulk_tensor& gradient) {
      return bulk_update(self, gradient.key, {}, [&s, learning_rate](const tensor& value) {
        return s.apply_gradient_descent(learning_rate, value);
      });
    },
    [self, &s](assign_add_atom, const tensor& delta, const update_origin& from) {
      return update_from(self, from, [&] { return s.assign_add(delta); });
    },
    [self, &s](apply_gd_atom, double learning_rate, const tensor& gradient,
               const update_origin& from) {
      return update_from(self, from, [&] { return s.apply_gradient_descent(learning_rate, gradient); });
    },
    [self, &s](assign_add_atom, const bulk_tensor& delta, const update_origin& from) {
      return bulk_update(self, delta.key, from, [&s](const tensor& value) { return s.assign_add(value); });
    },
    [self, &s](apply_gd_atom, double learning_rate, const bulk_tensor& gradient,
               const update_origin& from) {
      return bulk_update(self, gradient.key, from, [&s, learning_rate](const tensor& value) {
        return s.apply_gradient_descent(learning_rate, value);
      });
    },
    [self](accumulate_atom, sync_gradient& offered, const bulk_tensor& gradient) {
      auto rp = self->make_response_promise<sync_outcome>();
      self->state.with_frame(gradient.key, [self, offered, rp](tensor value) mutable {
        offered.gradient = std::move(value);
        accumulate(self, offered, std::move(rp));
      });
      return rp;
    },
  };
}

} // namespace

shard_actor spawn_shard_actor(caf::actor_system& sys, variable_shard shard,
                              std::shared_ptr<bulk_sender> bulk) {
  return sys.spawn(shard_behavior, std::move(shard), std::move(bulk));
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
  auto shard = spawn_shard_actor(system_, variable_shard{name, dev}, bulk_);
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

status shard_table::deliver_bulk(const std::string& key, tensor value) {
  // "shard;<variable>;<id>": the variable is between the prefix and the last ';'.
  std::string_view prefix = shard_bulk_prefix;
  auto last = key.rfind(';');
  if (key.compare(0, prefix.size(), prefix) != 0 || last == std::string::npos || last < prefix.size())
    return make_error(errc::invalid_argument, "'" + key + "' is not a shard's bulk key");
  auto variable = key.substr(prefix.size(), last - prefix.size());
  auto shard = find(variable);
  if (!shard)
    return make_error(errc::not_found, "no shard of variable '" + variable + "' here");
  caf::anon_send(caf::actor_cast<shard_actor_impl>(shard), bulk_arrived_atom::value, key,
                 std::move(value));
  return {};
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

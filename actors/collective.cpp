#include "actors/collective.hpp"

#include "actors/bulk_channel.hpp"
#include "devices/collective_execution.hpp"

#include <caf/all.hpp>

#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace actorflow {

namespace {

using namespace protocol;

/// Local only: a collective's bound has passed (group key, instance key).
using collective_deadline_atom = caf::atom_constant<caf::atom("colldead")>;
/// Local only: a piece could not be written to its bulk channel (group, instance, why).
using bulk_failed_atom = caf::atom_constant<caf::atom("collbulk")>;

using member_impl =
  collective_actor::extend<caf::reacts_to<collective_deadline_atom, std::int64_t, std::int64_t>,
                           caf::reacts_to<bulk_failed_atom, std::int64_t, std::int64_t, status>>;

/// Finished collectives remembered per group, so that a late abort or piece for one is
/// dropped instead of waiting for a request that will never come.
constexpr std::size_t remembered_finished = 1024;

/// One collective at this member: waiting for its request (pieces or an abort from faster
/// peers kept), or running.
struct instance_state {
  std::optional<caf::typed_response_promise<tensor>> promise;
  std::unique_ptr<collective_execution> run;
  collective_kind kind = collective_kind::all_reduce;
  /// The result's shape (the request's; an all-gather's concatenation).
  tensor_shape result_shape;
  std::vector<collective_piece_message> early;
  std::uint64_t early_bytes = 0;
  /// Failed before its request came: the request gets this at once.
  std::optional<status> failed;
};

struct group_state {
  protocol::collective_group group;
  std::int32_t rank = 0;
  /// Why the group can run no more collectives (a member was lost).
  std::optional<status> broken;
  std::map<std::int64_t, instance_state> instances;
  std::set<std::int64_t> finished;
  std::deque<std::int64_t> finished_order;
};

struct member_state {
  collective_member_options options;
  std::map<std::int64_t, group_state> groups;
  /// Pieces and aborts for groups this member has not been told yet, by group key.
  std::map<std::int64_t, group_state> unjoined;
  /// Peers monitored, with the groups they are in.
  std::map<caf::actor_addr, std::set<std::int64_t>> peers;

  static inline const char* name = "actorflow.collective_member";
};

using member_self = member_impl::stateful_pointer<member_state>;

std::string describe(const group_state& g, std::int64_t instance, collective_kind kind) {
  return std::string{"collective "} + to_string(kind) + " (group " + std::to_string(g.group.key) +
         ", instance " + std::to_string(instance) + ")";
}

void trace(member_self self, const std::string& line) {
  if (self->state.options.trace)
    self->state.options.trace(line);
}

void remember_finished(group_state& g, std::int64_t instance) {
  g.instances.erase(instance);
  if (!g.finished.insert(instance).second)
    return;
  g.finished_order.push_back(instance);
  if (g.finished_order.size() > remembered_finished) {
    g.finished.erase(g.finished_order.front());
    g.finished_order.pop_front();
  }
}

/// Ends an instance with `why` at this member, and (when `tell_others`) at every other member.
void fail_instance(member_self self, group_state& g, std::int64_t instance, const status& why,
                   bool tell_others) {
  auto& inst = g.instances[instance];
  if (tell_others)
    for (std::size_t r = 0; r < g.group.members.size(); ++r)
      if (static_cast<std::int32_t>(r) != g.rank && g.group.members[r].actor)
        self->send(caf::actor_cast<collective_actor>(g.group.members[r].actor),
                   collective_abort{g.group.key, instance, why});
  trace(self, "rank " + std::to_string(g.rank) + " failed instance " + std::to_string(instance) +
                ": " + why.to_string());
  if (inst.promise) {
    inst.promise->deliver(make_wire_error(why));
    remember_finished(g, instance);
  } else {
    // Its request has not come yet: it gets the error when it does.
    inst.failed = why;
    inst.early.clear();
    inst.early_bytes = 0;
  }
}

/// Sends what the instance's execution has ready; answers its request when it is done.
void pump(member_self self, group_state& g, std::int64_t instance) {
  auto& inst = g.instances[instance];
  auto& bulk = self->state.options.bulk;
  for (auto& p : inst.run->take_sends()) {
    auto& to = g.group.members[static_cast<std::size_t>(p.to)];
    if (bulk && !to.bulk_address.empty() && p.value.bytes() >= bulk_min_bytes() &&
        to.actor.node() != self->node()) {
      // Written by the sender's thread straight from the piece; a failure comes back here.
      auto me = caf::actor_cast<caf::actor>(self);
      auto key = g.group.key;
      auto where = to.name() + " at " + to.bulk_address;
      auto blamed = to.origin();
      bulk->send(to.bulk_address, 0, collective_frame_key(key, instance, g.rank, p.tag),
                 std::move(p.value), [me, key, instance, where, blamed](const status& sent) {
                   // The receiver is to blame, as its lost connection would say.
                   if (!sent.ok())
                     caf::anon_send(me, bulk_failed_atom::value, key, instance,
                                    sent.with_context("sending a piece to " + where)
                                      .with_origin(blamed));
                 });
      continue;
    }
    self->send(caf::actor_cast<collective_actor>(to.actor),
               collective_piece_message{g.group.key, instance, g.rank, p.tag, std::move(p.value)});
  }
  if (!inst.run->finished())
    return;
  auto result = inst.run->take_result();
  auto shaped = result.reshaped(inst.result_shape);
  trace(self, "rank " + std::to_string(g.rank) + " finished instance " + std::to_string(instance));
  inst.promise->deliver(shaped ? std::move(*shaped) : result);
  remember_finished(g, instance);
}

/// Applies a piece to a running instance; a refused piece fails the collective everywhere,
/// blaming its sender.
void apply_piece(member_self self, group_state& g, collective_piece_message& piece) {
  auto& inst = g.instances[piece.instance_key];
  if (piece.from < 0 || piece.from >= g.group.size()) {
    fail_instance(self, g, piece.instance_key,
                  make_error(errc::data_loss, describe(g, piece.instance_key, inst.kind) +
                                                ": a piece from unknown rank " +
                                                std::to_string(piece.from)),
                  true);
    return;
  }
  auto* pending = inst.run->first_pending();
  auto phase = pending ? std::string{to_string(pending->phase)} : std::string{"?"};
  auto round = piece.tag >> 24;
  trace(self, "rank " + std::to_string(g.rank) + " got piece of round " + std::to_string(round) +
                " from " + std::to_string(piece.from) + " in the " + phase);
  auto applied = inst.run->receive(piece.from, piece.tag, std::move(piece.value));
  if (!applied.ok()) {
    auto& sender = g.group.members[static_cast<std::size_t>(piece.from)];
    fail_instance(self, g, piece.instance_key,
                  applied.with_context(describe(g, piece.instance_key, inst.kind) + ": member " +
                                       sender.name())
                    .with_origin(sender.origin()),
                  true);
    return;
  }
  pump(self, g, piece.instance_key);
}

/// Checks a request against its group and makes its execution's buffer; an error says what
/// is wrong with it.
result<tensor> prepare(const group_state& g, const collective_request& req,
                       tensor_shape& result_shape, std::int64_t& elements) {
  auto what = describe(g, req.instance_key, req.kind);
  auto& v = req.value;
  if (!v.is_initialized() || !v.on_host())
    return make_error(errc::invalid_argument, what + ": needs a tensor in host memory");
  if (!collective_supports(v.type()))
    return make_error(errc::invalid_argument,
                      what + ": " + to_string(v.type()) +
                        " is not reduced (float32, float64, int32, int64 are)");
  elements = v.num_elements();
  result_shape = v.shape();
  switch (req.kind) {
    case collective_kind::all_reduce:
      return v.clone();
    case collective_kind::broadcast: {
      if (req.root < 0 || req.root >= g.group.size())
        return make_error(errc::invalid_argument, what + ": root " + std::to_string(req.root) +
                                                    " of " + std::to_string(g.group.size()));
      if (req.root == g.rank)
        return v.clone();
      return tensor{v.type(), v.shape()};
    }
    case collective_kind::all_gather: {
      std::vector<std::int64_t> dims = v.shape().dims();
      if (dims.empty())
        dims.push_back(g.group.size());
      else
        dims[0] *= g.group.size();
      result_shape = tensor_shape{dims};
      tensor buffer{v.type(), result_shape};
      std::memcpy(static_cast<char*>(buffer.raw_data()) + v.bytes() * static_cast<std::size_t>(g.rank),
                  v.raw_data(), v.bytes());
      return buffer;
    }
  }
  return make_error(errc::invalid_argument, what + ": unknown kind");
}

caf::result<tensor> start(member_self self, collective_request& req) {
  auto& st = self->state;
  auto found = st.groups.find(req.group_key);
  if (found == st.groups.end())
    return make_wire_error(errc::failed_precondition,
                           "collective group " + std::to_string(req.group_key) +
                             " is not known to member " + st.options.job + ":" +
                             std::to_string(st.options.task) + ": tell it the group first");
  auto& g = found->second;
  auto what = describe(g, req.instance_key, req.kind);
  if (g.broken)
    return make_wire_error(g.broken->with_context(what));
  if (g.finished.count(req.instance_key) > 0 ||
      (g.instances.count(req.instance_key) > 0 && g.instances[req.instance_key].promise))
    return make_wire_error(errc::already_exists, what + " was started already at this member");
  auto& inst = g.instances[req.instance_key];
  if (inst.failed) {
    auto why = *inst.failed;
    remember_finished(g, req.instance_key);
    return make_wire_error(why);
  }
  std::int64_t elements = 0;
  auto buffer = prepare(g, req, inst.result_shape, elements);
  if (!buffer) {
    // The others would wait for this member: they are told.
    auto why = buffer.error();
    fail_instance(self, g, req.instance_key, why, true);
    remember_finished(g, req.instance_key);
    return make_wire_error(why);
  }
  auto flat = buffer->reshaped(tensor_shape{buffer->num_elements()});
  auto plan = make_collective_schedule(req.kind, g.rank, g.group.size(), elements,
                                       size_of(req.value.type()), req.tuning(), req.root);
  inst.kind = req.kind;
  inst.run = std::make_unique<collective_execution>(std::move(plan), std::move(*flat), req.op);
  inst.promise = self->make_response_promise<tensor>();
  auto promise = *inst.promise;
  auto early = std::exchange(inst.early, {});
  inst.early_bytes = 0;
  if (req.timeout_ms > 0)
    self->delayed_send(self, std::chrono::milliseconds(req.timeout_ms),
                       collective_deadline_atom::value, req.group_key, req.instance_key);
  pump(self, g, req.instance_key);
  for (auto& piece : early) {
    auto i = g.instances.find(req.instance_key);
    if (i == g.instances.end() || !i->second.run)
      break; // failed or finished meanwhile
    apply_piece(self, g, piece);
  }
  return promise;
}

/// The group a piece or abort is for: a joined one, or the place kept for a group not told
/// yet.
group_state& group_for(member_self self, std::int64_t key) {
  auto& st = self->state;
  if (auto g = st.groups.find(key); g != st.groups.end())
    return g->second;
  return st.unjoined[key];
}

void on_piece(member_self self, collective_piece_message& piece) {
  auto& g = group_for(self, piece.group_key);
  if (g.finished.count(piece.instance_key) > 0)
    return;
  auto& inst = g.instances[piece.instance_key];
  if (inst.failed)
    return;
  if (inst.run) {
    apply_piece(self, g, piece);
    return;
  }
  // Before this member's own request: kept, within a bound.
  inst.early_bytes += piece.value.bytes();
  if (inst.early_bytes > self->state.options.early_bytes) {
    auto why = make_error(errc::resource_exhausted,
                          describe(g, piece.instance_key, inst.kind) + ": more than " +
                            std::to_string(self->state.options.early_bytes) +
                            " bytes came before this member's request");
    if (g.group.members.empty()) { // not joined: nobody to tell yet
      inst.failed = why;
      inst.early.clear();
      return;
    }
    fail_instance(self, g, piece.instance_key, why, true);
    return;
  }
  inst.early.push_back(std::move(piece));
}

void on_abort(member_self self, collective_abort& abort) {
  auto& g = group_for(self, abort.group_key);
  if (g.finished.count(abort.instance_key) > 0)
    return;
  auto& inst = g.instances[abort.instance_key];
  if (inst.failed)
    return;
  fail_instance(self, g, abort.instance_key, abort.why, false);
}

/// A peer went down: every group it is in breaks, and what runs there fails everywhere.
void on_down(member_self self, const caf::down_msg& down) {
  auto& st = self->state;
  auto peer = st.peers.find(down.source);
  if (peer == st.peers.end())
    return;
  auto keys = peer->second;
  st.peers.erase(peer);
  for (auto key : keys) {
    auto found = st.groups.find(key);
    if (found == st.groups.end())
      continue;
    auto& g = found->second;
    auto lost = std::find_if(g.group.members.begin(), g.group.members.end(),
                             [&](auto& m) { return m.actor && m.actor.address() == down.source; });
    if (lost == g.group.members.end())
      continue;
    auto rank = static_cast<std::int32_t>(lost - g.group.members.begin());
    auto who = "member " + std::to_string(rank) + " (" + lost->name() + ")";
    if (!g.broken)
      // Worded as the running instances' failure below, so a collective started after the
      // loss names it the same way as one that was waiting when it happened.
      g.broken = make_error(errc::unavailable,
                            "collective group " + std::to_string(key) + ": " + who + " was lost")
                   .with_origin(lost->origin());
    std::vector<std::int64_t> running;
    for (auto& [instance, inst] : g.instances)
      if (!inst.failed)
        running.push_back(instance);
    for (auto instance : running) {
      auto& inst = g.instances[instance];
      auto where = inst.run ? inst.run->describe_wait() : std::string{};
      auto why = make_error(errc::unavailable,
                            describe(g, instance, inst.kind) + ": " + who + " was lost" +
                              (where.empty() ? std::string{} : " while " + where))
                   .with_origin(lost->origin());
      fail_instance(self, g, instance, why, true);
    }
  }
}

void on_deadline(member_self self, std::int64_t key, std::int64_t instance) {
  auto found = self->state.groups.find(key);
  if (found == self->state.groups.end())
    return;
  auto& g = found->second;
  auto i = g.instances.find(instance);
  if (i == g.instances.end() || !i->second.run || i->second.failed)
    return;
  std::string waiting;
  for (auto r : i->second.run->awaited_members())
    waiting += (waiting.empty() ? "" : ", ") + g.group.members[static_cast<std::size_t>(r)].name();
  fail_instance(self, g, instance,
                make_error(errc::deadline_exceeded,
                           describe(g, instance, i->second.kind) + " passed its bound: " +
                             i->second.run->describe_wait() + " (still to come from " + waiting +
                             ")"),
                true);
}

caf::result<std::int32_t> join(member_self self, protocol::collective_group& group) {
  auto& st = self->state;
  auto me = std::find_if(group.members.begin(), group.members.end(), [&](auto& m) {
    return m.actor && m.actor.address() == self->address();
  });
  if (me == group.members.end())
    return make_wire_error(errc::invalid_argument,
                           "collective group " + std::to_string(group.key) +
                             " does not list this member (" + st.options.job + ":" +
                             std::to_string(st.options.task) + ")");
  auto rank = static_cast<std::int32_t>(me - group.members.begin());
  if (auto known = st.groups.find(group.key); known != st.groups.end()) {
    auto same = known->second.group.members.size() == group.members.size() &&
                std::equal(group.members.begin(), group.members.end(),
                           known->second.group.members.begin(),
                           [](auto& a, auto& b) { return a.actor == b.actor; });
    if (!same)
      return make_wire_error(errc::already_exists, "collective group " +
                                                     std::to_string(group.key) +
                                                     " is taken by another group");
    return rank;
  }
  group_state g;
  if (auto kept = st.unjoined.find(group.key); kept != st.unjoined.end()) {
    g = std::move(kept->second);
    st.unjoined.erase(kept);
  }
  g.group = std::move(group);
  g.rank = rank;
  for (auto& m : g.group.members) {
    if (!m.actor || m.actor.address() == self->address())
      continue;
    auto& in = st.peers[m.actor.address()];
    if (in.empty())
      self->monitor(m.actor);
    in.insert(g.group.key);
  }
  st.groups.emplace(g.group.key, std::move(g));
  return rank;
}

member_impl::behavior_type collective_member(member_self self, collective_member_options options) {
  self->state.options = std::move(options);
  self->set_down_handler([self](caf::down_msg& down) { on_down(self, down); });
  return {
    [self](group_atom, protocol::collective_group& group) { return join(self, group); },
    [self](collective_atom, collective_request& req) { return start(self, req); },
    [self](collective_piece_message& piece) { on_piece(self, piece); },
    [self](collective_abort& abort) { on_abort(self, abort); },
    [self](collective_deadline_atom, std::int64_t key, std::int64_t instance) {
      on_deadline(self, key, instance);
    },
    [self](bulk_failed_atom, std::int64_t key, std::int64_t instance, status& why) {
      auto found = self->state.groups.find(key);
      if (found == self->state.groups.end())
        return;
      auto i = found->second.instances.find(instance);
      if (i != found->second.instances.end() && i->second.run && !i->second.failed)
        fail_instance(self, found->second, instance, why, true);
    },
  };
}

} // namespace

collective_actor spawn_collective_member(caf::actor_system& sys,
                                         collective_member_options options) {
  return caf::actor_cast<collective_actor>(sys.spawn(collective_member, std::move(options)));
}

collective_member_info collective_member_of(const collective_actor& handle,
                                            const collective_member_options& options) {
  return {options.job, options.task, options.device, options.incarnation,
          caf::actor_cast<caf::actor>(handle), options.bulk_address};
}

} // namespace actorflow

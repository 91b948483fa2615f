#include "actors/sync_rounds.hpp"

#include "actors/protocols/ps.hpp"
#include "actors/protocols/wire.hpp"
#include "actors/session.hpp"
#include "actors/task_client.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <map>

namespace actorflow {

struct sync_round_client::state {
  caf::actor_system* system = nullptr;
  cluster_spec cluster;
  std::string ps_job;
  sync_round_settings settings;
  std::map<std::string, shard_location> shards;
  shard_pusher pusher;
};

/// A push whose gradients went out: the actor their answers come to, and what it waits for.
class sync_round_client::pending {
public:
  explicit pending(caf::actor_system& sys) : self(sys) {}
  caf::scoped_actor self;
  /// Copies: finding the shards again between the halves changes nothing here.
  std::vector<shard_location> targets;
  std::int64_t round = 0;
};

sync_round_client::sync_round_client(cluster_spec cluster, std::string ps_job,
                                     sync_round_settings settings)
    : sync_round_client(default_actor_system(), std::move(cluster), std::move(ps_job),
                        std::move(settings)) {}

sync_round_client::sync_round_client(caf::actor_system& system, cluster_spec cluster,
                                     std::string ps_job, sync_round_settings settings)
    : state_(std::make_unique<state>()) {
  state_->system = &system;
  state_->cluster = std::move(cluster);
  state_->ps_job = std::move(ps_job);
  state_->settings = std::move(settings);
}

sync_round_client::~sync_round_client() = default;

status sync_round_client::find_shards(const std::vector<std::string>& variables) {
  auto found = actorflow::find_shards(*state_->system, state_->cluster, state_->ps_job,
                                      state_->settings.find_timeout_seconds);
  if (!found)
    return found.error();
  for (auto& name : variables)
    if (found->count(name) == 0)
      return make_error(errc::not_found, "no " + state_->ps_job + " task holds a shard of '" +
                                           name + "'");
  state_->shards = std::move(*found);
  return {};
}

void sync_round_client::use_shards(const std::map<std::string, shard_location>& shards) {
  state_->shards = shards;
}

result<sync_round_outcome>
sync_round_client::push(std::int64_t round,
                        const std::vector<std::pair<std::string, tensor>>& gradients,
                        double loss, double accuracy) {
  auto sent = begin_push(round, gradients, loss, accuracy);
  if (!sent)
    return sent.error();
  return finish_push(**sent);
}

result<std::shared_ptr<sync_round_client::pending>>
sync_round_client::begin_push(std::int64_t round,
                              const std::vector<std::pair<std::string, tensor>>& gradients,
                              double loss, double accuracy) {
  auto& st = *state_;
  std::vector<const shard_location*> targets;
  for (auto& [variable, gradient] : gradients) {
    auto where = st.shards.find(variable);
    if (where == st.shards.end())
      return make_error(errc::failed_precondition,
                        "no shard known for '" + variable + "' (find_shards first)");
    targets.push_back(&where->second);
  }
  // Large gradients travel over the bulk channel; their frames are written before any message
  // that refers to them goes out.
  std::vector<std::optional<protocol::bulk_tensor>> tickets;
  for (std::size_t i = 0; i < gradients.size(); ++i)
    tickets.push_back(st.pusher.ship(*targets[i], gradients[i].first, gradients[i].second));
  if (auto written = st.pusher.flush(); !written.ok()) {
    // The frame that failed went to one of the ticketed shards' tasks: the origin when that
    // is one task, otherwise unknown (a caller then asks the tasks themselves).
    std::optional<task_origin> from;
    bool one_task = true;
    for (std::size_t i = 0; i < tickets.size(); ++i)
      if (tickets[i]) {
        if (from && from->name() != targets[i]->task.name())
          one_task = false;
        from = targets[i]->task;
      }
    return from && one_task ? written.with_origin(*from) : written;
  }
  auto& s = st.settings;
  auto sent = std::make_shared<pending>(*st.system);
  for (auto* where : targets)
    sent->targets.push_back(*where);
  sent->round = round;
  auto& self = sent->self;
  // A shard whose ps dies would never answer: its down message ends the wait at once.
  for (auto* where : targets)
    self->monitor(where->shard);
  for (std::size_t i = 0; i < gradients.size(); ++i) {
    auto offer = protocol::make_sync_gradient(round, s.worker_task, tensor{}, s.learning_rate,
                                              s.replicas_to_aggregate, s.round_timeout_ms,
                                              s.incarnation, loss, accuracy);
    if (tickets[i]) {
      self->send(targets[i]->shard, protocol::accumulate_atom::value, std::move(offer), *tickets[i]);
    } else {
      offer.gradient = gradients[i].second;
      self->send(targets[i]->shard, protocol::accumulate_atom::value, std::move(offer));
    }
  }
  return sent;
}

result<sync_round_outcome> sync_round_client::finish_push(pending& sent) {
  auto& st = *state_;
  auto& s = st.settings;
  auto& self = sent.self;
  auto& targets = sent.targets;
  if (s.drive)
    s.drive();
  auto task_of = [&](const caf::actor_addr& source) -> std::optional<task_origin> {
    for (auto& where : targets)
      if (where.shard.address() == source)
        return where.task;
    return std::nullopt;
  };
  sync_round_outcome out;
  out.global_step = sent.round;
  status failure;
  for (std::size_t answered = 0; answered < targets.size() && failure.ok(); ++answered)
    self->receive(
      [&](protocol::sync_outcome& outcome) {
        if (outcome.applied && !out.applied) {
          out.applied = true;
          out.round_loss = outcome.round_loss;
          out.round_accuracy = outcome.round_accuracy;
          out.round_gradients = outcome.round_gradients;
        }
        out.global_step = std::max(out.global_step, outcome.global_step);
        out.short_rounds = std::max(out.short_rounds, outcome.short_rounds);
        out.stale_dropped = std::max(out.stale_dropped, outcome.stale_dropped);
      },
      [&](caf::error& err) {
        auto refused = status_from_error(err).with_context("pushing a gradient to its shard");
        auto from = task_of(caf::actor_cast<caf::actor_addr>(self->current_sender()));
        failure = from ? refused.with_origin(*from) : refused;
      },
      [&](caf::down_msg& down) {
        failure = make_error(errc::unavailable, "a shard on a " + st.ps_job +
                                                  " task went down (" +
                                                  st.system->render(down.reason) +
                                                  ") during a synchronous round");
        if (auto from = task_of(down.source))
          failure = failure.with_origin(*from);
      },
      caf::after(s.answer_bound) >> [&] {
        failure = make_error(errc::deadline_exceeded,
                             "a synchronous round did not complete within " +
                               std::to_string(s.answer_bound.count() / 1000) + " s");
      });
  for (auto& where : targets)
    self->demonitor(where.shard.address());
  if (!failure.ok())
    return failure;
  return out;
}

} // namespace actorflow

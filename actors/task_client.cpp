#include "actors/task_client.hpp"
#include "actors/transport_guard.hpp"

#include "actors/bulk_channel.hpp"
#include "actors/tensor_route.hpp"
#include "actors/protocols/task.hpp"
#include "actors/protocols/wire.hpp"
#include "actors/session.hpp"
#include "actors/session_master.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>

namespace actorflow {

result<protocol::task_actor> reach_task(caf::actor_system& sys, const cluster_spec& cluster,
                                        const std::string& job, int index, double timeout_seconds,
                                        std::string& name, std::string& address,
                                        double patience_seconds) {
  name = task_name(job, index);
  if (!sys.has_middleman())
    return make_error(errc::failed_precondition,
                      "reaching the cluster's tasks needs CAF's middleman in the actor system");
  auto found = cluster.address(job, index);
  if (!found)
    return found.error();
  address = *found;
  auto split = parse_host_port(address);
  if (!split)
    return split.error();
  auto reached = reach_published_actor(sys, split->host, split->port, timeout_seconds,
                                       connect_patience{patience_seconds, "task " + name});
  if (!reached)
    return reached.error()
      .with_context("cannot reach task " + name + " at " + address)
      .with_origin({job, index, 0});
  if (!sys.assignable<protocol::task_actor>(reached->interface))
    return make_error(errc::unavailable, "the actor at " + address + " is not an actorflow task")
      .with_origin({job, index, 0});
  return caf::actor_cast<protocol::task_actor>(reached->actor);
}

status probe_task(caf::actor_system& sys, const cluster_spec& cluster, const std::string& job,
                  int index, double timeout_seconds) {
  std::string name, address;
  auto target = reach_task(sys, cluster, job, index, timeout_seconds, name, address);
  if (!target)
    return target.error();
  caf::scoped_actor self{sys};
  status outcome;
  self->request(*target, request_bound(timeout_seconds), protocol::probe_atom::value)
    .receive([](std::int64_t) {},
             [&](caf::error& err) {
               outcome = status_from_error(err)
                           .with_context("probing task " + name + " at " + address)
                           .with_origin({job, index, 0});
             });
  return outcome;
}

status probe_job(caf::actor_system& sys, const cluster_spec& cluster, const std::string& job,
                 double timeout_seconds) {
  for (int i = 0; i < cluster.num_tasks(job); ++i)
    AF_RETURN_IF_ERROR(probe_task(sys, cluster, job, i, timeout_seconds));
  return {};
}

status probe_job(const cluster_spec& cluster, const std::string& job, double timeout_seconds) {
  return probe_job(default_actor_system(), cluster, job, timeout_seconds);
}

double probe_after_step_seconds(double step_timeout_seconds) {
  return std::clamp(step_timeout_seconds / 4, 0.2, 2.0);
}

bool connection_like(const status& failure) {
  switch (failure.code()) {
    case errc::unavailable:
    case errc::deadline_exceeded:
    case errc::aborted:
    case errc::data_loss:
      return true;
    default:
      return false;
  }
}

namespace {

/// Sends every task of `to_job` the request `ask` makes and waits (bounded) for each answer.
/// `gone_is_fine`: a task that cannot be reached, or that stops while answering, counts as
/// told (it stopped, which is what a done report asks).
template <class Ask>
status tell_tasks(caf::actor_system& sys, const cluster_spec& cluster, const std::string& to_job,
                  const std::string& what, double timeout_seconds, bool gone_is_fine, Ask ask) {
  auto bound = request_bound(timeout_seconds);
  for (int i = 0; i < cluster.num_tasks(to_job); ++i) {
    std::string name, address;
    auto target = reach_task(sys, cluster, to_job, i, timeout_seconds, name, address);
    auto where = "telling task " + name + " at " + address + " that " + what;
    if (!target) {
      if (gone_is_fine && target.error().code() == errc::unavailable)
        continue; // gone already: it no longer serves anyone
      return target.error().with_context(where);
    }
    caf::scoped_actor self{sys};
    status outcome;
    ask(self, *target, bound)
      .receive([](std::int32_t) {},
               [&](caf::error& err) {
                 if (!(gone_is_fine && err == caf::sec::request_receiver_down))
                   outcome = status_from_error(err).with_context(where);
               });
    AF_RETURN_IF_ERROR(outcome);
  }
  return {};
}

} // namespace

result<std::map<std::string, shard_location>>
find_shards(caf::actor_system& sys, const cluster_spec& cluster, const std::string& job,
            double timeout_seconds) {
  std::map<std::string, shard_location> shards;
  auto bound = request_bound(timeout_seconds);
  for (int i = 0; i < cluster.num_tasks(job); ++i) {
    std::string name, address;
    auto target = reach_task(sys, cluster, job, i, timeout_seconds, name, address);
    if (!target)
      return target.error().with_context("asking for the shards");
    caf::scoped_actor self{sys};
    status outcome;
    self->request(*target, bound, protocol::manifest_atom::value)
      .receive(
        [&](protocol::task_manifest& manifest) {
          for (auto& [variable, shard] : manifest.shards)
            shards[variable] = shard_location{shard, manifest.devices.bulk_address,
                                              task_origin{job, i, manifest.devices.incarnation}};
        },
        [&](caf::error& err) {
          outcome = status_from_error(err)
                      .with_context("asking task " + name + " for its shards")
                      .with_origin({job, i, 0});
        });
    AF_RETURN_IF_ERROR(outcome);
  }
  return shards;
}

status report_task_done(caf::actor_system& sys, const cluster_spec& cluster,
                        const std::string& to_job, const std::string& job, int task,
                        double timeout_seconds) {
  return tell_tasks(sys, cluster, to_job, job + " task " + std::to_string(task) + " finished",
                    timeout_seconds, true, [&](caf::scoped_actor& self, auto& target, auto bound) {
                      return self->request(target, bound, protocol::task_done_atom::value, job,
                                           static_cast<std::int32_t>(task));
                    });
}

status report_task_joined(caf::actor_system& sys, const cluster_spec& cluster,
                          const std::string& to_job, const std::string& job, int task,
                          const protocol::task_actor& self_task, double timeout_seconds) {
  protocol::task_presence presence = self_task;
  return tell_tasks(sys, cluster, to_job, job + " task " + std::to_string(task) + " uses it",
                    timeout_seconds, false, [&](caf::scoped_actor& self, auto& target, auto bound) {
                      return self->request(target, bound, protocol::task_joined_atom::value, job,
                                           static_cast<std::int32_t>(task), presence);
                    });
}

// --- shard_pusher ----------------------------------------------------------------------------

/// Frames shipped and not yet written, and the first failure; shared with the writer threads.
struct shard_pusher::pending {
  std::mutex mutex;
  std::condition_variable written;
  int outstanding = 0;
  status failure;
};

namespace {

/// "<16 hex digits>.": the start of bulk keys unique across the pushers and pullers of every
/// process a shard hears from.
std::string random_key_prefix() {
  std::random_device entropy;
  char prefix[40];
  std::snprintf(prefix, sizeof prefix, "%08x%08x.", entropy(), entropy());
  return prefix;
}

} // namespace

shard_pusher::shard_pusher()
  : pending_(std::make_shared<pending>()), sender_(std::make_shared<bulk_sender>()),
    id_prefix_(random_key_prefix()) {}

shard_pusher::~shard_pusher() {
  static_cast<void>(flush());
  sender_->close();
}

std::optional<protocol::bulk_tensor>
shard_pusher::ship(const shard_location& where, const std::string& variable, const tensor& value) {
  // The pusher talks to shards of other processes (the caller's own task reads them directly).
  if (choose_tensor_route({false, true, where.bulk_address, value.bytes()}) != tensor_route::bulk)
    return std::nullopt;
  protocol::bulk_tensor ticket{std::string{protocol::shard_bulk_prefix} + variable + ";" +
                               id_prefix_ + std::to_string(++next_id_)};
  {
    std::lock_guard<std::mutex> guard{pending_->mutex};
    ++pending_->outstanding;
  }
  auto what = "pushing '" + variable + "' over the bulk channel to " + where.bulk_address;
  sender_->send(where.bulk_address, 0, ticket.key, value,
                [state = pending_, what](const status& s) {
                  std::lock_guard<std::mutex> guard{state->mutex};
                  if (!s.ok() && state->failure.ok())
                    state->failure = s.with_context(what);
                  if (--state->outstanding == 0)
                    state->written.notify_all();
                });
  return ticket;
}

status shard_pusher::flush() {
  std::unique_lock<std::mutex> lock{pending_->mutex};
  pending_->written.wait(lock, [this] { return pending_->outstanding == 0; });
  auto failure = std::move(pending_->failure);
  pending_->failure = status{};
  return failure;
}

// --- shard_puller ----------------------------------------------------------------------------

/// Frames that arrived, by key, until their pull takes them.
struct shard_puller::inbox {
  std::mutex mutex;
  std::condition_variable arrived;
  std::map<std::string, tensor> frames;
  std::uint64_t next_id = 0;
  std::string id_prefix;
};

result<std::unique_ptr<shard_puller>> shard_puller::listen(const std::string& host) {
  auto frames = std::make_shared<inbox>();
  frames->id_prefix = random_key_prefix();
  auto endpoint = bulk_endpoint::listen(
    host, [weak = std::weak_ptr<inbox>(frames)](std::int64_t, std::string key, tensor value) {
      auto in = weak.lock();
      if (!in)
        return make_error(errc::unavailable, "the shard puller has stopped");
      {
        std::lock_guard<std::mutex> guard{in->mutex};
        in->frames[std::move(key)] = std::move(value);
      }
      in->arrived.notify_all();
      return status{};
    });
  if (!endpoint)
    return endpoint.error().with_context("listening for shard reads");
  return std::unique_ptr<shard_puller>{new shard_puller(std::move(frames), std::move(*endpoint))};
}

shard_puller::shard_puller(std::shared_ptr<inbox> arrived, std::unique_ptr<bulk_endpoint> endpoint)
  : inbox_(std::move(arrived)), endpoint_(std::move(endpoint)) {}

shard_puller::~shard_puller() = default;

const std::string& shard_puller::address() const { return endpoint_->address(); }

result<protocol::shard_value> shard_puller::pull(caf::actor_system& sys, const shard_location& where,
                                                 const std::string& variable,
                                                 double timeout_seconds) {
  std::string key;
  {
    std::lock_guard<std::mutex> guard{inbox_->mutex};
    key = "read;" + variable + ";" + inbox_->id_prefix + std::to_string(++inbox_->next_id);
  }
  auto what = "reading shard '" + variable + "' over the bulk channel";
  auto bound = request_bound(timeout_seconds);
  caf::scoped_actor self{sys};
  std::int64_t version = 0;
  status outcome;
  self->request(where.shard, bound, protocol::read_atom::value, protocol::bulk_tensor{key},
                address())
    .receive([&](std::int64_t v) { version = v; },
             [&](caf::error& err) { outcome = status_from_error(err).with_context(what); });
  AF_RETURN_IF_ERROR(outcome);
  // Written before the answer came; on its way through the endpoint's reader at most.
  std::unique_lock<std::mutex> lock{inbox_->mutex};
  auto ready = [&] { return inbox_->frames.count(key) > 0; };
  if (timeout_seconds <= 0)
    inbox_->arrived.wait(lock, ready);
  else if (!inbox_->arrived.wait_for(lock, std::chrono::duration<double>(timeout_seconds), ready))
    return make_error(errc::deadline_exceeded,
                      what + ": the frame did not arrive within " +
                        std::to_string(timeout_seconds) + " s");
  auto value = std::move(inbox_->frames.at(key));
  inbox_->frames.erase(key);
  return protocol::shard_value{std::move(value), version};
}

} // namespace actorflow

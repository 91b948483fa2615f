#include "actors/device_actor.hpp"

#include "actors/io_thread.hpp"
#include "actors/logging.hpp"
#include "actors/task_client.hpp"
#include "actors/tensor_route.hpp"
#include "graph/device_name.hpp"

#include "devices/commit_gate.hpp"
#include "devices/executor.hpp"
#include "devices/rendezvous.hpp"
#include "devices/thread_pool.hpp"
#include "graph/metrics.hpp"
#include "graph/rendezvous_key.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace actorflow {

namespace {

using namespace protocol;

/// Local only: a bulk send of the step finished (its outcome is in the step's bulk_tracker).
using bulk_sent_atom = caf::atom_constant<caf::atom("bulksent")>;
/// Local only: the executor finished a step on this device.
using finished_atom = caf::atom_constant<caf::atom("finished")>;

/// Local only: every first update of an all-or-nothing step is held here (commit_gate).
using armed_atom = caf::atom_constant<caf::atom("armed")>;
/// Local only: the grace for a commit of a prepared step whose master went away is over: ask
/// the step's other devices whether they committed.
using orphan_grace_atom = caf::atom_constant<caf::atom("orphangr")>;
/// Local only: a step of this device failed here (a node, a send); if it was prepared, its held
/// updates wait for the coordinator's decision, which this failure, answered at once, asks for.
using step_failed_atom = caf::atom_constant<caf::atom("stepfail")>;

/// What a device actor handles: the public protocol plus the messages it sends itself from
/// the pools' threads. Handed out as protocol::device_actor, which hides the latter.
using device_actor_impl =
  device_actor::extend<caf::reacts_to<finished_atom, std::int64_t, step_result>,
                       caf::reacts_to<bulk_sent_atom, std::int64_t>,
                       caf::reacts_to<armed_atom, std::int64_t>,
                       caf::reacts_to<orphan_grace_atom, std::int64_t, status>,
                       caf::reacts_to<step_failed_atom, std::int64_t, status>>;

/// How long a device that holds a prepared step waits, once its master went away, for a commit
/// still on its way, before it asks the step's other devices whether they committed; and how
/// long it waits for their answers before it gives the step up.
constexpr auto orphan_commit_grace = std::chrono::seconds(1);

/// Steps a device remembers having committed, for the others that ask after their master went
/// away (their step ended here meanwhile).
constexpr std::size_t remembered_commits = 4096;

/// A step's tensors in flight on the bulk channel: the step's result waits for them, so a
/// failed transfer fails the step on the sending device, naming the receiver.
struct bulk_tracker {
  std::atomic<int> outstanding{0};
  std::mutex mutex;
  status failure;

  void fail(const status& reason) {
    std::lock_guard<std::mutex> lock{mutex};
    if (failure.ok())
      failure = reason;
  }

  status first_failure() {
    std::lock_guard<std::mutex> lock{mutex};
    return failure;
  }
};

/// Rendezvous keys by their text, parsed once when a partition is registered.
using key_map = std::unordered_map<std::string, rendezvous_key>;

/// Every _Send/_Recv key of `partition`, parsed; an error names the node whose key is bad.
result<std::shared_ptr<const key_map>> parse_keys(const graph& partition) {
  auto keys = std::make_shared<key_map>();
  for (std::size_t i = 0; i < partition.size(); ++i) {
    auto& n = partition.at(static_cast<int>(i));
    if (n.op != "_Send" && n.op != "_Recv")
      continue;
    auto* text = n.attr<std::string>("key");
    if (text == nullptr)
      return make_error(errc::invalid_argument, n.op + " node '" + n.name + "' has no key");
    auto parsed = rendezvous_key::parse(*text);
    if (!parsed)
      return parsed.error().with_context(n.op + " node '" + n.name + "'");
    keys->emplace(*text, std::move(*parsed));
  }
  return std::shared_ptr<const key_map>{std::move(keys)};
}

struct device_step {
  std::shared_ptr<step_execution> execution;
  std::shared_ptr<rendezvous> meeting_point = std::make_shared<rendezvous>();
  caf::typed_response_promise<step_result> promise;
  std::shared_ptr<bulk_tracker> bulk = std::make_shared<bulk_tracker>();
  /// The step's result while bulk sends are still in flight.
  std::optional<step_result> finished;
  /// Bytes of the tensors that arrived before the step started here (0 once it has), in all
  /// and by sending task.
  std::uint64_t early_bytes = 0;
  std::map<std::string, std::uint64_t> early_by_peer;
  /// Who asked for the step (its master's step coordinator): if it goes away, nobody will
  /// abort the step or send what it still waits for. An all-or-nothing step tells it once
  /// every first update is held.
  caf::strong_actor_ptr requester;
  /// All-or-nothing steps: the gate holding the first updates, whether the commit came, and
  /// the step's other devices holding first updates (asked when the coordinator went away).
  std::shared_ptr<commit_gate> gate;
  bool committed = false;
  std::vector<std::string> participants;
  /// Answers still to come from the participants asked whether they committed.
  std::size_t commit_answers_due = 0;
  /// When the run request came, for the step latency metric.
  std::chrono::steady_clock::time_point began;
};

struct device_state {
  std::shared_ptr<device> dev;
  /// Partition steps of this device, from request to answer (graph/metrics.hpp).
  std::unique_ptr<step_metrics> metrics;
  metrics_registry::collector_handle memory_metrics;
  device_actor_options options;
  std::shared_ptr<const std::map<std::string, device_actor>> peers =
    std::make_shared<const std::map<std::string, device_actor>>();
  std::shared_ptr<const std::map<std::string, std::string>> bulk_addresses =
    std::make_shared<const std::map<std::string, std::string>>();
  /// Each peer device's task incarnation, where known.
  std::map<std::string, std::uint64_t> incarnations;
  std::unordered_map<std::int64_t, std::shared_ptr<const executor_plan>> plans;
  /// The keys of each registered partition (read by its steps' send hooks on pool threads).
  std::unordered_map<std::int64_t, std::shared_ptr<const key_map>> plan_keys;
  /// Every key any registered partition used: tensors arriving for them need no parsing.
  key_map known_keys;
  std::unordered_map<std::int64_t, device_step> steps;
  /// Requesters of steps this actor monitors.
  std::set<caf::actor_addr> requesters;
  /// Tensors arriving in chunks from other processes, until their last chunk.
  tensor_assembler assembler{max_tensor_bytes()};
  /// Steps that ended recently: late tensors for them are dropped instead of piling up.
  std::unordered_set<std::int64_t> ended;
  std::deque<std::int64_t> ended_order;
  /// Steps committed lately (remembered_commits of them), for committed_atom.
  std::unordered_set<std::int64_t> committed;
  std::deque<std::int64_t> committed_order;

  /// Applies the held first updates of `step` and remembers it committed.
  void commit(std::int64_t step_id, device_step& step) {
    trace("commit step " + std::to_string(step_id));
    step.committed = true;
    step.gate->commit();
    if (committed.insert(step_id).second) {
      committed_order.push_back(step_id);
      if (committed_order.size() > remembered_commits) {
        committed.erase(committed_order.front());
        committed_order.pop_front();
      }
    }
  }
  /// Steps holding tensors that came before the step did, oldest first, and their bytes.
  std::deque<std::pair<std::chrono::steady_clock::time_point, std::int64_t>> early_steps;
  std::uint64_t early_bytes = 0;
  /// Early bytes by sending task ("/job:j/replica:0/task:n").
  std::map<std::string, std::uint64_t> early_bytes_by_peer;

  /// Accounts a tensor of `bytes` from device `sender` arriving for `step_id`. Before the step
  /// has started here it is held as early, after dropping the early steps that outlived their
  /// time or, oldest first, those over the byte budget. False when the tensor is to be dropped:
  /// that dropped `step_id` itself, or its sending task's early tensors would exceed their
  /// budget.
  bool hold_if_early(std::int64_t step_id, std::uint64_t bytes, const std::string& sender) {
    if (auto started_step = steps.find(step_id); started_step != steps.end() &&
        (started_step->second.execution || started_step->second.meeting_point->aborted()))
      return true;
    auto peer = sender.substr(0, sender.find("/device:"));
    if (early_bytes_by_peer[peer] + bytes > options.early_tensor_peer_budget_bytes) {
      auto line = "dropped a tensor of " + std::to_string(bytes) + " bytes from " + peer +
                  " for step " + std::to_string(step_id) + ": its early tensors would exceed " +
                  std::to_string(options.early_tensor_peer_budget_bytes) + " bytes";
      trace(line);
      log_verbose(dev->full_name() + ": " + line);
      return false;
    }
    steps[step_id];
    auto now = std::chrono::steady_clock::now();
    while (!early_steps.empty() && now - early_steps.front().first >= options.early_tensor_ttl)
      drop_early(early_steps.front().second, "did not start within " +
                                               std::to_string(options.early_tensor_ttl.count()) +
                                               " ms");
    while (!early_steps.empty() && early_bytes + bytes > options.early_tensor_budget_bytes &&
           early_steps.front().second != step_id)
      drop_early(early_steps.front().second,
                 "waited longest while early tensors exceeded " +
                   std::to_string(options.early_tensor_budget_bytes) + " bytes");
    auto i = steps.find(step_id);
    if (i == steps.end())
      return false;
    if (i->second.early_bytes == 0)
      early_steps.emplace_back(now, step_id);
    i->second.early_bytes += bytes;
    i->second.early_by_peer[peer] += bytes;
    early_bytes += bytes;
    early_bytes_by_peer[peer] += bytes;
    return true;
  }

  /// The step's early tensors no longer count against the budgets.
  void release_early(device_step& step) {
    early_bytes -= step.early_bytes;
    step.early_bytes = 0;
    for (auto& [peer, bytes] : step.early_by_peer)
      if ((early_bytes_by_peer[peer] -= bytes) == 0)
        early_bytes_by_peer.erase(peer);
    step.early_by_peer.clear();
  }

  /// The step started: its early tensors belong to it now.
  void started(device_step& step) { release_early(step); }

  void drop_early(std::int64_t step_id, const std::string& why) {
    early_steps.pop_front();
    auto i = steps.find(step_id);
    if (i == steps.end() || i->second.early_bytes == 0)
      return; // started meanwhile (or already gone): its entry was stale
    auto line = "dropped " + std::to_string(i->second.early_bytes) + " bytes of tensors for step " +
                std::to_string(step_id) + ", which " + why;
    release_early(i->second);
    trace(line);
    log_verbose(dev->full_name() + ": " + line);
    steps.erase(i);
    mark_ended(step_id);
  }

  void trace(const std::string& line) const {
    if (options.trace)
      options.trace(dev->name().local_name() + " " + line);
  }

  /// Fails `step_id` on this device with `reason`; a step that has not started here yet fails
  /// as soon as it does (its rendezvous refuses every receive). Drops its partial tensors.
  void fail_step(std::int64_t step_id, const status& reason) {
    assembler.drop_step(step_id);
    auto& step = steps[step_id];
    if (step.execution)
      step.execution->abort(reason);
    else
      step.meeting_point->abort(reason);
  }

  /// The key of a tensor arriving for this device, checked: it parses, names this device as
  /// receiver, and names its sender's current incarnation when the peer table knows it (a
  /// tensor from a restarted task's earlier life is refused).
  result<rendezvous_key> admit(const std::string& text) const {
    auto found = known_keys.find(text);
    auto key = found != known_keys.end() ? result<rendezvous_key>{found->second}
                                         : rendezvous_key::parse(text);
    if (!key)
      return key.error();
    if (key->recv_device != dev->full_name())
      return make_error(errc::invalid_argument, "it is addressed to " + key->recv_device);
    auto known = incarnations.find(key->send_device);
    if (known != incarnations.end() && known->second != key->send_incarnation)
      return make_error(errc::failed_precondition,
                        "it comes from an earlier life of " + key->send_device + " (incarnation " +
                          incarnation_to_string(key->send_incarnation) + ", now " +
                          incarnation_to_string(known->second) + ")");
    return key;
  }

  void mark_ended(std::int64_t step) {
    assembler.drop_step(step);
    ended.insert(step);
    ended_order.push_back(step);
    if (ended_order.size() > 4096) {
      ended.erase(ended_order.front());
      ended_order.pop_front();
    }
  }

  static inline const char* name = "actorflow.device";
};

/// The receiving device a key names; empty for a key that does not parse.
std::string receiver_of(const std::string& key) {
  auto parsed = rendezvous_key::parse(key);
  return parsed ? parsed->recv_device : std::string{};
}

/// Answers the step's run request with `result`, unless a failed bulk send says otherwise.
using device_self = device_actor_impl::stateful_pointer<device_state>;

/// The same actor as a broker: it runs on the middleman's I/O thread (see spawn_device_actor).
using device_broker_self = io_thread_self<device_state, device_actor_impl>;

/// Answers the step's requester (once) and counts the step in the latency metric. A failed
/// bulk send is the root cause of what it made fail.
void deliver_answer(device_state& st, device_step& step, step_result result) {
  // Answered already: a prepared step that failed is answered before it ends (its held
  // updates waiting for the coordinator's decision).
  if (!step.promise.pending())
    return;
  auto bulk_failure = step.bulk->first_failure();
  if (!bulk_failure.ok() && (result.outcome.ok() || result.outcome.code() == errc::aborted))
    result.outcome = bulk_failure;
  st.metrics->record(result.outcome.ok(),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - step.began)
                       .count());
  step.promise.deliver(std::move(result));
}

template <class Self>
void answer_step(Self self,
                 std::unordered_map<std::int64_t, device_step>::iterator i, step_result result) {
  auto& st = self->state;
  auto step_id = i->first;
  deliver_answer(st, i->second, std::move(result));
  st.steps.erase(i);
  st.mark_ended(step_id);
}

template <class Self>
device_actor_impl::behavior_type device_behavior(Self self, std::shared_ptr<device> dev,
                                                 device_actor_options options) {
  self->state.dev = std::move(dev);
  self->state.metrics = std::make_unique<step_metrics>(
    "actorflow_device", "partition steps of a device, from request to answer",
    metric_labels{{"device", self->state.dev->full_name()}});
  self->state.memory_metrics = report_device_memory(self->state.dev);
  self->state.options = std::move(options);
  self->set_down_handler([=](caf::down_msg& down) {
    // A master that died mid-step (its process killed, its connection lost) leaves its steps
    // here waiting for tensors that will not come: they end now, not never.
    auto& st = self->state;
    st.requesters.erase(down.source);
    std::vector<std::int64_t> orphaned;
    for (auto& [step_id, step] : st.steps)
      if (caf::actor_cast<caf::actor_addr>(step.requester) == down.source)
        orphaned.push_back(step_id);
    for (auto step_id : orphaned) {
      st.trace("orphaned step " + std::to_string(step_id));
      auto reason = make_error(errc::aborted, "step " + std::to_string(step_id) + " aborted on " +
                                                st.dev->full_name() +
                                                ": the master that ran it went away (" +
                                                self->system().render(down.reason) + ")");
      auto& step = st.steps[step_id];
      // Prepared: the master may have committed on another device just before it went. Give a
      // commit on its way a moment, then ask the others (orphan_grace_atom).
      if (step.gate && step.gate->armed() && !step.committed) {
        self->delayed_send(self, orphan_commit_grace, orphan_grace_atom::value, step_id, reason);
        continue;
      }
      st.fail_step(step_id, reason);
    }
  });
  return {
    [=](register_atom, const partition_registration& r) -> status {
      auto& st = self->state;
      st.trace("register " + std::to_string(r.handle));
      auto limit = session_memory_limit(
        r.memory_limit_bytes > 0 ? static_cast<std::size_t>(r.memory_limit_bytes) : 0);
      std::shared_ptr<memory_budget> budget;
      if (limit > 0)
        budget = std::make_shared<memory_budget>(
          "the session's partition " + std::to_string(r.handle) + " on " + st.dev->full_name(), limit);
      auto plan = executor_plan::make(r.partition, *st.dev, kernel_registry::global(),
                                      std::move(budget), r.session);
      if (!plan)
        return plan.error();
      auto keys = parse_keys(*r.partition);
      if (!keys)
        return keys.error().with_context("on " + st.dev->full_name());
      st.known_keys.insert((*keys)->begin(), (*keys)->end());
      st.plans[r.handle] = std::move(*plan);
      st.plan_keys[r.handle] = std::move(*keys);
      return {};
    },
    [=](deregister_atom, std::int64_t handle) -> status {
      self->state.trace("deregister " + std::to_string(handle));
      self->state.plans.erase(handle);
      self->state.plan_keys.erase(handle);
      return {};
    },
    [=](peers_atom, const peer_table& table) {
      // Merged, not replaced: several masters (one per between-graph worker) each tell a ps
      // about the devices they use. A device named again takes its newest actor, address and
      // incarnation (its task restarted). Steps in flight keep the tables they started with.
      auto& st = self->state;
      auto peers = *st.peers;
      for (auto& [name, actor] : table.devices)
        peers[name] = actor;
      auto bulk = *st.bulk_addresses;
      for (auto& [name, address] : table.bulk_addresses)
        bulk[name] = address;
      for (auto& [name, incarnation] : table.incarnations)
        st.incarnations[name] = incarnation;
      st.peers = std::make_shared<const std::map<std::string, device_actor>>(std::move(peers));
      st.bulk_addresses = std::make_shared<const std::map<std::string, std::string>>(std::move(bulk));
      if (st.options.on_peers)
        st.options.on_peers(table);
    },
    [=](run_atom, const run_request& request) -> caf::result<step_result> {
      auto& st = self->state;
      st.trace("run step " + std::to_string(request.step_id));
      auto plan = st.plans.find(request.handle);
      if (plan == st.plans.end())
        return step_result{make_error(errc::not_found, "partition " +
                                                         std::to_string(request.handle) +
                                                         " is not registered on " +
                                                         st.dev->full_name()),
                           {}};
      // Before the promise takes the sender out of the message.
      auto requester = self->current_sender();
      auto promise = self->template make_response_promise<step_result>();
      auto& step = st.steps[request.step_id];
      // The entry may have been made earlier, by a tensor that came first.
      step.began = std::chrono::steady_clock::now();
      st.started(step);
      step.promise = promise;
      if (requester) {
        step.requester = requester;
        if (st.requesters.insert(caf::actor_cast<caf::actor_addr>(requester)).second)
          self->monitor(requester);
      }
      auto meeting_point = step.meeting_point;
      auto peers = st.peers;
      auto bulk_addresses = st.bulk_addresses;
      auto bulk = st.options.bulk;
      auto tracker = step.bulk;
      auto step_id = request.step_id;
      auto me = caf::actor_cast<device_actor_impl>(self);
      auto keys = st.plan_keys[request.handle];
      step_hooks hooks;
      hooks.send = [peers, bulk_addresses, bulk, tracker, step_id, me, keys](const std::string& key,
                                                                             const tensor& value) {
        // Every key a _Send of this partition uses was parsed when it was registered (inside a
        // loop the executor adds the frame and iteration to it).
        // Outside loops (most sends) the key is looked up as it is, without a copy.
        auto base = without_frame_iteration(key);
        auto parsed = base.size() == key.size() ? keys->find(key) : keys->find(std::string{base});
        auto receiver = parsed == keys->end() ? peers->end()
                                              : peers->find(parsed->second.recv_device);
        if (receiver == peers->end()) {
          caf::anon_send(me, abort_atom::value, step_id,
                         make_error(errc::not_found, "no device actor for '" + receiver_of(key) + "'"));
          return;
        }
        const auto& to = receiver->second;
        auto address = bulk_addresses->find(receiver->first);
        auto route = choose_tensor_route(
          {to.node() == me.node(), bulk != nullptr,
           address != bulk_addresses->end() ? std::string_view{address->second} : std::string_view{},
           value.bytes()});
        if (route == tensor_route::bulk) {
          // One kernel copy out of this buffer, one into the receiver's (bulk_channel.hpp).
          ++tracker->outstanding;
          auto where = receiver->first + " (bulk endpoint " + address->second + ")";
          auto tensor_name = parsed->second.tensor;
          bulk->send(address->second, step_id, key, value,
                     [me, step_id, tracker, where, tensor_name](const status& s) {
                       if (!s.ok()) {
                         auto failure = make_error(errc::unavailable,
                                                   "sending '" + tensor_name + "' to " + where +
                                                     " failed: " + s.message());
                         tracker->fail(failure);
                         caf::anon_send(me, abort_atom::value, step_id, failure);
                       }
                       --tracker->outstanding;
                       caf::anon_send(me, bulk_sent_atom::value, step_id);
                     });
          return;
        }
        if (route == tensor_route::chunks) {
          for (auto& chunk : make_tensor_chunks(step_id, key, value, wire_chunk_bytes()))
            caf::anon_send(to, tensor_atom::value, std::move(chunk));
          return;
        }
        // In the process the tensor stays shared by reference; across, it is encoded once.
        caf::anon_send(to, tensor_atom::value, make_tensor_transfer(step_id, key, value));
      };
      hooks.recv = [meeting_point](const std::string& key, rendezvous::callback deliver) {
        meeting_point->recv(key, std::move(deliver));
      };
      hooks.aborted = [meeting_point, me, step_id](const status& reason) {
        meeting_point->abort(reason);
        caf::anon_send(me, step_failed_atom::value, step_id, reason);
      };
      if (auto pool = st.options.inter_op_pool)
        hooks.schedule = [pool](std::function<void()> work) { pool->schedule(std::move(work)); };
      else if (auto pool = st.options.long_chain_pool)
        hooks.resume = [pool](std::function<void()> work) { pool->schedule(std::move(work)); };
      step.execution = std::make_shared<step_execution>(plan->second, step_id, std::move(hooks));
      step.execution->set_fence(request.fence);
      if (request.all_or_nothing && plan->second->gated_updates() > 0) {
        for (auto& name : request.commit_participants)
          if (name != st.dev->full_name())
            step.participants.push_back(name);
        step.gate = std::make_shared<commit_gate>(
          plan->second->gated_updates(),
          [me, step_id] { caf::anon_send(me, armed_atom::value, step_id); });
        step.execution->set_gate(step.gate);
      }
      auto execution = step.execution;
      execution->start(request.feeds, request.fetches,
                       [me, step_id](status outcome, std::vector<tensor> fetched) {
                         caf::anon_send(me, finished_atom::value, step_id,
                                        step_result{std::move(outcome), std::move(fetched)});
                       });
      return promise;
    },
    [=](finished_atom, std::int64_t step_id, step_result& result) {
      auto& st = self->state;
      st.trace("finished step " + std::to_string(step_id) +
               (result.outcome.ok() ? "" : " with " + result.outcome.to_string()));
      auto i = st.steps.find(step_id);
      if (i == st.steps.end())
        return;
      if (i->second.execution)
        result.execution_ns = i->second.execution->execution_ns();
      if (i->second.bulk->outstanding.load() > 0) {
        i->second.finished = std::move(result); // answered by the last bulk_sent
        return;
      }
      answer_step(self, i, std::move(result));
    },
    [=](bulk_sent_atom, std::int64_t step_id) {
      auto& st = self->state;
      auto i = st.steps.find(step_id);
      if (i == st.steps.end() || !i->second.finished || i->second.bulk->outstanding.load() > 0)
        return;
      auto result = std::move(*i->second.finished);
      answer_step(self, i, std::move(result));
    },
    [=](tensor_atom, tensor_transfer& transfer) {
      auto& st = self->state;
      auto admitted = st.admit(transfer.key);
      auto tensor_name = [&] { return admitted ? admitted->tensor : transfer.key; };
      if (st.options.trace)
        st.trace("tensor " + tensor_name() + " step " + std::to_string(transfer.step_id));
      if (st.ended.count(transfer.step_id) > 0)
        return;
      if (!admitted) {
        st.trace("refused " + tensor_name() + " step " + std::to_string(transfer.step_id) + ": " +
                 admitted.error().message());
        return;
      }
      // A tensor may arrive before this device was told to run the step.
      if (!st.hold_if_early(transfer.step_id, transfer.value.bytes(), admitted->send_device))
        return;
      st.steps[transfer.step_id].meeting_point->deliver(transfer.key, std::move(transfer.value));
    },
    [=](tensor_atom, const tensor_chunk& chunk) {
      auto& st = self->state;
      auto admitted = st.admit(chunk.key);
      auto tensor_name = [&] { return admitted ? admitted->tensor : chunk.key; };
      if (st.options.trace)
        st.trace("chunk " + tensor_name() + " step " + std::to_string(chunk.step_id) + " at " +
                 std::to_string(chunk.offset));
      if (st.ended.count(chunk.step_id) > 0)
        return;
      if (!admitted) {
        st.trace("refused " + tensor_name() + " step " + std::to_string(chunk.step_id) + ": " +
                 admitted.error().message());
        return;
      }
      auto& step = st.steps[chunk.step_id];
      if (step.meeting_point->aborted())
        return;
      auto done = st.assembler.add(chunk.step_id, chunk.key, chunk.type, chunk.shape,
                                   chunk.total_bytes, chunk.offset, chunk.data, chunk.size);
      if (!done) {
        st.fail_step(chunk.step_id, done.error().with_context("on " + st.dev->full_name() +
                                                              ", refused a tensor chunk"));
        return;
      }
      if (done->is_initialized() && st.hold_if_early(chunk.step_id, done->bytes(), admitted->send_device))
        st.steps[chunk.step_id].meeting_point->deliver(chunk.key, std::move(*done));
    },
    [=](probe_atom) { return static_cast<std::int64_t>(self->state.steps.size()); },
    [=](abort_atom, std::int64_t step_id, const status& reason) {
      auto& st = self->state;
      st.trace("abort step " + std::to_string(step_id));
      auto i = st.steps.find(step_id);
      if (i == st.steps.end()) {
        st.assembler.drop_step(step_id);
        return;
      }
      // From the step's coordinator, the abort is its decision: held updates, prepared or not,
      // fail. From this device itself (a failed send), it is a failure like any other.
      auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
      auto decided = sender && sender == caf::actor_cast<caf::actor_addr>(i->second.requester);
      auto gate = i->second.gate;
      st.fail_step(step_id, make_error(errc::aborted, "step " + std::to_string(step_id) +
                                                        " aborted on " + st.dev->full_name() +
                                                        " because: " + reason.message()));
      if (decided && gate)
        gate->cancel();
    },
    [=](step_failed_atom, std::int64_t step_id, const status& reason) {
      auto& st = self->state;
      auto i = st.steps.find(step_id);
      if (i == st.steps.end() || !i->second.gate || i->second.committed || !i->second.promise.pending() ||
          !i->second.gate->armed())
        return;
      auto& step = i->second;
      if (!step.requester ||
          st.requesters.count(caf::actor_cast<caf::actor_addr>(step.requester)) == 0) {
        // Its master went away (the gate armed after the down message looked): nobody will
        // decide, unless another device of the step committed (asked after the grace).
        self->delayed_send(self, orphan_commit_grace, orphan_grace_atom::value, step_id, reason);
        return;
      }
      // Prepared, then failed here: the coordinator may already have committed the step's other
      // devices, so the held updates wait for its decision. It gets the failure now, not when
      // the step ends (which is only after the decision): abort, or a commit already sent.
      st.trace("prepared step " + std::to_string(step_id) + " failed: " + reason.to_string());
      deliver_answer(st, step, step_result{reason, {}, 0});
    },
    [=](armed_atom, std::int64_t step_id) {
      auto& st = self->state;
      auto i = st.steps.find(step_id);
      if (i == st.steps.end() || !i->second.requester || i->second.committed)
        return;
      st.trace("prepared step " + std::to_string(step_id));
      self->send(caf::actor_cast<step_coordinator_actor>(i->second.requester),
                 prepared_atom::value, step_id);
    },
    [=](commit_atom, std::int64_t step_id) {
      auto& st = self->state;
      auto i = st.steps.find(step_id);
      if (i == st.steps.end() || !i->second.gate || i->second.committed)
        return;
      st.commit(step_id, i->second);
    },
    [=](committed_atom, std::int64_t step_id) {
      auto& st = self->state;
      auto i = st.steps.find(step_id);
      return st.committed.count(step_id) > 0 || (i != st.steps.end() && i->second.committed);
    },
    [=](orphan_grace_atom, std::int64_t step_id, const status& reason) {
      // The coordinator is gone, and no commit came within the grace: it may still have
      // committed some devices of the step before it died (or lost only this one's
      // connection). Ask them: one that committed commits this one too; otherwise nobody will
      // decide, and the held updates fail. A message per participant, only on this failure,
      // where the coordinator's commit passed on by every device would cost n(n-1) a step.
      auto& st = self->state;
      auto i = st.steps.find(step_id);
      if (i == st.steps.end() || i->second.committed || i->second.commit_answers_due > 0)
        return;
      auto& step = i->second;
      std::vector<device_actor> asked;
      for (auto& name : step.participants)
        if (auto peer = st.peers->find(name); peer != st.peers->end())
          asked.push_back(peer->second);
      auto give_up = [self, step_id, reason] {
        auto& st = self->state;
        auto j = st.steps.find(step_id);
        if (j == st.steps.end() || j->second.committed)
          return;
        auto gate = j->second.gate;
        st.fail_step(step_id, reason);
        if (gate)
          gate->cancel();
      };
      if (asked.empty()) {
        give_up();
        return;
      }
      st.trace("asking " + std::to_string(asked.size()) + " devices whether step " +
               std::to_string(step_id) + " committed");
      step.commit_answers_due = asked.size();
      // Each answer (or its failure: a device gone, or silent past the grace) counts; the
      // first yes commits, the last no gives up.
      auto answered = [self, step_id, give_up](bool yes) {
        auto& st = self->state;
        auto j = st.steps.find(step_id);
        if (j == st.steps.end() || j->second.committed || j->second.commit_answers_due == 0)
          return;
        if (yes) {
          j->second.commit_answers_due = 0;
          st.commit(step_id, j->second);
          return;
        }
        if (--j->second.commit_answers_due == 0)
          give_up();
      };
      for (auto& peer : asked)
        self->request(peer, orphan_commit_grace, committed_atom::value, step_id)
          .then([answered](bool yes) { answered(yes); },
                [answered](caf::error&) { answered(false); });
    },
  };
}

struct coordinator_step {
  caf::typed_response_promise<step_outcome> promise;
  std::size_t remaining = 0;
  std::vector<std::vector<tensor>> fetched;
  std::vector<device_actor> devices;
  std::vector<std::string> names;
  std::vector<std::uint64_t> incarnations;
  /// Calls whose answer (or failure) was counted: a lost device may also fail its request.
  std::vector<bool> answered;
  status first_error;
  bool aborting = false;
  std::int64_t execution_ns = 0;
  /// Devices whose answer did not come in time, waiting for the probes' verdict; and whether
  /// the probes went out.
  std::vector<std::size_t> timed_out;
  bool probing = false;
  /// Once the probes have answered: the devices found hung ("" when none was).
  bool judged = false;
  std::string hung;
  /// Their indices, for step_outcome::hung_calls.
  std::vector<std::int32_t> hung_calls;
  /// All-or-nothing: the calls that hold first updates, which of them are prepared, and how
  /// many are not yet.
  std::vector<std::int32_t> gated;
  std::vector<bool> prepared;
  std::size_t unprepared = 0;
  /// The step's bound (plan.timeout_ms) and when it runs out; none without a bound. Once it
  /// has run out (expired), answers of the devices in timed_out are dropped, as CAF drops the
  /// answer to a request that timed out.
  std::int64_t timeout_ms = 0;
  std::optional<caf::actor_clock::time_point> deadline;
  bool expired = false;
  /// The whole step's bound (plan.step_timeout_ms) and when it runs out; none without one.
  std::int64_t step_timeout_ms = 0;
  std::optional<caf::actor_clock::time_point> step_deadline;

  /// The earlier of the deadlines still to come; none when neither is.
  std::optional<caf::actor_clock::time_point> next_deadline() const {
    std::optional<caf::actor_clock::time_point> next;
    if (deadline && !expired)
      next = deadline;
    if (step_deadline && !aborting && (!next || *step_deadline < *next))
      next = step_deadline;
    return next;
  }
};

/// Local only: the coordinator's deadline timer (armed for the time point it carries, as a count
/// of the clock's ticks) fired.
using step_deadline_atom = caf::atom_constant<caf::atom("stepdead")>;

/// What a step coordinator handles: the public protocol plus its own deadline timer.
using step_coordinator_impl =
  step_coordinator_actor::extend<caf::reacts_to<step_deadline_atom, std::int64_t>>;

struct coordinator_state {
  std::unordered_map<std::int64_t, coordinator_step> steps;
  std::unordered_set<caf::actor_addr> monitored;
  /// When the one pending deadline timer fires; every unexpired step's deadline is at or
  /// after it.
  std::optional<caf::actor_clock::time_point> next_sweep;
  static inline const char* name = "actorflow.step_coordinator";
};

using coordinator_self = step_coordinator_impl::stateful_pointer<coordinator_state>;
using coordinator_broker_self = io_thread_self<coordinator_state, step_coordinator_impl>;

/// Fails step `step_id` with `reason` (its cause unless an earlier failure is: an "aborted" from a
/// bystander never hides the real one) and, the first time, aborts it on every device; the
/// step ends once they have all answered.
template <class Self>
void abort_step(Self self, std::int64_t step_id, const status& reason) {
  auto i = self->state.steps.find(step_id);
  if (i == self->state.steps.end())
    return;
  auto& step = i->second;
  if (step.first_error.ok() ||
      (step.first_error.code() == errc::aborted && reason.code() != errc::aborted))
    step.first_error = reason;
  if (step.aborting)
    return;
  step.aborting = true;
  for (auto& d : step.devices)
    self->send(d, abort_atom::value, step_id, reason);
}

template <class Self>
void on_device_result(Self self, std::int64_t step_id,
                      std::size_t index, step_result result) {
  auto i = self->state.steps.find(step_id);
  if (i == self->state.steps.end())
    return;
  auto& step = i->second;
  if (index >= step.answered.size() || step.answered[index])
    return;
  step.answered[index] = true;
  if (!result.outcome.ok()) {
    // The failure is this device's task's, unless it already names where it came from.
    if (index < step.names.size())
      if (auto from = task_origin_of(step.names[index], index < step.incarnations.size()
                                                         ? step.incarnations[index]
                                                         : 0))
        result.outcome = result.outcome.with_origin(std::move(*from));
    abort_step(self, step_id, result.outcome);
  } else {
    step.fetched[index] = std::move(result.fetched);
  }
  step.execution_ns = std::max(step.execution_ns, result.execution_ns);
  if (--step.remaining > 0)
    return;
  step_outcome outcome{step.first_error, {}, step.execution_ns, std::move(step.hung_calls)};
  if (outcome.outcome.ok())
    outcome.fetched = std::move(step.fetched);
  step.promise.deliver(std::move(outcome));
  self->state.steps.erase(i);
}

std::string device_label(const coordinator_step& step, std::size_t index) {
  return index < step.names.size() && !step.names[index].empty() ? step.names[index]
                                                                  : "device " + std::to_string(index);
}

/// A device of a judged step that did not finish in time although it answers probes: it
/// waited for the hung devices (a bystander, whose error never hides theirs), or, with none
/// hung, for a tensor that never came.
template <class Self>
void fail_waiting_device(Self self, std::int64_t step_id, std::size_t index,
                         std::int64_t timeout_ms) {
  auto i = self->state.steps.find(step_id);
  if (i == self->state.steps.end())
    return;
  auto& step = i->second;
  auto label = device_label(step, index);
  auto within = " within " + std::to_string(timeout_ms) + " ms";
  auto outcome =
    step.hung.empty()
      ? make_error(errc::deadline_exceeded,
                   label + " did not answer step " + std::to_string(step_id) + within +
                     " (it answers a probe: it waited for a tensor that never came)")
      : make_error(errc::aborted, label + " did not finish step " + std::to_string(step_id) +
                                    within + ": it was waiting for " + step.hung);
  on_device_result(self, step_id, index, step_result{std::move(outcome), {}, 0});
}

/// The devices that did not answer step `step_id` in time are probed; those that do not answer
/// the probe either are hung and fail the step, named; those that do were waiting on them. With
/// none hung (every device alive, a tensor lost), each timed-out device is named as before.
template <class Self>
void judge_timeouts(Self self, std::int64_t step_id, std::int64_t timeout_ms) {
  auto i = self->state.steps.find(step_id);
  if (i == self->state.steps.end() || i->second.probing)
    return;
  auto& step = i->second;
  step.probing = true;
  std::vector<std::size_t> probed;
  for (std::size_t index = 0; index < step.devices.size(); ++index)
    if (!step.answered[index])
      probed.push_back(index);
  auto alive = std::make_shared<std::vector<bool>>(step.devices.size(), false);
  auto verdict = [self, step_id, timeout_ms, alive] {
    auto j = self->state.steps.find(step_id);
    if (j == self->state.steps.end())
      return;
    auto& s = j->second;
    std::vector<std::size_t> hung;
    for (std::size_t index = 0; index < s.devices.size(); ++index)
      if (!s.answered[index] && !(*alive)[index])
        hung.push_back(index);
    std::string hung_names;
    for (auto index : hung)
      hung_names += (hung_names.empty() ? "" : ", ") + device_label(s, index);
    s.judged = true;
    s.hung = hung_names;
    for (auto index : hung)
      s.hung_calls.push_back(static_cast<std::int32_t>(index));
    // The hung first: the step keeps the first real failure as its cause.
    for (auto index : hung)
      on_device_result(self, step_id, index,
                       step_result{make_error(errc::deadline_exceeded,
                                              device_label(s, index) + " did not answer step " +
                                                std::to_string(step_id) + " within " +
                                                std::to_string(timeout_ms) +
                                                " ms, nor a probe after it: hung or unreachable"),
                                   {}, 0});
    if (self->state.steps.count(step_id) == 0)
      return;
    auto waiting = self->state.steps[step_id].timed_out;
    for (auto index : waiting) {
      fail_waiting_device(self, step_id, index, timeout_ms);
      if (self->state.steps.count(step_id) == 0)
        return;
    }
  };
  auto left = std::make_shared<std::size_t>(probed.size());
  for (auto index : probed) {
    self->request(step.devices[index], caf::duration{probe_bound(timeout_ms)}, probe_atom::value)
      .then([=](std::int64_t) {
              (*alive)[index] = true;
              if (--*left == 0)
                verdict();
            },
            [=](caf::error&) {
              if (--*left == 0)
                verdict();
            });
  }
}

/// Arms the deadline timer for `when` unless the pending one fires no later.
template <class Self>
void arm_step_deadline(Self self, caf::actor_clock::time_point when) {
  auto& next = self->state.next_sweep;
  if (next && *next <= when)
    return;
  next = when;
  auto now = self->clock().now();
  auto delay = when > now ? when - now : caf::actor_clock::duration_type::zero();
  self->delayed_send(self, delay, step_deadline_atom::value,
                     static_cast<std::int64_t>(when.time_since_epoch().count()));
}

/// The steps whose deadline has passed: each device that has not answered timed out, and the
/// probes decide who is to blame (judge_timeouts). Then the timer is armed for the earliest
/// deadline left.
template <class Self>
void expire_steps(Self self, std::int64_t fired_for) {
  auto& st = self->state;
  if (st.next_sweep && st.next_sweep->time_since_epoch().count() == fired_for)
    st.next_sweep.reset();
  auto now = self->clock().now();
  std::vector<std::int64_t> over_time;
  for (auto& [step_id, step] : st.steps)
    if (step.step_deadline && !step.aborting && *step.step_deadline <= now)
      over_time.push_back(step_id);
  for (auto step_id : over_time)
    abort_step(self, step_id,
               make_error(errc::deadline_exceeded,
                          "step " + std::to_string(step_id) + " did not finish within its " +
                            std::to_string(st.steps[step_id].step_timeout_ms) +
                            " ms timeout (run_options::timeout_ms, RunOptions.timeout_in_ms)"));
  std::vector<std::int64_t> expired;
  for (auto& [step_id, step] : st.steps)
    if (step.deadline && !step.expired && *step.deadline <= now)
      expired.push_back(step_id);
  for (auto step_id : expired) {
    auto i = st.steps.find(step_id);
    if (i == st.steps.end())
      continue;
    auto& step = i->second;
    step.expired = true;
    for (std::size_t index = 0; index < step.devices.size(); ++index)
      if (!step.answered[index])
        step.timed_out.push_back(index);
    judge_timeouts(self, step_id, step.timeout_ms);
  }
  std::optional<caf::actor_clock::time_point> earliest;
  for (auto& [step_id, step] : st.steps)
    if (auto next = step.next_deadline(); next && (!earliest || *next < *earliest))
      earliest = next;
  if (earliest)
    arm_step_deadline(self, *earliest);
}

template <class Self>
step_coordinator_impl::behavior_type step_coordinator(Self self) {
  self->set_down_handler([=](caf::down_msg& down) {
    // A device went away: every step still waiting on it fails, naming it.
    self->state.monitored.erase(down.source);
    std::vector<std::pair<std::int64_t, std::size_t>> lost;
    for (auto& [step_id, step] : self->state.steps)
      for (std::size_t index = 0; index < step.devices.size(); ++index)
        if (!step.answered[index] && step.devices[index].address() == down.source)
          lost.emplace_back(step_id, index);
    for (auto& [step_id, index] : lost) {
      auto& step = self->state.steps[step_id];
      auto message = device_label(step, index) + " is unreachable (" +
                     self->system().render(down.reason) + ")";
      on_device_result(self, step_id, index, step_result{make_error(errc::unavailable, message), {}, 0});
    }
  });
  return {
    [=](run_atom, const step_plan& plan) -> caf::result<step_outcome> {
      if (plan.calls.empty())
        return step_outcome{};
      auto promise = self->template make_response_promise<step_outcome>();
      auto& step = self->state.steps[plan.step_id];
      step.promise = promise;
      step.remaining = plan.calls.size();
      step.fetched.resize(plan.calls.size());
      step.answered.assign(plan.calls.size(), false);
      step.names = plan.device_names;
      step.incarnations = plan.device_incarnations;
      for (auto& call : plan.calls) {
        step.devices.push_back(call.first);
        if (self->state.monitored.insert(call.first.address()).second)
          self->monitor(call.first);
      }
      step.gated = plan.gated;
      step.prepared.assign(plan.calls.size(), false);
      step.unprepared = plan.gated.size();
      auto step_id = plan.step_id;
      // One deadline timer for every step in flight, not a timed request per device: each timed
      // request wakes CAF's clock thread twice (set, cancel), eight wake-ups for a step on four
      // devices, where this arms a timer only when the earliest deadline changes.
      step.timeout_ms = plan.timeout_ms;
      if (plan.timeout_ms > 0)
        step.deadline = self->clock().now() + std::chrono::milliseconds(plan.timeout_ms);
      step.step_timeout_ms = plan.step_timeout_ms;
      if (plan.step_timeout_ms > 0)
        step.step_deadline = self->clock().now() + std::chrono::milliseconds(plan.step_timeout_ms);
      if (auto next = step.next_deadline())
        arm_step_deadline(self, *next);
      // Each device holding first updates learns the others: whom it asks whether they
      // committed if this coordinator goes away before its commit reaches it.
      std::vector<std::string> participants;
      for (auto index : step.gated)
        participants.push_back(step.names[static_cast<std::size_t>(index)]);
      for (std::size_t index = 0; index < plan.calls.size(); ++index) {
        auto request = plan.calls[index].second;
        if (request.all_or_nothing &&
            std::find(step.gated.begin(), step.gated.end(), static_cast<std::int32_t>(index)) !=
              step.gated.end())
          request.commit_participants = participants;
        self->request(plan.calls[index].first, caf::infinite, run_atom::value, std::move(request))
          .then(
            [=](step_result& result) {
              auto i = self->state.steps.find(step_id);
              if (i == self->state.steps.end())
                return;
              auto& late = i->second.timed_out;
              if (i->second.expired && std::find(late.begin(), late.end(), index) != late.end())
                return;
              on_device_result(self, step_id, index, std::move(result));
            },
            [=](caf::error& err) {
              auto i = self->state.steps.find(step_id);
              if (i == self->state.steps.end())
                return;
              auto message = device_label(i->second, index) + " did not answer step " +
                             std::to_string(step_id) + ": " + self->system().render(err);
              on_device_result(self, step_id, index,
                               step_result{make_error(errc::unavailable, message), {}, 0});
            });
      }
      return promise;
    },
    [=](prepared_atom, std::int64_t step_id) {
      auto i = self->state.steps.find(step_id);
      if (i == self->state.steps.end() || i->second.aborting)
        return;
      auto& step = i->second;
      auto sender = self->current_sender();
      for (auto index : step.gated) {
        auto k = static_cast<std::size_t>(index);
        if (k < step.devices.size() && !step.prepared[k] && sender &&
            step.devices[k].address() == caf::actor_cast<caf::actor_addr>(sender)) {
          step.prepared[k] = true;
          --step.unprepared;
        }
      }
      if (step.unprepared > 0)
        return;
      // Every first update of the step is held on every device: apply them all.
      for (auto index : step.gated)
        self->send(step.devices[static_cast<std::size_t>(index)], commit_atom::value, step_id);
    },
    [=](step_deadline_atom, std::int64_t fired_for) { expire_steps(self, fired_for); },
    [=](abort_atom, std::int64_t step_id, const status& reason) { abort_step(self, step_id, reason); },
  };
}

} // namespace

std::chrono::milliseconds probe_bound(std::int64_t step_timeout_ms) {
  auto seconds = probe_after_step_seconds(static_cast<double>(step_timeout_ms) / 1000);
  return std::chrono::milliseconds{static_cast<std::int64_t>(seconds * 1000)};
}

device_actor spawn_device_actor(caf::actor_system& sys, std::shared_ptr<device> dev,
                                device_actor_options options) {
  if (options.on_network_thread && sys.has_middleman())
    return spawn_on_io_thread<device_actor>(sys, device_behavior<device_broker_self>, std::move(dev),
                                            std::move(options));
  return sys.spawn(device_behavior<device_self>, std::move(dev), std::move(options));
}

step_coordinator_actor spawn_step_coordinator(caf::actor_system& sys, bool on_network_thread) {
  if (on_network_thread && sys.has_middleman())
    return spawn_on_io_thread<step_coordinator_actor>(sys, step_coordinator<coordinator_broker_self>);
  return caf::actor_cast<step_coordinator_actor>(sys.spawn(step_coordinator<coordinator_self>));
}

bulk_endpoint::deliver_function
deliver_to_device_actors(std::map<std::string, protocol::device_actor> devices) {
  return [devices = std::move(devices)](std::int64_t step_id, std::string key,
                                        tensor value) -> status {
    auto receiver = devices.find(receiver_of(key));
    if (receiver == devices.end())
      return make_error(errc::not_found, "no device '" + receiver_of(key) + "' in this task");
    caf::anon_send(receiver->second, protocol::tensor_atom::value,
                   protocol::make_tensor_transfer(step_id, std::move(key), std::move(value)));
    return {};
  };
}

} // namespace actorflow

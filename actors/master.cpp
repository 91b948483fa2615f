#include "actors/master.hpp"
#include "actors/transport_guard.hpp"

#include "devices/device_factory.hpp"

#include "actors/device_actor.hpp"
#include "actors/session_master.hpp"
#include "actors/device_directory.hpp"
#include "actors/io_thread.hpp"
#include "actors/logging.hpp"
#include "actors/master_plan.hpp"
#include "actors/protocols/device.hpp"
#include "actors/protocols/master.hpp"
#include "actors/protocols/task.hpp"
#include "actors/protocols/wire.hpp"
#include "devices/device_factory.hpp"
#include "devices/kernel.hpp"
#include "graph/device_name.hpp"
#include "graph/fusion.hpp"
#include "graph/mixed_precision.hpp"
#include "graph/metrics.hpp"
#include "graph/partition.hpp"
#include "graph/placement.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <tuple>

namespace actorflow {

namespace {

using namespace protocol;

using completion = std::function<void(const status&)>;

/// Calls `done` exactly once: with the first failure reported, or with ok once `count`
/// successes are in. Lets an actor wait for several answers without blocking.
class countdown {
public:
  countdown(std::size_t count, completion done) : left_(count), done_(std::move(done)) {
    if (left_ == 0)
      finish({});
  }

  void report(const status& s) {
    if (!done_)
      return;
    if (!s.ok())
      finish(s);
    else if (--left_ == 0)
      finish({});
  }

private:
  void finish(const status& s) {
    auto done = std::move(done_);
    done_ = nullptr;
    done(s);
  }

  std::size_t left_;
  completion done_;
};

struct master_session {
  std::shared_ptr<graph> g;
  session_config config;
  /// Each run signature is placed and registered once.
  plan_cache plans;
  /// Its steps in flight, for a cancel.
  std::set<std::int64_t> running;
  /// The client's latest cancel generation: run requests of earlier ones are cancelled.
  std::int64_t cancelled_through = 0;
};

metric_gauge& open_master_sessions() {
  static auto& open = default_metrics().gauge("actorflow_master_sessions_open",
                                              "Sessions open on this process's masters.");
  return open;
}

struct master_state {
  ~master_state() { open_master_sessions().add(-static_cast<std::int64_t>(sessions.size())); }
  master_options options;
  device_directory directory;
  enum class discovery { not_started, running, done } phase = discovery::not_started;
  std::vector<completion> waiting_for_devices;
  step_coordinator_actor coordinator;
  std::map<std::int64_t, master_session> sessions;
  /// Sessions by the actor that stands for their client (session_config::owner).
  std::multimap<caf::actor_addr, std::int64_t> owned_by;
  std::int64_t next_session = 0;
  /// Session handles are drawn at random (unguessable: 'another handle - 1' is no other
  /// client's session) when the master serves a cluster; counted from 1 otherwise (tests).
  bool random_session_handles = false;
  std::int64_t next_handle = 0;
  std::int64_t next_step = 0;
  /// Device actors seen going away (killed task, lost connection): closing a session frees
  /// nothing on them rather than waiting out the timeout for an answer that cannot come.
  std::set<caf::actor_addr> lost_devices;
  /// Device actors a step found hung (no answer to the step, nor to a probe after it): closing
  /// a session still sends them its frees but does not wait a bound for their answers, which a
  /// stopped process cannot give. One that answers anything again is taken off.
  std::set<caf::actor_addr> hung_devices;
  /// The master found every task it needs once: later discoveries wait for none.
  bool reached_cluster = false;

  static inline const char* name = "actorflow.master";
};

using master_self = master_actor::stateful_pointer<master_state>;
using master_broker_self = io_thread_self<master_state, master_actor>;

/// A positive 62-bit handle from the system's entropy source, not in `taken`.
std::int64_t random_session_handle(const std::map<std::int64_t, master_session>& taken) {
  std::random_device entropy;
  for (;;) {
    auto handle = static_cast<std::int64_t>(((static_cast<std::uint64_t>(entropy()) << 32) | entropy()) >> 2);
    if (handle > 0 && taken.count(handle) == 0)
      return handle;
  }
}

template <class Self>
void ask_devices(Self self, const task_actor& service, const std::string& where,
                 const std::optional<task_origin>& task, std::shared_ptr<countdown> done) {
  self->request(service, request_bound(self->state.options.timeout_seconds), devices_atom::value)
    .then([=](device_list& listed) { done->report(self->state.directory.add_task(where, listed)); },
          [=](caf::error& err) {
            auto failed = status_from_error(err).with_context("task " + where);
            done->report(task ? failed.with_origin(*task) : failed);
          });
}

template <class Self>
void finish_discovery(Self self, const status& outcome) {
  auto& st = self->state;
  if (outcome.ok()) {
    st.directory.finish();
    // Every device learns every other (a _Send addresses its receiver by full name) and where
    // large tensors for it may go outside CAF (actors/bulk_channel.hpp).
    auto peers = st.directory.peers();
    for (auto& [name, actor] : st.directory.devices()) {
      self->send(actor, peers_atom::value, peers);
      // A task that goes away (killed, restarted) makes the next session look again.
      self->monitor(actor);
    }
    st.phase = master_state::discovery::done;
    st.reached_cluster = true;
  } else {
    st.directory.clear();
    st.phase = master_state::discovery::not_started; // the next session tries again
  }
  auto waiting = std::move(st.waiting_for_devices);
  st.waiting_for_devices.clear();
  for (auto& w : waiting)
    w(outcome);
}

/// Reaches the tasks the spec lists but no known service covers, through the middleman.
template <class Self>
void connect_unreached(Self self) {
  std::vector<unreached_task> tasks;
  if (self->state.options.cluster) {
    auto found = self->state.directory.unreached(*self->state.options.cluster,
                                                 self->state.options.device_filters);
    if (!found) {
      finish_discovery(self, found.error());
      return;
    }
    tasks = std::move(*found);
  }
  auto done = std::make_shared<countdown>(tasks.size(),
                                          [self](const status& s) { finish_discovery(self, s); });
  if (tasks.empty())
    return;
  // Only now: a master of in-process tasks runs on systems without a middleman.
  if (!self->system().has_middleman()) {
    finish_discovery(self, make_error(errc::failed_precondition,
                                      "this actor system cannot reach the cluster's other tasks: "
                                      "it has no middleman; load it with "
                                      "config.load<caf::io::middleman>() before creating the "
                                      "actor_system"));
    return;
  }
  auto mm = self->system().middleman().actor_handle();
  auto& options = self->state.options;
  // A cluster coming up: its tasks may start after this master (or its client); each is
  // reached through a connector that waits for it.
  bool patient = !self->state.reached_cluster && options.connect_timeout_seconds > 0;
  auto bound = request_bound(options.timeout_seconds);
  if (patient && options.timeout_seconds > 0)
    bound = request_bound(options.connect_timeout_seconds + 2 * options.timeout_seconds + 1);
  for (auto& [where, host, port, task] : tasks) {
    auto connector = caf::actor_cast<caf::actor>(mm);
    if (patient)
      connector = spawn_patient_connector(
        self->system(), options.timeout_seconds,
        {options.connect_timeout_seconds, "task " + where}); // where: "NAME at HOST:PORT"
    self->request(connector, bound, caf::connect_atom::value, host, port)
      .then(
        [=, where = where, task = task](const caf::node_id&, caf::strong_actor_ptr& service,
                                        const std::set<std::string>& interface) {
          if (!service) {
            done->report(make_error(errc::unavailable,
                                    "task " + where + " published no actor at its address")
                           .with_origin(task));
            return;
          }
          if (!self->system().template assignable<task_actor>(interface)) {
            done->report(make_error(errc::unavailable,
                                    "the actor at task " + where +
                                      " is not an actorflow task (another program, or a "
                                      "different actorflow version listens there)")
                           .with_origin(task));
            return;
          }
          ask_devices(self, caf::actor_cast<task_actor>(service), where, task, done);
        },
        [=, where = where, host = host, port = port, task = task](caf::error& err) {
          done->report(make_error(errc::unavailable, "cannot reach task " + where + ": " +
                                                       describe_connect_error(self->system(), err, host, port))
                         .with_origin(task));
        });
  }
}

/// Runs `then` once the cluster's devices are known, finding them first if need be.
template <class Self>
void with_devices(Self self, completion then) {
  auto& st = self->state;
  if (st.phase == master_state::discovery::done) {
    then({});
    return;
  }
  st.waiting_for_devices.push_back(std::move(then));
  if (st.phase == master_state::discovery::running)
    return;
  st.phase = master_state::discovery::running;
  auto services = st.options.task_services;
  auto done = std::make_shared<countdown>(services.size(), [self](const status& s) {
    if (s.ok())
      connect_unreached(self);
    else
      finish_discovery(self, s);
  });
  for (std::size_t i = 0; i < services.size(); ++i)
    ask_devices(self, services[i], "known to the master (service " + std::to_string(i) + ")",
                std::nullopt, done);
}

/// The plan for `req`'s signature: placed, partitioned and sent for registration the first
/// time. `placed` receives the placement lines this call produced.
template <class Self>
result<std::shared_ptr<run_plan>> plan_for(Self self, master_session& s,
                                           const master_run_request& req,
                                           std::vector<std::string>& placed) {
  auto signature = run_signature(req);
  if (auto cached = s.plans.find(signature))
    return cached;
  auto& st = self->state;
  placement_options placement;
  placement.allow_soft_placement = s.config.allow_soft_placement;
  placement.default_task = st.directory.default_task(s.config.default_task, st.options.own_task);
  placement.device_priority = device_type_priority;
  auto policy = mixed_precision_policy(s.config.mixed_precision);
  if (!policy)
    return policy.error();
  auto made = make_run_plan(*s.g, req, st.directory, placement, st.next_handle, placed,
                            fusion_enabled(s.config.fuse_ops), *policy);
  if (!made)
    return made.error();
  // ACTORFLOW_VERBOSE=1 says what fused even without log_device_placement.
  if (verbose())
    for (auto& line : placed)
      if (parse_fusion_line(line) || is_mixed_precision_line(line))
        log_verbose(line);
  auto plan = *made;
  s.plans.insert(signature, plan);
  // Registration replies may outlive the session (closed meanwhile): they hold the plan.
  auto done = std::make_shared<countdown>(
    plan->partitions.size(), [plan](const status& outcome) { plan->finish_registration(outcome); });
  for (auto& entry : plan->partitions) {
    auto where = "registering a partition on " + entry.device;
    // No answer (a timeout, a lost connection) is the device's task's failure: the origin lets
    // the training library tell a lost ps from a bad graph.
    auto from = task_origin_of(entry.device, entry.incarnation);
    self->request(entry.actor, request_bound(st.options.timeout_seconds), register_atom::value,
                  make_partition_registration(entry.handle, entry.partition,
                                              s.config.memory_limit_bytes, req.handle))
      .then([=](status& registered) { done->report(registered.with_context(where)); },
            [=](caf::error& err) {
              auto failed = status_from_error(err).with_context(where);
              done->report(from ? failed.with_origin(*from) : failed);
            });
  }
  return plan;
}

/// Remembers the devices `outcome` found hung, and forgets those of `plan` that answered it.
template <class Self>
void note_hung_devices(Self self, const run_plan& plan, const step_outcome& outcome) {
  auto& hung = self->state.hung_devices;
  std::vector<bool> found(plan.partitions.size(), false);
  for (auto index : outcome.hung_calls)
    if (index >= 0 && static_cast<std::size_t>(index) < found.size())
      found[static_cast<std::size_t>(index)] = true;
  for (std::size_t k = 0; k < plan.partitions.size(); ++k) {
    auto address = plan.partitions[k].actor.address();
    if (found[k])
      hung.insert(address);
    else if (!hung.empty())
      hung.erase(address);
  }
}

/// Runs one step of a registered plan and delivers the fetches in request order.
template <class Self>
void run_step(Self self, std::shared_ptr<const run_plan> plan, master_run_request& req,
              const session_config& config, std::vector<std::string> placed,
              caf::typed_response_promise<master_run_result> rp) {
  auto step = make_step_plan(*plan, ++self->state.next_step, req, config.timeout_ms);
  auto fetch_count = req.fetches.size();
  auto handle = req.handle;
  auto step_id = step.step_id;
  if (auto s = self->state.sessions.find(handle); s != self->state.sessions.end())
    s->second.running.insert(step_id);
  auto ended = [self, handle, step_id] {
    if (auto s = self->state.sessions.find(handle); s != self->state.sessions.end())
      s->second.running.erase(step_id);
  };
  // The coordinator bounds every device's answer; waiting on it needs no bound of its own.
  self->request(self->state.coordinator, caf::infinite, run_atom::value, std::move(step))
    .then(
      [=](step_outcome& outcome) mutable {
        ended();
        note_hung_devices(self, *plan, outcome);
        master_run_result out;
        out.placed = std::move(placed);
        out.outcome = std::move(outcome.outcome);
        out.execution_ns = outcome.execution_ns;
        if (out.outcome.ok())
          out.fetched = gather_fetches(*plan, outcome.fetched, fetch_count);
        rp.deliver(std::move(out));
      },
      [=](caf::error& err) mutable {
        ended();
        master_run_result out;
        out.outcome = status_from_error(err);
        rp.deliver(std::move(out));
      });
}

/// Forgets session `handle` and frees its partitions on every device; `done` gets the outcome
/// once every device answered (ok for a session that is not open).
template <class Self>
void close_session(Self self, std::int64_t handle, completion done) {
  auto i = self->state.sessions.find(handle);
  if (i == self->state.sessions.end()) {
    done({});
    return;
  }
  auto session = std::move(i->second);
  self->state.sessions.erase(i);
  open_master_sessions().add(-1);
  std::size_t partitions = 0;
  for (auto& [signature, plan] : session.plans.all())
    partitions += plan->partitions.size();
  auto freed_all = std::make_shared<countdown>(partitions, std::move(done));
  for (auto& [signature, plan] : session.plans.all()) {
    for (auto& p : plan->partitions) {
      if (self->state.lost_devices.count(p.actor.address()) > 0) {
        freed_all->report({}); // its task is gone, and its partitions with it
        continue;
      }
      auto where = "freeing a partition on " + p.device;
      auto address = p.actor.address();
      if (self->state.hung_devices.count(address) > 0) {
        // Freed when (if) its process resumes; the close waits for none of it.
        freed_all->report({});
        self->request(p.actor, request_bound(self->state.options.timeout_seconds), deregister_atom::value,
                      p.handle)
          .then([=](status&) { self->state.hung_devices.erase(address); }, [](caf::error&) {});
        continue;
      }
      self->request(p.actor, request_bound(self->state.options.timeout_seconds), deregister_atom::value,
                    p.handle)
        .then([=](status& freed) { freed_all->report(freed.with_context(where)); },
              [=](caf::error& err) { freed_all->report(status_from_error(err).with_context(where)); });
    }
  }
}

master_run_result failed_run(status s) {
  master_run_result out;
  out.outcome = std::move(s);
  return out;
}

/// Ok when the message being handled may act on session `handle`: a session with an owner
/// (session_config::owner) takes runs, extensions and closes only from its owner's node, so a
/// handle seen or guessed elsewhere is of no use there.
template <class Self>
status check_session_caller(Self self, std::int64_t handle, const master_session& s) {
  if (!s.config.owner)
    return {};
  const auto& sender = self->current_sender();
  if (sender && sender->node() == s.config.owner.node())
    return {};
  return make_error(errc::permission_denied,
                    "session " + std::to_string(handle) + " belongs to a client on another node");
}

template <class Self>
master_actor::behavior_type master(Self self, master_options options) {
  auto& st = self->state;
  st.options = std::move(options);
  st.coordinator = spawn_step_coordinator(self->system(), st.options.cluster != nullptr);
  self->link_to(st.coordinator);
  // Ids unique across masters: tasks of a real cluster serve several masters' partitions and
  // steps at once. Tasks a master owns alone count from 1, which keeps tests deterministic.
  if (st.options.id_base >= 0 || st.options.cluster) {
    std::random_device entropy;
    auto id_base = st.options.id_base >= 0
                     ? st.options.id_base
                     : (static_cast<std::int64_t>(entropy()) << 20) & 0x7fffffffffffffffLL;
    st.next_handle = id_base;
    st.next_step = id_base;
    st.next_session = id_base;
    st.random_session_handles = st.options.cluster != nullptr;
  }

  self->set_down_handler([self](const caf::down_msg& down) {
    auto& st = self->state;
    if (st.directory.has_actor(down.source)) {
      st.lost_devices.insert(down.source);
      if (st.phase == master_state::discovery::done) {
        // Steps on that task fail (the coordinator names it); new sessions find the cluster
        // as it is now, e.g. with the task restarted at its address.
        st.directory.clear();
        st.phase = master_state::discovery::not_started;
      }
    }
    auto [first, last] = self->state.owned_by.equal_range(down.source);
    std::vector<std::int64_t> orphans;
    for (auto i = first; i != last; ++i)
      orphans.push_back(i->second);
    self->state.owned_by.erase(first, last);
    for (auto handle : orphans)
      close_session(self, handle, [](const status&) {});
  });

  return {
    // Not a normal exit: linked actors (the step coordinator) ignore those and would linger.
    [self](stop_atom) {
      if (stop_from_own_node(self, "master"))
        self->quit(caf::exit_reason::user_shutdown);
    },
    [self](create_atom, session_config& config, graph_def& def) -> caf::result<session_created> {
      auto rp = self->template make_response_promise<session_created>();
      if (!def.definition) {
        session_created out;
        out.outcome = make_error(errc::invalid_argument, "a session needs a graph");
        return out;
      }
      with_devices(self, [self, rp, config, def](const status& found) mutable {
        session_created out;
        out.outcome = found;
        if (found.ok()) {
          auto& st = self->state;
          out.handle = st.random_session_handles ? random_session_handle(st.sessions)
                                                 : ++st.next_session;
          st.sessions[out.handle] = master_session{def.definition, config, {}};
          open_master_sessions().add(1);
          if (config.owner) {
            // A client that goes away without closing (its process died, its connection
            // dropped) must not leave its partitions on the tasks.
            self->monitor(config.owner);
            st.owned_by.emplace(config.owner.address(), out.handle);
          }
          for (auto& name : st.directory.names())
            out.devices.push_back(name.to_string());
        }
        rp.deliver(std::move(out));
      });
      return rp;
    },
    [self](extend_atom, std::int64_t handle, graph_def& def) -> status {
      auto i = self->state.sessions.find(handle);
      if (i == self->state.sessions.end())
        return make_error(errc::not_found, "no session " + std::to_string(handle) + " on this master");
      AF_RETURN_IF_ERROR(check_session_caller(self, handle, i->second));
      if (!def.definition)
        return make_error(errc::invalid_argument, "extending a session needs a graph");
      // Nodes placed before keep their devices: variables must stay where they live.
      auto& old_graph = *i->second.g;
      auto& grown = *def.definition;
      for (std::size_t id = 0; id < std::min(old_graph.size(), grown.size()); ++id) {
        auto& before = old_graph.at(static_cast<int>(id));
        auto& now = grown.at(static_cast<int>(id));
        if (before.name == now.name && now.assigned_device.empty())
          now.assigned_device = before.assigned_device;
      }
      i->second.g = def.definition;
      return {};
    },
    [self](run_atom, master_run_request& req) -> caf::result<master_run_result> {
      auto i = self->state.sessions.find(req.handle);
      if (i == self->state.sessions.end())
        return failed_run(make_error(errc::not_found, "no session " + std::to_string(req.handle) +
                                                        " on this master (closed?)"));
      auto& s = i->second;
      if (auto allowed = check_session_caller(self, req.handle, s); !allowed.ok())
        return failed_run(allowed);
      std::vector<std::string> placed;
      auto plan = plan_for(self, s, req, placed);
      if (!plan)
        return failed_run(plan.error());
      auto rp = self->template make_response_promise<master_run_result>();
      auto config = s.config;
      auto start = [self, plan = *plan, req = std::move(req), placed = std::move(placed), config,
                    rp](const status& registered) mutable {
        // Cancelled by its client while it was on its way or being planned and registered.
        if (auto s = self->state.sessions.find(req.handle);
            s != self->state.sessions.end() && req.cancel_generation < s->second.cancelled_through) {
          rp.deliver(failed_run(make_error(errc::aborted, "a step cancelled by its client "
                                                          "before it started")));
          return;
        }
        if (!registered.ok()) {
          // Forget the plan, so that a later run registers again (a task may be back).
          auto i = self->state.sessions.find(req.handle);
          if (i != self->state.sessions.end())
            i->second.plans.forget(run_signature(req), plan);
          rp.deliver(failed_run(registered));
          return;
        }
        run_step(self, plan, req, config, std::move(placed), rp);
      };
      if ((*plan)->registering)
        (*plan)->waiting.push_back(std::move(start));
      else
        start((*plan)->registration);
      return rp;
    },
    [self](close_atom, std::int64_t handle) -> caf::result<status> {
      if (auto i = self->state.sessions.find(handle); i != self->state.sessions.end())
        if (auto allowed = check_session_caller(self, handle, i->second); !allowed.ok())
          return allowed;
      auto rp = self->template make_response_promise<status>();
      close_session(self, handle, [rp](const status& s) mutable { rp.deliver(s); });
      return rp;
    },
    [self](sessions_atom) {
      return static_cast<std::int64_t>(self->state.sessions.size());
    },
    [self](cancel_atom, std::int64_t handle, std::int64_t generation) -> std::int64_t {
      auto i = self->state.sessions.find(handle);
      if (i == self->state.sessions.end() || !check_session_caller(self, handle, i->second).ok())
        return 0;
      i->second.cancelled_through = std::max(i->second.cancelled_through, generation);
      for (auto step_id : i->second.running)
        self->send(self->state.coordinator, abort_atom::value, step_id,
                   make_error(errc::aborted, "step " + std::to_string(step_id) +
                                               " cancelled by its client"));
      return static_cast<std::int64_t>(i->second.running.size());
    },
  };
}

} // namespace

master_actor spawn_master(caf::actor_system& sys, master_options options) {
  // A cluster's master talks to other processes on every step: on the I/O thread, its run
  // requests and their answers wake no scheduler thread (as the step coordinator's).
  if (options.cluster && sys.has_middleman())
    return spawn_on_io_thread<master_actor>(sys, master<master_broker_self>, std::move(options));
  return sys.spawn(master<master_self>, std::move(options));
}

void add_master_message_types(caf::actor_system_config& cfg) {
  using namespace protocol;
  cfg.add_message_type<session_config>("actorflow::session_config");
  cfg.add_message_type<graph_def>("actorflow::graph_def");
  cfg.add_message_type<session_created>("actorflow::session_created");
  cfg.add_message_type<master_run_request>("actorflow::master_run_request");
  cfg.add_message_type<master_run_result>("actorflow::master_run_result");
}

} // namespace actorflow

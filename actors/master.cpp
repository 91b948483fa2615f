#include "actors/master.hpp"

#include "actors/device_actor.hpp"
#include "actors/protocols/device.hpp"
#include "actors/protocols/master.hpp"
#include "actors/protocols/task.hpp"
#include "actors/protocols/wire.hpp"
#include "devices/kernel.hpp"
#include "graph/device_name.hpp"
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

caf::duration bound(double seconds) {
  if (seconds <= 0)
    return caf::infinite;
  return caf::duration{std::chrono::microseconds{static_cast<std::int64_t>(seconds * 1e6)}};
}

std::string task_of(const device_name& d) {
  return "/job:" + d.job.value_or("") + "/replica:0/task:" + std::to_string(d.task.value_or(0));
}

/// One device's share of a run signature.
struct partition_entry {
  std::string device;
  device_actor actor;
  std::int64_t handle = 0;
  /// (index into the request's feeds, tensor name)
  std::vector<std::pair<std::size_t, std::string>> feeds;
  /// The tensors this device returns, and where each goes among the request's fetches.
  std::vector<std::string> fetch_names;
  std::vector<std::size_t> fetch_slots;
};

/// A run signature's partitions; usable once every registration has been acknowledged.
struct run_plan {
  std::vector<partition_entry> partitions;
  bool registering = true;
  status registration;
  std::vector<completion> waiting;
};

struct master_session {
  std::shared_ptr<graph> g;
  session_config config;
  /// Keyed by fetches|feeds|targets: each signature is placed and registered once.
  std::map<std::string, std::shared_ptr<run_plan>> plans;
};

struct master_state {
  master_options options;
  std::vector<std::pair<device_name, device_actor>> devices;
  /// Bulk endpoint "host:port" by full device name, for devices whose task listed one.
  std::map<std::string, std::string> bulk_addresses;
  enum class discovery { not_started, running, done } phase = discovery::not_started;
  std::vector<completion> waiting_for_devices;
  step_coordinator_actor coordinator;
  std::map<std::int64_t, master_session> sessions;
  /// Sessions by the actor that stands for their client (session_config::owner).
  std::multimap<caf::actor_addr, std::int64_t> owned_by;
  std::int64_t next_session = 0;
  std::int64_t next_handle = 0;
  std::int64_t next_step = 0;

  static inline const char* name = "actorflow.master";
};

using master_self = master_actor::stateful_pointer<master_state>;

void add_devices(master_self self, const std::string& where, device_list& listed,
                 countdown& done) {
  for (auto& [name, actor] : listed.devices) {
    auto parsed = device_name::parse(name);
    if (!parsed || !parsed->fully_specified()) {
      done.report(make_error(errc::data_loss,
                             "task " + where + " reported a bad device name '" + name + "'"));
      return;
    }
    self->state.devices.emplace_back(*parsed, actor);
    if (!listed.bulk_address.empty())
      self->state.bulk_addresses[parsed->to_string()] = listed.bulk_address;
  }
  done.report({});
}

void ask_devices(master_self self, const task_actor& service, const std::string& where,
                 std::shared_ptr<countdown> done) {
  self->request(service, bound(self->state.options.timeout_seconds), devices_atom::value)
    .then([=](device_list& listed) { add_devices(self, where, listed, *done); },
          [=](caf::error& err) {
            done->report(status_from_error(err).with_context("task " + where));
          });
}

/// Tasks of the cluster spec that no known task service stands for: (name, host, port).
std::vector<std::tuple<std::string, std::string, std::uint16_t>>
unreached_tasks(const master_state& st, status& error) {
  std::vector<std::tuple<std::string, std::string, std::uint16_t>> out;
  if (!st.options.cluster)
    return out;
  std::set<std::string> reached;
  for (auto& [name, actor] : st.devices)
    reached.insert(task_of(name));
  auto& cluster = *st.options.cluster;
  for (auto& job : cluster.jobs()) {
    for (int task = 0; task < cluster.num_tasks(job); ++task) {
      auto name = "/job:" + job + "/replica:0/task:" + std::to_string(task);
      if (reached.count(name) > 0)
        continue;
      auto address = cluster.address(job, task);
      if (!address) {
        error = address.error();
        return {};
      }
      auto split = parse_host_port(*address);
      if (!split) {
        error = split.error();
        return {};
      }
      out.emplace_back(name + " at " + *address, split->host, split->port);
    }
  }
  return out;
}

void finish_discovery(master_self self, const status& outcome) {
  auto& st = self->state;
  if (outcome.ok()) {
    std::sort(st.devices.begin(), st.devices.end(), [](auto& a, auto& b) {
      return std::make_tuple(a.first.job, a.first.task, a.first.type, a.first.id) <
             std::make_tuple(b.first.job, b.first.task, b.first.type, b.first.id);
    });
    // Every device learns every other: a _Send addresses its receiver by full name.
    peer_table peers;
    for (auto& [name, actor] : st.devices)
      peers.devices.emplace(name.to_string(), actor);
    // And where large tensors for it may go outside CAF (actors/bulk_channel.hpp).
    peers.bulk_addresses = st.bulk_addresses;
    for (auto& [name, actor] : st.devices) {
      self->send(actor, peers_atom::value, peers);
      // A task that goes away (killed, restarted) makes the next session look again.
      self->monitor(actor);
    }
    st.phase = master_state::discovery::done;
  } else {
    st.devices.clear();
    st.bulk_addresses.clear();
    st.phase = master_state::discovery::not_started; // the next session tries again
  }
  auto waiting = std::move(st.waiting_for_devices);
  st.waiting_for_devices.clear();
  for (auto& w : waiting)
    w(outcome);
}

/// Reaches the tasks the spec lists but no known service covers, through the middleman.
void connect_unreached(master_self self) {
  status bad_spec;
  auto tasks = unreached_tasks(self->state, bad_spec);
  if (!bad_spec.ok()) {
    finish_discovery(self, bad_spec);
    return;
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
  for (auto& [where, host, port] : tasks) {
    self->request(mm, bound(self->state.options.timeout_seconds), caf::connect_atom::value, host,
                  port)
      .then(
        [=, where = where](const caf::node_id&, caf::strong_actor_ptr& service,
                           const std::set<std::string>& interface) {
          if (!service) {
            done->report(make_error(errc::unavailable,
                                    "task " + where + " published no actor at its address"));
            return;
          }
          if (!self->system().assignable<task_actor>(interface)) {
            done->report(make_error(errc::unavailable,
                                    "the actor at task " + where +
                                      " is not an actorflow task (another program, or a "
                                      "different actorflow version listens there)"));
            return;
          }
          ask_devices(self, caf::actor_cast<task_actor>(service), where, done);
        },
        [=, where = where](caf::error& err) {
          done->report(make_error(errc::unavailable, "cannot reach task " + where + ": " +
                                                       self->system().render(err)));
        });
  }
}

/// Runs `then` once the cluster's devices are known, finding them first if need be.
void with_devices(master_self self, completion then) {
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
    ask_devices(self, services[i], "known to the master (service " + std::to_string(i) + ")", done);
}

device_name default_task_of(const master_state& st, const session_config& config) {
  if (!config.default_task.empty())
    if (auto parsed = device_name::parse(config.default_task))
      return *parsed;
  if (!st.options.own_task.empty())
    if (auto parsed = device_name::parse(st.options.own_task))
      return *parsed;
  std::vector<std::string> jobs;
  for (auto& [name, actor] : st.devices)
    if (std::find(jobs.begin(), jobs.end(), *name.job) == jobs.end())
      jobs.push_back(*name.job);
  device_name d;
  if (jobs.empty())
    return d;
  auto has_worker = std::find(jobs.begin(), jobs.end(), "worker") != jobs.end();
  d.job = has_worker ? std::string{"worker"} : jobs.front();
  d.replica = 0;
  d.task = 0;
  return d;
}

std::string signature_of(const master_run_request& req) {
  std::string signature;
  for (auto& f : req.fetches)
    signature += f + ",";
  signature += "|";
  for (auto& f : req.feeds)
    signature += f.first + ",";
  signature += "|";
  for (auto& t : req.targets)
    signature += t + ",";
  return signature;
}

void finish_registration(run_plan& plan, const status& outcome) {
  plan.registering = false;
  plan.registration = outcome;
  auto waiting = std::move(plan.waiting);
  plan.waiting.clear();
  for (auto& w : waiting)
    w(outcome);
}

/// The plan for `req`'s signature: placed, partitioned and sent for registration the first
/// time. `placed` receives the placement lines this call produced.
result<std::shared_ptr<run_plan>> plan_for(master_self self, master_session& s,
                                           const master_run_request& req,
                                           std::vector<std::string>& placed) {
  auto signature = signature_of(req);
  if (auto i = s.plans.find(signature); i != s.plans.end())
    return i->second;
  auto& g = *s.g;
  std::vector<int> roots;
  std::vector<output> fetches;
  for (auto& name : req.fetches) {
    auto o = g.find_output(name);
    if (!o.valid())
      return make_error(errc::invalid_argument, "fetch '" + name + "' names no tensor of the graph");
    fetches.push_back(o);
    roots.push_back(o.node_id);
  }
  for (auto& name : req.targets) {
    auto id = g.find(name);
    if (id < 0)
      return make_error(errc::invalid_argument, "target '" + name + "' names no node of the graph");
    add_target_roots(g, id, roots);
  }
  std::set<int> fed;
  std::vector<output> feeds;
  for (auto& [name, value] : req.feeds) {
    auto o = g.find_output(name);
    if (!o.valid())
      return make_error(errc::invalid_argument, "feed '" + name + "' names no tensor of the graph");
    feeds.push_back(o);
    fed.insert(o.node_id);
  }
  auto needed = prune(g, roots, fed);

  auto& st = self->state;
  std::vector<device_name> names;
  for (auto& d : st.devices)
    names.push_back(d.first);
  placement_options placement;
  placement.allow_soft_placement = s.config.allow_soft_placement;
  placement.default_task = default_task_of(st, s.config);
  AF_RETURN_IF_ERROR(place_nodes(
    g, needed, names,
    [](const std::string& op, const std::string& type, dtype t) {
      return kernel_registry::global().has(op, type, t);
    },
    placement, &placed));
  auto parts = partition_graph(g, needed, fed);
  if (!parts)
    return parts.error();

  auto plan = std::make_shared<run_plan>();
  for (auto& [device, part] : *parts) {
    partition_entry entry;
    auto found = std::find_if(st.devices.begin(), st.devices.end(),
                              [&, &device = device](auto& d) { return d.first.to_string() == device; });
    if (found == st.devices.end())
      return make_error(errc::internal, "no device actor for " + device);
    entry.actor = found->second;
    entry.device = device;
    entry.handle = ++st.next_handle;
    for (std::size_t i = 0; i < feeds.size(); ++i)
      if (g.at(feeds[i].node_id).assigned_device == device)
        entry.feeds.emplace_back(i, req.feeds[i].first);
    for (std::size_t i = 0; i < fetches.size(); ++i)
      if (g.at(fetches[i].node_id).assigned_device == device)
      {
        entry.fetch_names.push_back(req.fetches[i]);
        entry.fetch_slots.push_back(i);
      }
    plan->partitions.push_back(std::move(entry));
  }
  s.plans[signature] = plan;
  // Registration replies may outlive the session (closed meanwhile): they hold the plan.
  auto done = std::make_shared<countdown>(
    plan->partitions.size(), [plan](const status& outcome) { finish_registration(*plan, outcome); });
  std::size_t index = 0;
  for (auto& [device, part] : *parts) {
    auto& entry = plan->partitions[index++];
    auto where = "registering a partition on " + device;
    self->request(entry.actor, bound(st.options.timeout_seconds), register_atom::value,
                  make_partition_registration(entry.handle, part))
      .then([=](status& registered) { done->report(registered.with_context(where)); },
            [=](caf::error& err) { done->report(status_from_error(err).with_context(where)); });
  }
  return plan;
}

/// Runs one step of a registered plan and delivers the fetches in request order.
void run_step(master_self self, std::shared_ptr<const run_plan> plan, master_run_request& req,
              const session_config& config, std::vector<std::string> placed,
              caf::response_promise rp) {
  step_plan step;
  step.step_id = ++self->state.next_step;
  step.timeout_ms = config.timeout_ms;
  for (auto& p : plan->partitions) {
    step.device_names.push_back(p.device);
    std::vector<std::pair<std::string, tensor>> device_feeds;
    for (auto& [index, name] : p.feeds)
      device_feeds.emplace_back(name, req.feeds[index].second);
    step.calls.emplace_back(p.actor, make_run_request(p.handle, step.step_id,
                                                      std::move(device_feeds), p.fetch_names));
  }
  auto fetch_count = req.fetches.size();
  // The coordinator bounds every device's answer; waiting on it needs no bound of its own.
  self->request(self->state.coordinator, caf::infinite, run_atom::value, std::move(step))
    .then(
      [=](step_outcome& outcome) mutable {
        master_run_result out;
        out.placed = std::move(placed);
        out.outcome = std::move(outcome.outcome);
        out.execution_ns = outcome.execution_ns;
        if (out.outcome.ok()) {
          out.fetched.resize(fetch_count);
          auto& parts = plan->partitions;
          for (std::size_t k = 0; k < parts.size() && k < outcome.fetched.size(); ++k) {
            auto& slots = parts[k].fetch_slots;
            for (std::size_t j = 0; j < slots.size() && j < outcome.fetched[k].size(); ++j)
              out.fetched[slots[j]] = std::move(outcome.fetched[k][j]);
          }
        }
        rp.deliver(std::move(out));
      },
      [=](caf::error& err) mutable {
        master_run_result out;
        out.outcome = status_from_error(err);
        rp.deliver(std::move(out));
      });
}

/// Forgets session `handle` and frees its partitions on every device; `done` gets the outcome
/// once every device answered (ok for a session that is not open).
void close_session(master_self self, std::int64_t handle, completion done) {
  auto i = self->state.sessions.find(handle);
  if (i == self->state.sessions.end()) {
    done({});
    return;
  }
  auto session = std::move(i->second);
  self->state.sessions.erase(i);
  std::size_t partitions = 0;
  for (auto& [signature, plan] : session.plans)
    partitions += plan->partitions.size();
  auto freed_all = std::make_shared<countdown>(partitions, std::move(done));
  for (auto& [signature, plan] : session.plans) {
    for (auto& p : plan->partitions) {
      auto where = "freeing a partition on " + p.device;
      self->request(p.actor, bound(self->state.options.timeout_seconds), deregister_atom::value,
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

master_actor::behavior_type master(master_self self, master_options options) {
  auto& st = self->state;
  st.options = std::move(options);
  st.coordinator = spawn_step_coordinator(self->system());
  self->link_to(st.coordinator);
  // Ids unique across masters: tasks of a real cluster serve several masters' partitions and
  // steps at once. Tasks a master owns alone count from 1, which keeps tests deterministic.
  if (st.options.cluster) {
    std::random_device entropy;
    auto id_base = (static_cast<std::int64_t>(entropy()) << 20) & 0x7fffffffffffffffLL;
    st.next_handle = id_base;
    st.next_step = id_base;
    st.next_session = id_base;
  }

  self->set_down_handler([self](const caf::down_msg& down) {
    auto& st = self->state;
    auto device = std::find_if(st.devices.begin(), st.devices.end(),
                               [&](auto& d) { return d.second.address() == down.source; });
    if (device != st.devices.end() && st.phase == master_state::discovery::done) {
      // Steps on that task fail (the coordinator names it); new sessions find the cluster
      // as it is now, e.g. with the task restarted at its address.
      st.devices.clear();
      st.bulk_addresses.clear();
      st.phase = master_state::discovery::not_started;
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
    [self](stop_atom) { self->quit(caf::exit_reason::user_shutdown); },
    [self](create_atom, session_config& config, graph_def& def) -> caf::result<session_created> {
      auto rp = self->make_response_promise<session_created>();
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
          out.handle = ++st.next_session;
          st.sessions[out.handle] = master_session{def.definition, config, {}};
          if (config.owner) {
            // A client that goes away without closing (its process died, its connection
            // dropped) must not leave its partitions on the tasks.
            self->monitor(config.owner);
            st.owned_by.emplace(config.owner.address(), out.handle);
          }
          for (auto& [name, actor] : st.devices)
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
      std::vector<std::string> placed;
      auto plan = plan_for(self, s, req, placed);
      if (!plan)
        return failed_run(plan.error());
      auto rp = self->make_response_promise<master_run_result>();
      auto config = s.config;
      auto start = [self, plan = *plan, req = std::move(req), placed = std::move(placed), config,
                    rp](const status& registered) mutable {
        if (!registered.ok()) {
          // Forget the plan, so that a later run registers again (a task may be back).
          auto i = self->state.sessions.find(req.handle);
          if (i != self->state.sessions.end()) {
            auto p = i->second.plans.find(signature_of(req));
            if (p != i->second.plans.end() && p->second == plan)
              i->second.plans.erase(p);
          }
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
      auto rp = self->make_response_promise<status>();
      close_session(self, handle, [rp](const status& s) mutable { rp.deliver(s); });
      return rp;
    },
    [self](sessions_atom) {
      return static_cast<std::int64_t>(self->state.sessions.size());
    },
  };
}

} // namespace

master_actor spawn_master(caf::actor_system& sys, master_options options) {
  return sys.spawn(master, std::move(options));
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

#include "actors/session_actor.hpp"
#include "actors/transport_guard.hpp"

#include "actors/protocols/wire.hpp"
#include "actors/session_master.hpp"
#include "devices/runtime_env.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>
#include <functional>
#include <iostream>
#include <set>
#include <vector>

namespace actorflow {

namespace {

using namespace protocol;
using completion = std::function<void(const status&)>;

struct session_actor_state {
  session_options options;
  session_master master;
  /// The latest copy of the client's graph, and whether the master has it yet.
  std::shared_ptr<graph> definition;
  bool extended = false;
  /// The session's handle on the master; 0 until it is open.
  std::int64_t handle = 0;
  /// Why no run can succeed any more (a target that cannot be reached, a master that went
  /// down); ok otherwise.
  status failure;
  /// Work waiting for the session to be open and up to date, in arrival order.
  std::vector<completion> waiting;
  /// A request to the master that the waiting work depends on is in flight.
  bool busy = false;
  /// Runs sent to the master and not answered yet: failed at once when the master goes down.
  std::map<std::int64_t, caf::typed_response_promise<master_run_result>> in_flight;
  std::int64_t next_run = 0;

  ~session_actor_state() { master.release(); }

  static inline const char* name = "actorflow.session";
};

using session_self = session_actor::stateful_pointer<session_actor_state>;

void advance(session_self self);

void flush(session_self self, const status& outcome) {
  auto waiting = std::move(self->state.waiting);
  self->state.waiting.clear();
  for (auto& w : waiting)
    w(outcome);
}

/// The step after a request the waiting work depended on came back.
void resume(session_self self, const status& outcome) {
  self->state.busy = false;
  if (!outcome.ok())
    flush(self, outcome);
  else
    advance(self);
}

void fail_permanently(session_self self, const status& reason) {
  auto& st = self->state;
  st.failure = reason;
  st.handle = 0;
  auto in_flight = std::move(st.in_flight);
  st.in_flight.clear();
  for (auto& [id, promise] : in_flight)
    if (promise.pending())
      promise.deliver(master_run_result{reason, {}, 0, {}});
  flush(self, reason);
}

void use_master(session_self self, master_actor master) {
  self->state.master.master = std::move(master);
  // A master that goes down fails what waits on it instead of leaving it waiting.
  self->monitor(self->state.master.master);
}

/// Reaches options.target through the middleman without blocking.
void connect_target(session_self self) {
  auto& st = self->state;
  auto address = parse_target(st.options.target);
  if (!address) {
    fail_permanently(self, address.error());
    return;
  }
  st.busy = true;
  st.master.name = "the master at " + st.options.target;
  auto target = st.options.target;
  auto host = address->host;
  auto port = address->port;
  self->request(self->system().middleman().actor_handle(), request_bound(task_timeout(st.options)),
                caf::connect_atom::value, host, port)
    .then(
      [=](const caf::node_id&, caf::strong_actor_ptr& found,
          const std::set<std::string>& interface) {
        if (!found) {
          self->state.busy = false;
          fail_permanently(self, make_error(errc::unavailable,
                                            "no actor is published at " + target));
          return;
        }
        if (!self->system().assignable<master_actor>(interface)) {
          self->state.busy = false;
          fail_permanently(self, make_error(errc::unavailable,
                                            "the actor at " + target +
                                              " is not an actorflow master or task"));
          return;
        }
        use_master(self, caf::actor_cast<master_actor>(found));
        resume(self, {});
      },
      [=](caf::error& err) {
        self->state.busy = false;
        fail_permanently(self, make_error(errc::unavailable, "cannot reach the master at " +
                                                               target + ": " +
                                                               describe_connect_error(self->system(), err, host, port)));
      });
}

/// Opens the session on the master with the graph copy the actor holds.
void open_session(session_self self) {
  auto& st = self->state;
  st.busy = true;
  // The session actor stands for its client: when it ends, the master closes the session.
  auto config = session_config_for(st.options, caf::actor_cast<caf::actor>(self));
  auto where = "opening a session on " + st.master.name;
  st.extended = true;
  self->request(st.master.master, request_bound(master_timeout(st.options)), create_atom::value, config,
                graph_def{st.definition})
    .then(
      [=](session_created& created) {
        if (created.outcome.ok()) {
          self->state.handle = created.handle;
          log_session_devices(self->state.master.name, created.handle, created.devices);
        }
        resume(self, created.outcome.with_context(where));
      },
      [=](caf::error& err) { resume(self, status_from_error(err).with_context(where)); });
}

/// Sends the grown graph before any later run.
void send_extension(session_self self) {
  auto& st = self->state;
  st.busy = true;
  st.extended = true;
  auto where = "sending the grown graph to " + st.master.name;
  self->request(st.master.master, request_bound(master_timeout(st.options)), extend_atom::value,
                st.handle, graph_def{st.definition})
    .then([=](status& extended) { resume(self, extended.with_context(where)); },
          [=](caf::error& err) { resume(self, status_from_error(err).with_context(where)); });
}

/// Moves the waiting work on: connect, open, extend, then let it run.
void advance(session_self self) {
  auto& st = self->state;
  if (st.busy || st.waiting.empty())
    return;
  if (!st.failure.ok())
    flush(self, st.failure);
  else if (!st.master.master)
    connect_target(self);
  else if (st.handle == 0)
    open_session(self);
  else if (!st.extended)
    send_extension(self);
  else
    flush(self, {});
}

void when_ready(session_self self, completion then) {
  self->state.waiting.push_back(std::move(then));
  advance(self);
}

void log_placements(const session_options& options, const std::vector<std::string>& lines) {
  if (options.log_device_placement)
    for (auto& line : lines)
      std::cerr << line << '\n';
}

session_actor::behavior_type session_behavior(session_self self, session_options options,
                                              std::shared_ptr<graph> definition) {
  auto& st = self->state;
  st.definition = std::move(definition);
  if (!options.target.empty()) {
    st.options = std::move(options);
  } else {
    st.master = make_session_master(self->system(), options);
    st.options = std::move(options);
    use_master(self, st.master.master);
  }
  self->set_down_handler([self](caf::down_msg& down) {
    auto& st = self->state;
    if (st.master.master && down.source == st.master.master.address())
      fail_permanently(self, make_error(errc::unavailable,
                                        st.master.name + " went down (" +
                                          self->system().render(down.reason) + ")"));
  });
  return {
    [self](run_atom, master_run_request& request) {
      auto rp = self->make_response_promise<master_run_result>();
      when_ready(self, [self, rp, request = std::move(request)](const status& ready) mutable {
        auto& st = self->state;
        if (!ready.ok()) {
          rp.deliver(master_run_result{ready, {}, 0, {}});
          return;
        }
        request.handle = st.handle;
        auto id = ++st.next_run;
        st.in_flight.emplace(id, rp);
        auto where = "running a step on " + st.master.name;
        self->request(st.master.master, request_bound(master_timeout(st.options)), run_atom::value,
                      std::move(request))
          .then(
            [self, rp, id](master_run_result& result) mutable {
              self->state.in_flight.erase(id);
              log_placements(self->state.options, result.placed);
              if (rp.pending())
                rp.deliver(std::move(result));
            },
            [self, rp, id, where](caf::error& err) mutable {
              self->state.in_flight.erase(id);
              if (rp.pending())
                rp.deliver(master_run_result{status_from_error(err).with_context(where), {}, 0, {}});
            });
      });
      return rp;
    },
    [self](extend_atom, graph_def& def) -> status {
      if (!def.definition)
        return make_error(errc::invalid_argument, "extending a session needs a graph");
      self->state.definition = std::move(def.definition);
      self->state.extended = false;
      return {};
    },
    [self](close_atom) -> caf::result<status> {
      auto& st = self->state;
      if (st.handle == 0 || !st.master.master) {
        self->quit();
        return status{};
      }
      auto rp = self->make_response_promise<status>();
      self->request(st.master.master, request_bound(master_timeout(st.options)), close_atom::value,
                    st.handle)
        .then(
          [self, rp](status& closed) mutable {
            rp.deliver(closed);
            self->quit();
          },
          [self, rp](caf::error& err) mutable {
            rp.deliver(status_from_error(err));
            self->quit();
          });
      st.handle = 0;
      return rp;
    },
  };
}

} // namespace

std::shared_ptr<const master_ref> existing_master(master_actor master) {
  return std::make_shared<const master_ref>(master_ref{std::move(master)});
}

result<session_actor> spawn_session(caf::actor_system& sys, const graph& g,
                                    session_options options) {
  AF_RETURN_IF_ERROR(check_actor_system(sys, options));
  auto def = make_graph_def(g);
  if (!def)
    return def.error();
  env_or_default(options.env).prepare_host_memory();
  options.drive = nullptr;
  return sys.spawn(session_behavior, std::move(options), std::move(def->definition));
}

} // namespace actorflow

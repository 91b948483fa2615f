#include "actors/session.hpp"
#include "actors/transport_guard.hpp"

#include "actors/device_actor.hpp"
#include "actors/protocols/master.hpp"
#include "actors/protocols/task.hpp"
#include "actors/protocols/wire.hpp"
#include "actors/scheduler.hpp"
#include "actors/session_master.hpp"
#include "actors/sigpipe.hpp"
#include "devices/runtime_env.hpp"
#include "graph/fusion.hpp"
#include "graph/metrics.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <thread>

namespace actorflow {

using namespace protocol;

namespace {
std::mutex default_system_mutex;
int default_scheduler_threads = 0;
caf::actor_system* default_system = nullptr;
} // namespace

bool set_default_scheduler_threads(int threads) {
  std::lock_guard<std::mutex> guard{default_system_mutex};
  if (default_system != nullptr)
    return false;
  default_scheduler_threads = threads;
  return true;
}

caf::actor_system& default_actor_system() {
  std::lock_guard<std::mutex> guard{default_system_mutex};
  if (default_system == nullptr) {
    // Both live until exit: actors of sessions in static objects may outlive main's locals.
    // One scheduler thread per core, at least two (a long kernel on one must not stall every
    // other actor). CAF's own default, at least four, put four threads on two cores: the
    // device actor moved between them (cold caches) and each message woke a sleeping one,
    // 27 context switches a step of the 1-thread MLP against 14, 7-12% fewer steps/s.
    auto threads = default_scheduler_threads > 0
                     ? default_scheduler_threads
                     : std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
    auto* config = network_config(static_cast<std::size_t>(threads)).release();
    // CAF's scheduler, multiplexer and utility threads start here and keep this mask: none of
    // them is killed by SIGPIPE, whatever the embedder's disposition.
    sigpipe_blocked during_start;
    default_system = new caf::actor_system{*config};
  }
  return *default_system;
}

namespace {

metric_gauge& open_client_sessions() {
  static auto& open = default_metrics().gauge("actorflow_client_sessions_open",
                                              "Sessions this process's clients hold open.");
  return open;
}

} // namespace

struct session::impl {
  impl(caf::actor_system& sys, graph& g, session_options opts)
    : system(sys), g(g), options(std::move(opts)), answer_poll(idle_poll_of(sys)) {
    open_client_sessions().add(1);
    env_or_default(options.env).prepare_host_memory();
    setup = check_actor_system(system, options);
    if (!setup.ok())
      return;
    if (!options.target.empty()) {
      setup = connect_target();
      return;
    }
    master = make_session_master(system, options);
  }

  /// Reaches the master at options.target; errors quote the target.
  status connect_target() {
    auto address = parse_target(options.target);
    if (!address)
      return address.error();
    master.name = "the master at " + options.target;
    // Within the session's bound on answers, connecting included.
    auto found = reach_published_actor(system, address->host, address->port, task_timeout(options),
                                       {options.connect_timeout_seconds,
                                        "the master at " + options.target});
    if (!found)
      return found.error().with_context("cannot reach the master at " + options.target);
    if (!system.assignable<master_actor>(found->interface))
      return make_error(errc::unavailable,
                        "the actor at " + options.target +
                          " is not an actorflow master or task (another program, or a "
                          "different actorflow version listens there)");
    master.master = caf::actor_cast<master_actor>(found->actor);
    return {};
  }

  /// Frees the session's partitions on every task and forgets its handle: the next run opens a
  /// new session. Waits (bounded) when the master is remote, so that the message leaves before
  /// this process may exit.
  void close_on_master() {
    if (handle != 0) {
      if (master.owned) {
        // From the owner: the master takes a session's close only from its owner's node.
        caf::send_as(owner, master.master, close_atom::value, handle);
      } else if (master_hung || master_down) {
        // It would not answer: the close is sent, in case it resumes, and nothing waits.
        caf::send_as(owner, master.master, close_atom::value, handle);
      } else {
        status closed;
        static_cast<void>(ask(task_timeout(options) > 0 ? task_timeout(options) : 10.0, closed,
                              close_atom::value, handle));
      }
    }
    if (owner)
      caf::anon_send_exit(owner, caf::exit_reason::user_shutdown);
    owner = caf::actor{};
    handle = 0;
    sent_nodes = 0;
    devices.clear();
  }

  ~impl() {
    open_client_sessions().add(-1);
    close_on_master();
    master.release();
    if (options.drive)
      options.drive();
  }

  /// Sends `args` to the master and waits for its single answer, stored in `answer`: at most
  /// `timeout_seconds` (0: without bound), and never past the master going down.
  template <class T, class... Ts>
  status ask(double timeout_seconds, T& answer, Ts&&... args) {
    return ask_probing(timeout_seconds, 0.0, answer, std::forward<Ts>(args)...);
  }

  /// ask(), and once `probe_after_seconds` (0: never) passed without the answer, the master is
  /// probed: one that answers neither that nor the request within probe_bound() is hung or
  /// unreachable, which fails the request then, not after all of `timeout_seconds` (which
  /// leaves a live master time to register partitions and probe its tasks).
  template <class T, class... Ts>
  status ask_probing(double timeout_seconds, double probe_after_seconds, T& answer, Ts&&... args) {
    using std::chrono::steady_clock;
    auto microseconds = [](double seconds) {
      return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(seconds));
    };
    auto holder = take_waiter();
    auto& self = *holder;
    self->monitor(master.master);
    self->send(master.master, std::forward<Ts>(args)...);
    if (options.drive)
      options.drive();
    status transport;
    bool done = false;
    auto on_answer = [&](T& value) {
      answer = std::move(value);
      done = true;
    };
    auto on_error = [&](caf::error& err) {
      transport = status_from_error(err);
      done = true;
    };
    auto on_down = [&](caf::down_msg& down) {
      transport = make_error(errc::unavailable,
                             master.name + " went down (" + system.render(down.reason) + ")");
      master_down = !options.target.empty();
      done = true;
    };
    auto deadline = steady_clock::now() + microseconds(timeout_seconds);
    poll_mailbox_briefly(*self.ptr(), answer_poll);
    if (timeout_seconds > 0 && probe_after_seconds > 0 && probe_after_seconds < timeout_seconds) {
      self->receive(on_answer, on_error, on_down, caf::after(microseconds(probe_after_seconds)) >> [] {});
      if (!done) {
        auto bound_ms = static_cast<std::int64_t>(probe_after_seconds * 1000);
        // Only the probe's own silence counts: its other errors, the step's answer and a down
        // message are for the loop below.
        bool silent = false;
        self->request(master.master, caf::duration{probe_bound(bound_ms)}, sessions_atom::value)
          .receive([](std::int64_t) {},
                   [&](caf::error& err) { silent = err == caf::sec::request_timeout; });
        if (silent) {
          master_hung = true;
          transport = make_error(errc::deadline_exceeded,
                                 "no answer within " + std::to_string(bound_ms) +
                                   " ms, nor to a probe after it: hung or unreachable");
          done = true;
        }
      }
    }
    while (!done) {
      if (timeout_seconds <= 0) {
        self->receive(on_answer, on_error, on_down);
        break;
      }
      auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - steady_clock::now());
      auto expired = [&] {
        transport = make_error(errc::deadline_exceeded,
                               "no answer within " + std::to_string(timeout_seconds) + " s");
        done = true;
      };
      if (left.count() <= 0) {
        expired();
        break;
      }
      self->receive(on_answer, on_error, on_down, caf::after(left) >> expired);
    }
    if (transport.ok())
      master_hung = false;
    // A monitor outlives its observer: without this, every step would leave one behind on the
    // master.
    self->demonitor(master.master.address());
    // Only a waiter that got its answer and holds nothing else may serve the next call: after a
    // timeout, an error or a down message a late answer could still arrive and be taken for
    // the next call's.
    if (transport.ok() && self->mailbox().empty())
      give_back_waiter(std::move(holder));
    return transport;
  }

  /// Opens the session on the master the first time, and sends the graph again when it has
  /// grown since (TensorFlow's ExtendSession).
  status sync_graph() {
    if (master_down && handle == 0) {
      setup = connect_target();
      master_down = !setup.ok();
    }
    AF_RETURN_IF_ERROR(setup);
    if (handle != 0 && g.size() == sent_nodes)
      return {};
    auto def = make_graph_def(g);
    if (!def)
      return def.error();
    if (handle == 0) {
      // Lives as long as this session: if this process dies without closing the session, the
      // master sees it go down and frees the session's partitions.
      // It sends the close of an in-process master's session, and takes its answer.
      owner = system.spawn([]() -> caf::behavior {
        // status: a close's answer; int64: a cancel's (cancel_running_steps).
        return {[](stop_atom) {}, [](const status&) {}, [](std::int64_t) {}};
      });
      auto config = session_config_for(options, owner);
      session_created created;
      // The master may first wait for tasks that are not listening yet (connect_timeout).
      auto bound = master_timeout(options);
      AF_RETURN_IF_ERROR(ask(bound > 0 ? bound + options.connect_timeout_seconds : 0.0, created,
                             create_atom::value, config,
                             std::move(*def))
                           .with_context("opening a session on " + master.name));
      AF_RETURN_IF_ERROR(created.outcome);
      handle = created.handle;
      devices = std::move(created.devices);
      log_session_devices(master.name, handle, devices);
    } else {
      status extended;
      AF_RETURN_IF_ERROR(ask(master_timeout(options), extended, extend_atom::value, handle,
                             std::move(*def))
                           .with_context("sending the grown graph to " + master.name));
      AF_RETURN_IF_ERROR(extended);
    }
    sent_nodes = g.size();
    return {};
  }

  /// Records placements the master made: the log, and each node's assigned_device in the
  /// client's graph (as a local session always did).
  void note_placements(const std::vector<std::string>& lines) {
    for (auto& line : lines) {
      if (options.log_device_placement)
        std::cerr << line << '\n';
      placement_log.push_back(line);
      if (auto fused = parse_fusion_line(line)) {
        note_fusion(g, *fused);
        continue;
      }
      auto colon = line.find(": ");
      if (colon == std::string::npos)
        continue;
      auto id = g.find(line.substr(0, colon));
      if (id >= 0)
        g.at(id).assigned_device = line.substr(colon + 2);
    }
  }

  result<std::vector<tensor>> run(const std::vector<output>& fetches, const feed_list& feeds,
                                  const std::vector<output>& targets, const run_options& per_step,
                                  std::int64_t* execution_ns) {
    AF_RETURN_IF_ERROR(g.status());
    auto request = make_master_run_request(0, fetches, feeds, targets, &g);
    if (!request)
      return request.error();
    request->fence = per_step.fence;
    request->all_or_nothing = per_step.all_or_nothing;
    request->timeout_ms = per_step.timeout_ms;
    request->cancel_generation = cancel_generation.load();
    master_run_result answer;
    {
      std::lock_guard<std::mutex> guard{mutex};
      AF_RETURN_IF_ERROR(sync_graph());
      request->handle = handle;
    }
    // A remote master may hang with its process; it names any other hung task within the
    // task bound and a probe, so a probe of its own after that bound tells the two apart.
    auto probe_after = options.target.empty() ? 0.0 : task_timeout(options);
    AF_RETURN_IF_ERROR(ask_probing(master_timeout(options), probe_after, answer, run_atom::value,
                                   std::move(*request))
                         .with_context("running a step on " + master.name));
    {
      std::lock_guard<std::mutex> guard{mutex};
      note_placements(answer.placed);
    }
    AF_RETURN_IF_ERROR(answer.outcome);
    *execution_ns = answer.execution_ns;
    return std::move(answer.fetched);
  }

  /// A blocking actor to wait for one answer with, idle from an earlier call if there is one:
  /// destroying a scoped_actor wakes CAF's clock thread (it cancels the actor's timeouts
  /// there), once per step when each call made its own.
  std::unique_ptr<caf::scoped_actor> take_waiter() {
    {
      std::lock_guard<std::mutex> guard{waiters_mutex};
      if (!idle_waiters.empty()) {
        auto waiter = std::move(idle_waiters.back());
        idle_waiters.pop_back();
        return waiter;
      }
    }
    return std::make_unique<caf::scoped_actor>(system);
  }

  void give_back_waiter(std::unique_ptr<caf::scoped_actor> waiter) {
    std::lock_guard<std::mutex> guard{waiters_mutex};
    idle_waiters.push_back(std::move(waiter));
  }

  caf::actor_system& system;
  graph& g;
  session_options options;
  /// How long a call polls for its answer before it sleeps (actors/scheduler.hpp).
  std::chrono::microseconds answer_poll;
  /// Waiters of finished calls (take_waiter), as many as calls ran at once at most.
  std::mutex waiters_mutex;
  std::vector<std::unique_ptr<caf::scoped_actor>> idle_waiters;
  /// Why the session cannot run (a bad or unreachable target, an unfit actor system), or ok.
  status setup;
  session_master master;
  std::mutex mutex;
  /// Stands for this session on the master (session_config::owner).
  caf::actor owner;
  /// Counts cancel_running_steps calls; a step carries the count it began under, so a cancel
  /// between its start and its arrival at the master still reaches it.
  std::atomic<std::int64_t> cancel_generation{0};
  /// The session's handle on the master; 0 until the first run opens it.
  std::int64_t handle = 0;
  /// The master's last answer was none, not even to a probe (ask_probing).
  bool master_hung = false;
  /// The master reached at options.target went down: the next session opened reaches the
  /// target again (a master restarted at its address), instead of the dead actor.
  bool master_down = false;
  /// Nodes of the client's graph the master has.
  std::size_t sent_nodes = 0;
  std::vector<std::string> devices;
  std::vector<std::string> placement_log;
};

session::session(graph& g, session_options options)
  : session(default_actor_system(), g, std::move(options)) {}

session::session(caf::actor_system& system, graph& g, session_options options)
  : impl_(std::make_unique<impl>(system, g, std::move(options))) {}

session::~session() = default;

result<std::vector<tensor>> session::run(const std::vector<output>& fetches, const feed_list& feeds,
                                         const std::vector<output>& targets, step_stats* stats) {
  return run_with(run_options{}, fetches, feeds, targets, stats);
}

result<std::vector<tensor>> session::run_with(const run_options& options,
                                         const std::vector<output>& fetches, const feed_list& feeds,
                                         const std::vector<output>& targets, step_stats* stats) {
  auto started = std::chrono::steady_clock::now();
  std::int64_t execution_ns = 0;
  auto r = impl_->run(fetches, feeds, targets, options, &execution_ns);
  static step_metrics client_steps{"actorflow_client", "steps (session runs) of this process's clients"};
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  client_steps.record(r.ok(), seconds);
  if (stats != nullptr) {
    stats->total_seconds = seconds;
    stats->execution_seconds = static_cast<double>(execution_ns) * 1e-9;
  }
  return r;
}

status session::run_targets(const std::vector<output>& targets, const feed_list& feeds) {
  auto r = run_with(run_options{}, {}, feeds, targets);
  return r ? status{} : r.error();
}

void session::cancel_running_steps() {
  std::lock_guard<std::mutex> guard{impl_->mutex};
  auto generation = ++impl_->cancel_generation;
  // From the owner: the master takes a session's cancel only from its client's node.
  if (impl_->handle != 0 && impl_->owner)
    caf::send_as(impl_->owner, impl_->master.master, cancel_atom::value, impl_->handle,
                 static_cast<std::int64_t>(generation));
}

const std::vector<std::string>& session::placement_log() const { return impl_->placement_log; }

void session::reopen() {
  std::lock_guard<std::mutex> guard{impl_->mutex};
  impl_->close_on_master();
}

std::vector<std::string> session::device_names() const {
  std::lock_guard<std::mutex> guard{impl_->mutex};
  // Opens the session on its master if no step has yet: the master knows the devices.
  if (impl_->handle == 0 && !impl_->sync_graph().ok())
    return {};
  return impl_->devices;
}

} // namespace actorflow

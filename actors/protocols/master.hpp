#pragma once
/// The master's protocol: clients open sessions on a master, which places their graph over the
/// cluster's devices, registers one partition per device with the task that owns it and runs
/// steps (TensorFlow's MasterService). `master_actor` is a CAF typed actor: a wrong message does
/// not compile. Every task serves it too (protocols/task.hpp).
///   auto master = sys.middleman().remote_actor<protocol::master_actor>("127.0.0.1", port);
///   auto def = make_graph_def(g);                                    // a copy of the graph
///   self->request(*master, timeout, create_atom::value, make_session_config(), *def)
///     .then([](session_created& s) { ... s.handle ... });
///   auto run = make_master_run_request(handle, {c}, {{x, value}});  // outputs, not strings
///   self->request(*master, timeout, run_atom::value, *run).then([](master_run_result& r) {});
/// A session whose owner actor (session_config::owner) goes down is closed as if asked to.
/// Feeds and fetches travel as tensor names ("node:0") and targets as node names: names are
/// what both sides of the wire agree on; the factories below make them from graph outputs.
/// Failures travel inside the answers as statuses naming node and task.

#include "actors/protocols/device.hpp"
#include "graph/graph.hpp"
#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include "actors/protocols/atoms.hpp"

#include <caf/actor.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/save_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace actorflow::protocol {

/// What a session asks of placement and of the master (a slice of TensorFlow's ConfigProto).
struct session_config {
  bool allow_soft_placement = false;
  bool log_device_placement = false;
  /// Where nodes naming neither job nor task go ("/job:worker/task:0"); empty: the master's
  /// rule (task 0 of job "worker", else of the first job).
  std::string default_task;
  /// Bound on every answer from a task during a step; 0 waits without bound.
  std::int64_t timeout_ms = 0;
  /// The most the session's tensors may hold on each device (devices/memory_budget.hpp);
  /// 0: no limit but the task's own (ACTORFLOW_SESSION_MEMORY_BYTES).
  std::int64_t memory_limit_bytes = 0;
  /// Run the fusion pass on the partitions (session_options::fuse_ops).
  bool fuse_ops = true;
  /// The mixed-precision policy (session_options::mixed_precision): "", "bfloat16".
  std::string mixed_precision;
  /// An actor that lives as long as the client's session: the master monitors it and closes
  /// the session when it goes down (the client process died or its connection dropped).
  caf::actor owner;
};

/// A client's graph. The master owns it and records placements in it; it is a copy, never the
/// client's own graph, and travels as Cap'n Proto bytes between processes.
struct graph_def {
  std::shared_ptr<graph> definition;
};

struct session_created {
  status outcome;
  std::int64_t handle = 0;
  /// Full names of every device the session may use.
  std::vector<std::string> devices;
};

struct master_run_request {
  std::int64_t handle = 0;
  std::vector<std::pair<std::string, tensor>> feeds;
  std::vector<std::string> fetches;
  std::vector<std::string> targets;
  /// Given to every device's part of the step (devices/update_fence.hpp).
  update_fence fence;
  /// The step's first variable updates apply on every device or on none (run_options).
  bool all_or_nothing = false;
  /// The whole step's bound (run_options::timeout_ms); 0: none.
  std::int64_t timeout_ms = 0;
  /// The client's cancel generation when the step began (session::cancel_running_steps): a
  /// cancel of a later generation aborts it wherever it is, even before it started.
  std::int64_t cancel_generation = 0;
};

struct master_run_result {
  status outcome;
  /// In the order of the request's fetches.
  std::vector<tensor> fetched;
  /// The longest any device spent executing its partition.
  std::int64_t execution_ns = 0;
  /// Nodes placed by this run, as "name: /job:.../device:CPU:0" lines.
  std::vector<std::string> placed;
};

/// A master (actors/master.hpp), or a task serving as one (protocols/task.hpp).
using master_actor = caf::typed_actor<
  // Opens a session on a copy of the client's graph.
  caf::replies_to<create_atom, session_config, graph_def>::with<session_created>,
  // The client's graph grew: the master takes the new copy; placed nodes keep their devices.
  caf::replies_to<extend_atom, std::int64_t, graph_def>::with<status>,
  // Runs one step of a session.
  caf::replies_to<run_atom, master_run_request>::with<master_run_result>,
  // Frees the session's partitions on every device.
  caf::replies_to<close_atom, std::int64_t>::with<status>,
  // How many sessions are open now.
  caf::replies_to<sessions_atom>::with<std::int64_t>,
  // Aborts the session's steps in flight (its client gave up on them: Ctrl-C), and refuses
  // its run requests of earlier cancel generations that come later; each fails with aborted.
  // (handle, the client's cancel generation now); answers how many steps there were.
  caf::replies_to<cancel_atom, std::int64_t, std::int64_t>::with<std::int64_t>,
  // Stops the master (and, for a task, the task).
  caf::reacts_to<stop_atom>>;

/// Sends `whom` (a task or master) a stop from this process. Tasks and masters refuse a stop
/// from another node, and an anonymous one (whose node they cannot tell): use this, not
/// anon_send.
void send_stop(const caf::actor& whom);
template <class Handle>
void send_stop(const Handle& whom) {
  send_stop(caf::actor_cast<caf::actor>(whom));
}

/// For the stop handler of `self` (named `name` in the log): whether the stop came from an
/// actor of this node. Otherwise says on stderr that it was refused, and from where.
bool stop_from_own_node(caf::local_actor* self, const std::string& name);

/// A session_config with these settings; `timeout_ms` 0 waits without bound.
session_config make_session_config(bool allow_soft_placement = false,
                                   bool log_device_placement = false,
                                   std::int64_t timeout_ms = 0, caf::actor owner = {},
                                   std::string default_task = {});

/// A copy of `g` for a master (it records placements in its own copy), made by a round trip
/// through the graph codec, which also checks it. Fails with the graph's construction error.
result<graph_def> make_graph_def(const graph& g);

/// A run request for session `handle`: `fetches` are returned in order, `feeds` replace
/// tensors, `targets` run without being returned. Checks that every output belongs to one
/// graph (`of_graph` when given) and that each fed value has the dtype and a shape compatible
/// with its tensor; errors name the tensor.
result<master_run_request> make_master_run_request(std::int64_t handle,
                                                   const std::vector<output>& fetches,
                                                   const feed_list& feeds = {},
                                                   const std::vector<output>& targets = {},
                                                   const graph* of_graph = nullptr);

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_config& x) {
  return f(caf::meta::type_name("session_config"), x.allow_soft_placement,
           x.log_device_placement, x.default_task, x.timeout_ms, x.memory_limit_bytes, x.fuse_ops, x.mixed_precision, x.owner);
}

/// Encoded with the partition codec (wire::save/load of a graph), whose loads are checked.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, graph_def& x) {
  if constexpr (std::is_base_of_v<caf::serializer, Inspector>) {
    return f(caf::meta::type_name("graph_def"), caf::meta::save_callback([&] {
               return wire::save(f, std::shared_ptr<const graph>{x.definition});
             }));
  } else if constexpr (std::is_base_of_v<caf::deserializer, Inspector>) {
    return f(caf::meta::type_name("graph_def"), caf::meta::load_callback([&] {
               std::shared_ptr<const graph> loaded;
               auto err = wire::load(f, loaded);
               // wire::load made this graph (make_shared<graph>); it is ours to modify.
               x.definition = std::const_pointer_cast<graph>(loaded);
               return err;
             }));
  } else {
    auto nodes = x.definition ? std::to_string(x.definition->size()) + " nodes" : "no graph";
    return f(caf::meta::type_name("graph_def"), nodes);
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_created& x) {
  return f(caf::meta::type_name("session_created"), x.outcome, x.handle, x.devices);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, master_run_request& x) {
  return f(caf::meta::type_name("master_run_request"), x.handle, x.feeds, x.fetches, x.targets,
           x.fence, x.all_or_nothing, x.timeout_ms, x.cancel_generation);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, master_run_result& x) {
  return f(caf::meta::type_name("master_run_result"), x.outcome, x.fetched, x.execution_ns,
           x.placed);
}

} // namespace actorflow::protocol

#pragma once
/// TensorFlow 1's tf.train.replica_device_setter: variables round-robin over ps tasks, every
/// other op on the worker device.
///   auto setter = replica_device_setter(2);            // ps tasks 0, 1; others on /job:worker
///   if (!setter) return setter.error();
///   { auto dev = g.device(*setter); auto v = ops::variable(g, 1.f, "v"); ... }
/// The setter is an outer device function: graph::add_node applies the device scopes nested
/// inside it first, and the setter only fills the fields they leave unset, so
/// `g.device("/gpu:1")` inside it yields "/job:worker/device:GPU:1". With a cluster spec, see
/// actors/cluster_spec.hpp's replica_device_setter_for, which counts the ps tasks itself.

#include "graph/graph.hpp"
#include "graph/status.hpp"

#include <functional>
#include <string>
#include <vector>

namespace actorflow {

/// Chooses the ps task (0 .. ps_tasks-1) of a node that goes to the parameter servers.
using ps_strategy = std::function<int(const node&)>;

struct replica_device_setter_options {
  /// Number of ps tasks; 0 means no parameter servers, so variables go to the worker device too.
  int ps_tasks = 0;
  /// Device (usually just a job) of the parameter servers; the chosen task is added to it.
  /// Empty means no parameter servers, as with ps_tasks == 0.
  std::string ps_device = "/job:ps";
  /// Device of every op that is not a ps op; empty leaves those ops' requests as they are.
  std::string worker_device = "/job:worker";
  /// True: the setter fills only the fields a node's request leaves unset (TF's default).
  /// False: a node that already requests any device keeps that request untouched.
  bool merge_devices = true;
  /// Ops that live on the parameter servers.
  std::vector<std::string> ps_ops = {"VariableV2", "HashEmbeddingTable"};
  /// Picks the ps task of each ps op; empty means round-robin 0, 1, ..., ps_tasks-1, 0, ...
  /// It is called only for ps ops whose request names no job or the ps job (as in TF), once
  /// per node, from the thread building the graph.
  actorflow::ps_strategy strategy;
};

/// A device function for graph::device(fn) placing ps ops on the ps tasks and everything else
/// on the worker device, merged under each node's own request (fields the node, or a device
/// scope nested inside the setter's, already set win). The returned function and its copies
/// share one round-robin counter; use one setter per graph. Fails with invalid_argument on a
/// negative ps_tasks or an unparsable ps_device / worker_device (quoting it).
result<device_function> replica_device_setter(replica_device_setter_options options);

/// Shorthand: `ps_tasks` ps tasks on "/job:ps", everything else on "/job:worker".
result<device_function> replica_device_setter(int ps_tasks);

} // namespace actorflow

#pragma once
/// The simple placer (SPEC "Devices and placement").
///   placement_options opts; opts.allow_soft_placement = true;
///   std::vector<std::string> log;
///   status s = place_nodes(g, needed_ids, devices, has_kernel, opts, &log);
/// Rules, in order: a node placed earlier stays; a node colocated with another (attr
/// "colocate_with", e.g. a variable's assign and read) goes where its group goes; a pinned node
/// goes to a device matching its request that has a kernel for it; otherwise the device of the
/// requested (or default) task with the highest priority (GPU 0 before CPU 0) that has a
/// kernel for it.

#include "graph/device_name.hpp"
#include "graph/graph.hpp"

#include <functional>
#include <string>
#include <vector>

namespace actorflow {

/// Whether a kernel exists for (op, device type, dtype); the executor's registry answers it.
using kernel_support =
  std::function<bool(const std::string& op, const std::string& device_type, dtype type)>;

struct placement_options {
  /// Pinned nodes whose device does not exist or has no kernel fall back to a device that can
  /// run them instead of failing.
  bool allow_soft_placement = false;
  /// Defaults for requests that leave job / task unset (the master's own task).
  device_name default_task;
  /// How much a device type is preferred for nodes no one pinned (TensorFlow's device factory
  /// priorities: GPU 210, CPU 70); higher first. Empty: those two, and 0 for other types.
  std::function<int(const std::string& type)> device_priority;
};

/// Places every node in `node_ids` that has no assigned device yet, writing the full device
/// name into node::assigned_device. `devices` are fully specified. For each node placed now,
/// a line "name: /job:.../device:CPU:0" is appended to `log` when it is not null. On error
/// nothing is placed and the message names the node and its requested device.
status place_nodes(graph& g, const std::vector<int>& node_ids, const std::vector<device_name>& devices,
                   const kernel_support& has_kernel, const placement_options& options,
                   std::vector<std::string>* log);

} // namespace actorflow

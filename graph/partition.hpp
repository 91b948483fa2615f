#pragma once
/// Pruning and partitioning a placed graph into one graph per device, with a _Send/_Recv pair
/// on every edge that crosses devices.
///   auto needed = prune(g, fetch_ids, target_ids, fed_outputs);
///   auto parts = partition_graph(g, needed);   // device name -> partition graph
/// A partition is an ordinary graph (so it serialises like one); node names are kept.

#include "graph/graph.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace actorflow {

/// The ids of the nodes that `roots` need, through data and control inputs, in ascending order.
/// The inputs of nodes in `fed` are not followed (a fed node's value comes from the feed).
/// Needing one member of a collective (nodes sharing a "group_key" attr) needs them all, and
/// needing a loop gradient's StackPop needs the StackPushes of its "stack_name".
std::vector<int> prune(const graph& g, const std::vector<int>& roots, const std::set<int>& fed);

/// Appends to `roots` what running target `target` needs: the node itself, or for a NoOp (a
/// group such as an optimizer's train op or the initializer) what it waits for, recursively. A
/// NoOp does nothing, so running its inputs is running it; leaving it out spares a partition on
/// its device and a message hop at the end of every step (TensorFlow's dependency optimizer
/// removes such NoOps too).
void add_target_roots(const graph& g, int target, std::vector<int>& roots);

/// Splits the placed nodes `node_ids` of `g` by assigned device. Cross-device data edges get a
/// "_Send" in the producer's partition and a "_Recv" in the consumer's (one pair per tensor and
/// destination device); cross-device control edges get a pair carrying a dummy scalar.
/// _Send/_Recv attrs: "key" (a rendezvous_key's text, graph/rendezvous_key.hpp, carrying the
/// sending device's incarnation from `incarnations`, by full device name; 0 for a device not
/// listed), "send_device", "recv_device"; _Recv also "dtype" and "shape", and "may_be_dead"
/// when the graph has Switches (graph/control_flow.hpp). Inputs of fed nodes
/// are dropped (they are not computed).
result<std::map<std::string, std::shared_ptr<graph>>>
partition_graph(const graph& g, const std::vector<int>& node_ids, const std::set<int>& fed,
                const std::map<std::string, std::uint64_t>& incarnations = {});

} // namespace actorflow

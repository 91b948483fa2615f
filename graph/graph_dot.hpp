#pragma once
/// A picture of a graph in graphviz's language (SPEC: "a picture of the placed and partitioned
/// graph coloured by device"): each node filled with its device's colour and grouped in a box
/// per name scope; every tensor that crosses devices drawn through a _Send on its producer's
/// device and a _Recv on its consumer's, one pair per tensor and receiving device, as
/// partitioning places them; control dependencies dotted; a legend of the devices.
///   session s{g, options};  s.run_targets({train});        // places the graph
///   std::string dot = graph_to_dot(g);                       // `dot -Tsvg` draws it
/// serialization/graph_picture.hpp writes it as a .dot, .svg or .png file.

#include "graph/graph.hpp"

#include <string>

namespace actorflow {

struct graph_dot_options {
  /// Shown above the picture; empty: none.
  std::string title;
};

/// The placed graph (node.assigned_device) in the DOT language; nodes no step has run yet are
/// grouped as "not placed", by the device they ask for.
std::string graph_to_dot(const graph& g, const graph_dot_options& options = {});

} // namespace actorflow

#pragma once
/// Writes a picture of a placed graph (graph/graph_dot.hpp) to a file: the DOT text for a
/// ".dot" path, or the drawing graphviz's `dot` makes of it for ".svg", ".png" and ".pdf".
///   AF_RETURN_IF_ERROR(write_graph_picture(g, "out/graph.svg"));
/// The file appears whole or not at all. Errors name the file, and say when `dot` is missing
/// (Debian's graphviz package) or failed.

#include "graph/graph.hpp"
#include "graph/graph_dot.hpp"
#include "graph/status.hpp"

#include <string>

namespace actorflow {

status write_graph_picture(const graph& g, const std::string& path,
                           const graph_dot_options& options = {});

} // namespace actorflow

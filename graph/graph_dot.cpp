#include "graph/graph_dot.hpp"

#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

namespace actorflow {

namespace {

/// `text` as a DOT string literal.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

/// Where a node runs; nodes no step has run yet are grouped by what they asked for.
std::string device_of(const node& n) {
  if (!n.assigned_device.empty())
    return n.assigned_device;
  if (!n.requested_device.empty())
    return "not placed (asks for " + n.requested_device + ")";
  return "not placed";
}

/// Light fills that tell up to twelve devices apart, then repeat.
const char* colour(std::size_t index) {
  static const char* palette[] = {"#a6cee3", "#b2df8a", "#fb9a99", "#fdbf6f", "#cab2d6",
                                  "#ffff99", "#8dd3c7", "#bebada", "#fccde5", "#d9d9d9",
                                  "#ccebc5", "#ffed6f"};
  return palette[index % (sizeof palette / sizeof *palette)];
}

/// The name scopes of the graph as a tree; each holds the nodes whose name ends in it.
struct scope {
  std::map<std::string, std::unique_ptr<scope>> children;
  std::vector<std::string> statements;
};

/// The box of a node named "a/b/c": scope "a/b" within "a"; or "a/b/c" itself when other
/// nodes are named inside it (a variable "w" goes in the box of "w/read", "w/Assign").
scope& scope_of(scope& root, const std::string& name, const std::set<std::string>& scopes) {
  auto* at = &root;
  std::size_t begin = 0;
  auto path = scopes.count(name) > 0 ? name + "/" : name;
  for (auto slash = path.find('/'); slash != std::string::npos; slash = path.find('/', begin)) {
    auto& child = at->children[path.substr(0, slash)];
    if (!child)
      child = std::make_unique<scope>();
    at = child.get();
    begin = slash + 1;
  }
  return *at;
}

void emit(std::ostringstream& out, const scope& s, int depth, int& clusters) {
  std::string indent(static_cast<std::size_t>(depth) * 2, ' ');
  for (auto& line : s.statements)
    out << indent << line << '\n';
  for (auto& [child_name, child] : s.children) {
    out << indent << "subgraph cluster_" << clusters++ << " {\n";
    auto last = child_name.rfind('/');
    out << indent << "  label=" << quoted(last == std::string::npos ? child_name : child_name.substr(last + 1))
        << "; style=rounded; color=\"#999999\"; fontsize=10;\n";
    emit(out, *child, depth + 1, clusters);
    out << indent << "}\n";
  }
}

} // namespace

std::string graph_to_dot(const graph& g, const graph_dot_options& options) {
  // Devices in name order, each with its colour.
  std::map<std::string, std::size_t> devices;
  for (std::size_t id = 0; id < g.size(); ++id)
    devices.emplace(device_of(g.at(static_cast<int>(id))), 0);
  std::size_t next = 0;
  for (auto& [device, index] : devices)
    index = next++;

  // Every name scope some node is named in.
  std::set<std::string> scopes;
  for (std::size_t id = 0; id < g.size(); ++id) {
    const auto& name = g.at(static_cast<int>(id)).name;
    for (auto slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1))
      scopes.insert(name.substr(0, slash));
  }
  scope root;
  auto box_of = [&](const std::string& name) -> scope& { return scope_of(root, name, scopes); };
  std::vector<std::string> edges;
  // One _Send/_Recv pair per (producer, output, receiving device), as partitioning makes them.
  std::set<std::tuple<int, int, std::string>> pairs;
  for (std::size_t id = 0; id < g.size(); ++id) {
    const auto& n = g.at(static_cast<int>(id));
    auto device = device_of(n);
    auto node_id = "n" + std::to_string(id);
    auto last = n.name.rfind('/');
    auto label = (last == std::string::npos ? n.name : n.name.substr(last + 1)) + "\n" + n.op;
    // Fusion (graph/fusion.hpp): a fused node, in a partition or recorded in a client's graph,
    // says what it runs; the nodes it absorbed are drawn dashed.
    auto fused_op = n.attr_or<std::string>("_fused_op", n.has_attr("fused_ops") ? n.op : "");
    auto fused_ops = n.attr_or<std::string>("_fused_ops", n.attr_or<std::string>("fused_ops", ""));
    std::string style;
    if (!fused_op.empty())
      label += "\n= " + fused_op + " [" + fused_ops + "]";
    if (auto* into = n.attr<std::string>("_fused_into")) {
      label += "\n(fused into " + *into + ")";
      style = ", style=\"rounded,filled,dashed\"";
    }
    box_of(n.name)
      .statements.push_back(node_id + " [label=" + quoted(label) + ", tooltip=" +
                            quoted(n.name + " on " + device) + ", fillcolor=\"" +
                            colour(devices.at(device)) + "\"" + style + "];");
    for (auto& input : n.inputs) {
      const auto& producer = g.at(input.node_id);
      auto from = "n" + std::to_string(input.node_id);
      auto producer_device = device_of(producer);
      if (producer_device == device) {
        edges.push_back(from + " -> " + node_id + ";");
        continue;
      }
      auto suffix = std::to_string(input.node_id) + "_" + std::to_string(input.index) + "_" +
                    std::to_string(devices.at(device));
      auto send = "send_" + suffix, recv = "recv_" + suffix;
      if (pairs.emplace(input.node_id, input.index, device).second) {
        auto tensor = producer.name + ":" + std::to_string(input.index);
        box_of(producer.name)
          .statements.push_back(send + " [label=\"_Send\", shape=cds, fontsize=9, tooltip=" +
                                quoted(tensor + " to " + device) + ", fillcolor=\"" +
                                colour(devices.at(producer_device)) + "\"];");
        box_of(n.name)
          .statements.push_back(recv + " [label=\"_Recv\", shape=cds, fontsize=9, tooltip=" +
                                quoted(tensor + " from " + producer_device) + ", fillcolor=\"" +
                                colour(devices.at(device)) + "\"];");
        edges.push_back(from + " -> " + send + ";");
        edges.push_back(send + " -> " + recv + " [style=dashed, color=\"#d62728\", penwidth=1.5, label=" +
                        quoted(tensor) + ", fontsize=8];");
      }
      edges.push_back(recv + " -> " + node_id + ";");
    }
    for (auto control : n.control_inputs)
      edges.push_back("n" + std::to_string(control) + " -> " + node_id +
                      " [style=dotted, color=\"#888888\", arrowhead=odot];");
  }

  std::ostringstream out;
  out << "digraph actorflow {\n";
  out << "  rankdir=TB; compound=true; fontname=\"Helvetica\";\n";
  out << "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n";
  out << "  edge [fontname=\"Helvetica\"];\n";
  if (!options.title.empty())
    out << "  label=" << quoted(options.title) << "; labelloc=t; fontsize=14;\n";
  int clusters = 0;
  emit(out, root, 1, clusters);
  for (auto& edge : edges)
    out << "  " << edge << '\n';
  // The legend: one swatch per device.
  out << "  subgraph cluster_legend {\n    label=\"devices\"; style=dashed; fontsize=10;\n";
  for (auto& [device, index] : devices)
    out << "    legend_" << index << " [label=" << quoted(device) << ", fillcolor=\""
        << colour(index) << "\"];\n";
  out << "  }\n}\n";
  return out.str();
}

} // namespace actorflow

#include "serialization/graph_picture.hpp"

#include "graph/ops.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <string>

using namespace actorflow;
using actorflow::test::temp_dir;

namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

std::string read_file(const std::string& path) {
  std::ifstream in{path};
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

/// A variable on the ps, read by two nodes on the worker (in scope "model"), and an update back
/// on the ps after a control dependency: placed as a session would place it.
struct placed_graph {
  graph g;
  placed_graph() {
    const std::string ps = "/job:ps/replica:0/task:0/device:CPU:0";
    const std::string worker = "/job:worker/replica:0/task:0/device:CPU:0";
    auto w = ops::variable(g, 2.f, "w");
    output doubled, squared;
    {
      auto scope = g.name_scope("model");
      doubled = w.read * ops::constant(g, 2.f);
      squared = ops::square(w.read);
    }
    auto update = ops::assign_add(w, doubled + squared);
    for (std::size_t id = 0; id < g.size(); ++id) {
      auto& n = g.at(static_cast<int>(id));
      n.assigned_device = n.name.rfind("model/", 0) == 0 || n.name == "add" ? worker : ps;
    }
    static_cast<void>(update);
  }
};

} // namespace

TEST_CASE("a graph picture colours nodes by device, boxes name scopes and pairs _Send with _Recv once per tensor and device") {
  placed_graph p;
  auto dot = graph_to_dot(p.g, {"a placed graph"});
  CHECK(dot.rfind("digraph actorflow {", 0) == 0);
  CHECK(dot.find("label=\"a placed graph\"") != std::string::npos);
  // Two devices: two colours in the legend.
  CHECK(dot.find("legend_0 [label=\"/job:ps/replica:0/task:0/device:CPU:0\", fillcolor=\"#a6cee3\"]") != std::string::npos);
  CHECK(dot.find("legend_1 [label=\"/job:worker/replica:0/task:0/device:CPU:0\", fillcolor=\"#b2df8a\"]") != std::string::npos);
  // w/read feeds two worker nodes: one pair to the worker. The worker's sum goes back: one pair.
  CHECK(count(dot, "[label=\"_Send\"") == 2);
  CHECK(count(dot, "[label=\"_Recv\"") == 2);
  CHECK(count(dot, "style=dashed, color=\"#d62728\"") == 2);
  CHECK(dot.find("label=\"w/read:0\"") != std::string::npos);
  // The scope "model" is a box of its own.
  CHECK(dot.find("label=\"model\"; style=rounded") != std::string::npos);
  CHECK(count(dot, "subgraph cluster_") >= 3); // w, model, the legend
}

TEST_CASE("a graph picture is written as DOT, or drawn as SVG by graphviz, whole") {
  temp_dir dir;
  placed_graph p;
  REQUIRE(write_graph_picture(p.g, dir.path() + "/graph.dot").ok());
  CHECK(read_file(dir.path() + "/graph.dot") == graph_to_dot(p.g));
  auto drawn = write_graph_picture(p.g, dir.path() + "/graph.svg");
  INFO(drawn.to_string());
  REQUIRE(drawn.ok());
  auto svg = read_file(dir.path() + "/graph.svg");
  CHECK(svg.find("<svg") != std::string::npos);
  CHECK(svg.find("_Recv") != std::string::npos);
  // Nothing else is left beside it.
  CHECK(actorflow::test::directory_entries(dir.path()).size() == 2);
  auto wrong = write_graph_picture(p.g, dir.path() + "/graph.txt");
  CHECK(wrong.code() == errc::invalid_argument);
  CHECK(wrong.message().find("graph.txt") != std::string::npos);
}

// The gather-from-variables pass (graph/variable_gather.hpp): a lookup of a variable's rows
// takes them under the variable's lock instead of an alias of it, and a variable read only
// through refs hands out no alias; real readers keep theirs. (An update's unread new value is
// the executor's to drop: tests/actors/session.test.cpp.)
#include "graph/ops.hpp"
#include "graph/sparse_ops.hpp"
#include "graph/variable_gather.hpp"

#include <catch2/catch.hpp>

#include <memory>
#include <set>
#include <string>

using namespace actorflow;

namespace {

const std::string ps0 = "/job:ps/replica:0/task:0/device:CPU:0";

bool every_kernel(const std::string&, const std::string&, dtype) { return true; }

/// A table, a lookup of its rows at fed ids, and a scatter-add into it grouped as a train op.
struct lookup_model {
  std::shared_ptr<graph> g = std::make_shared<graph>();
  actorflow::variable table;
  output ids, rows, update, train;
  lookup_model() {
    table = ops::variable(*g, ops::zeros(*g, {10, 4}), "table");
    ids = ops::placeholder(*g, dtype::int64, {-1}, "ids");
    rows = ops::gather(table.read, ids, 0, "lookup");
    update = ops::scatter_add(table, ids, ops::ones(*g, {3, 4}), "update");
    train = ops::group(*g, {update}, "train");
    for (std::size_t id = 0; id < g->size(); ++id)
      g->at(static_cast<int>(id)).assigned_device = ps0;
  }
};

const node& named(const graph& g, const std::string& name) {
  auto id = g.find(name);
  REQUIRE(id >= 0);
  return g.at(id);
}

} // namespace

TEST_CASE("a lookup of a variable's rows takes them under its lock, and the variable hands out no alias") {
  lookup_model m;
  REQUIRE(m.g->status().ok());
  auto r = gather_from_variables(m.g, {"lookup", "ids"}, every_kernel);
  REQUIRE(r.ok());
  auto& g = *r->partition;
  // The lookup is fetched: its rows still come out, but from the variable, by ref.
  auto& lookup = named(g, "lookup");
  CHECK(lookup.op == "_VariableGather");
  CHECK(lookup.attr_or<std::string>("variable", "") == "table");
  REQUIRE(lookup.inputs.size() == 2);
  CHECK(g.at(lookup.inputs[0].node_id).name == "table");
  CHECK(g.at(lookup.inputs[1].node_id).name == "ids");
  // The read had no other reader: gone. The table is read only through refs now.
  CHECK(g.find("table/read") < 0);
  CHECK(named(g, "table").attr_or<bool>("_ref_only", false));
  CHECK(r->rewritten == std::vector<std::string>{"lookup"});
}

TEST_CASE("a variable that is also read as a value keeps its alias and its gathers") {
  lookup_model m;
  ops::mul(m.table.read, ops::constant(*m.g, 2.f), "doubled");
  for (std::size_t id = 0; id < m.g->size(); ++id)
    m.g->at(static_cast<int>(id)).assigned_device = ps0;
  REQUIRE(m.g->status().ok());
  auto r = gather_from_variables(m.g, {"doubled"}, every_kernel);
  REQUIRE(r.ok());
  auto& g = *r->partition;
  // The read stays for the Mul, and so does the alias: the lookup stays a Gather of it.
  CHECK(named(g, "lookup").op == "Gather");
  CHECK(g.find("table/read") >= 0);
  CHECK_FALSE(named(g, "table").attr_or<bool>("_ref_only", false));
}

TEST_CASE("a gather on a device without the kernel, or along another axis, stays a Gather") {
  lookup_model m;
  auto none = [](const std::string& op, const std::string&, dtype) { return op != "_VariableGather"; };
  auto r = gather_from_variables(m.g, {}, none);
  REQUIRE(r.ok());
  CHECK(named(*r->partition, "lookup").op == "Gather");
  CHECK(r->rewritten.empty());
  lookup_model other;
  other.g->at(other.rows.node_id).attrs["axis"] = std::int64_t{1};
  auto s = gather_from_variables(other.g, {}, every_kernel);
  REQUIRE(s.ok());
  CHECK(named(*s->partition, "lookup").op == "Gather");
}

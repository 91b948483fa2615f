#include "graph/variable_gather.hpp"

#include "graph/device_name.hpp"
#include "graph/op_registry.hpp"

#include <algorithm>
#include <map>

namespace actorflow {

void register_variable_gather_ops(op_registry& r) {
  // Stateful: it reads the variable as it is when it runs. Input 0 a ref: its value is not
  // read (nor needed initialised) by the executor; the kernel takes the rows under the lock.
  r.add(op_def{"_VariableGather", 2, true, true, [](shape_context& c) {
    auto& params = c.input_shapes[0];
    auto& ids = c.input_shapes[1];
    if (!params.rank_known() || !ids.rank_known()) {
      c.set_output(0, c.input_types[0], tensor_shape::unknown());
      return status{};
    }
    std::vector<std::int64_t> dims = ids.dims();
    for (int d = 1; d < params.rank(); ++d)
      dims.push_back(params.dim(d));
    c.set_output(0, c.input_types[0], tensor_shape{dims});
    return status{};
  }});
}

namespace {

std::string device_type_of(const node& n) {
  auto parsed = device_name::parse(n.assigned_device);
  return parsed && parsed->type ? *parsed->type : "";
}

} // namespace

result<variable_gather_result> gather_from_variables(const std::shared_ptr<graph>& partition,
                                                     const std::set<std::string>& keep,
                                                     const kernel_support& has_kernel) {
  const graph& g = *partition;
  auto& ops = op_registry::global();
  // Who reads each output, and with what: (consumer, input index).
  std::map<int, std::vector<std::pair<int, int>>> readers;
  std::set<int> ordering; // nodes other nodes wait for by control edges
  for (std::size_t id = 0; id < g.size(); ++id) {
    auto& n = g.at(static_cast<int>(id));
    for (std::size_t i = 0; i < n.inputs.size(); ++i)
      readers[n.inputs[i].node_id].emplace_back(static_cast<int>(id), static_cast<int>(i));
    for (auto k : n.control_inputs)
      ordering.insert(k);
  }
  // A gather the rewrite takes: of a variable's read, along axis 0, all on one device with the
  // kernel, and not fetched.
  auto takes = [&](int id) {
    auto& n = g.at(id);
    // (A fetched gather may change: its output stays, under its name.)
    if (n.op != "Gather" || n.inputs.size() != 2 || n.attr_or<std::int64_t>("axis", 0) != 0 ||
        n.inputs[0].index != 0)
      return false;
    auto& read = g.at(n.inputs[0].node_id);
    if (read.op != "Identity" || read.inputs.size() != 1 || read.inputs[0].index != 0)
      return false;
    auto& var = g.at(read.inputs[0].node_id);
    return var.op == "VariableV2" && var.assigned_device == n.assigned_device &&
           read.assigned_device == n.assigned_device &&
           has_kernel("_VariableGather", device_type_of(n), n.kernel_type);
  };
  variable_gather_result done;
  std::map<int, node> rewritten; // gather id -> its replacement
  std::set<int> dropped;         // reads nobody reads any more
  for (std::size_t id = 0; id < g.size(); ++id) {
    auto& read = g.at(static_cast<int>(id));
    if (read.op != "Identity" || keep.count(read.name) > 0 || ordering.count(static_cast<int>(id)) > 0)
      continue;
    auto& r = readers[static_cast<int>(id)];
    // Only where every reader of the read is such a gather: a read that stays (for a value
    // reader) keeps the variable aliased anyway, and gathers by ref would gain nothing.
    if (r.empty() || !std::all_of(r.begin(), r.end(), [&](auto& e) { return e.second == 0 && takes(e.first); }))
      continue;
    for (auto& [gather_id, input] : r) {
      auto& n = g.at(gather_id);
      node gather = n;
      gather.op = "_VariableGather";
      gather.inputs[0] = read.inputs[0];
      gather.attrs["variable"] = g.at(read.inputs[0].node_id).name;
      rewritten[gather_id] = std::move(gather);
      done.rewritten.push_back(n.name);
    }
    dropped.insert(static_cast<int>(id));
  }
  // Whom each node's outputs go to after the rewrite.
  std::map<int, std::vector<std::pair<int, int>>> after;
  for (std::size_t id = 0; id < g.size(); ++id) {
    if (dropped.count(static_cast<int>(id)))
      continue;
    auto found = rewritten.find(static_cast<int>(id));
    auto& n = found != rewritten.end() ? found->second : g.at(static_cast<int>(id));
    for (std::size_t i = 0; i < n.inputs.size(); ++i)
      after[n.inputs[i].node_id].emplace_back(static_cast<int>(id), static_cast<int>(i));
  }
  std::vector<int> new_id(g.size(), -1);
  int next = 0;
  for (std::size_t id = 0; id < g.size(); ++id)
    if (dropped.count(static_cast<int>(id)) == 0)
      new_id[id] = next++;
  auto out = std::make_shared<graph>();
  out->seed = g.seed;
  for (std::size_t id = 0; id < g.size(); ++id) {
    if (new_id[id] < 0)
      continue;
    auto found = rewritten.find(static_cast<int>(id));
    node n = found != rewritten.end() ? found->second : g.at(static_cast<int>(id));
    if (n.op == "VariableV2" && keep.count(n.name) == 0) {
      // Every consumer takes it as a ref: its kernel need hand out no alias of the value.
      bool refs_only = true;
      for (auto& [consumer, input] : after[static_cast<int>(id)]) {
        auto found_consumer = rewritten.find(consumer);
        auto& op = found_consumer != rewritten.end() ? found_consumer->second.op : g.at(consumer).op;
        auto* def = ops.find(op);
        refs_only = refs_only && def != nullptr && def->is_variable_ref_input(input);
      }
      if (refs_only)
        n.attrs["_ref_only"] = true;
    }
    for (auto& input : n.inputs)
      input.node_id = new_id[static_cast<std::size_t>(input.node_id)];
    for (auto& k : n.control_inputs)
      k = new_id[static_cast<std::size_t>(k)];
    auto added = out->add_node_verbatim(std::move(n));
    if (!added)
      return added.error();
  }
  done.partition = std::move(out);
  return done;
}

} // namespace actorflow

#include "graph/fusion.hpp"

#include "graph/device_name.hpp"
#include "graph/op_registry.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <utility>

namespace actorflow {

namespace {

/// A data use of a node's output: consumer `node_id` reads it as its input `input`.
struct use {
  int node_id;
  int input;
};

/// A chain to fuse: contraction (MatMul or Conv2D), its bias Add, and optionally a Relu; or,
/// in the backward pass, a MatMul, the ReluGrad of its product (relu_grad) and optionally the
/// bias gradient of the result (bias_grad: a SumToShapeOf down to the bias's shape).
struct chain {
  int contraction = -1;
  int bias_add = -1;
  int relu = -1;
  /// The Add's input that is the bias.
  edge_source bias;
  int relu_grad = -1;
  int bias_grad = -1;
  /// The node whose place and name the fused node takes.
  int last() const { return relu_grad >= 0 ? relu_grad : relu >= 0 ? relu : bias_add; }
  /// Every node of the chain, the fused node's own last (the placement log's order).
  std::vector<int> members() const {
    std::vector<int> out;
    for (auto id : {contraction, bias_add, relu, bias_grad, relu_grad})
      if (id >= 0)
        out.push_back(id);
    return out;
  }
};

const char* fused_op_for(const std::string& contraction_op) {
  if (contraction_op == "MatMul")
    return "_FusedMatMul";
  if (contraction_op == "Conv2D")
    return "_FusedConv2D";
  return nullptr;
}

const tensor_shape* shape_of(const graph& g, const edge_source& e) {
  const auto& n = g.at(e.node_id);
  auto k = static_cast<std::size_t>(e.index);
  return k < n.output_shapes.size() ? &n.output_shapes[k] : nullptr;
}

class fuser {
public:
  fuser(const graph& g, const std::set<std::string>& keep, const kernel_support& has_kernel)
    : g_(g), keep_(keep), has_kernel_(has_kernel), uses_(g.size()), control_uses_(g.size(), 0) {
    for (std::size_t id = 0; id < g.size(); ++id) {
      const auto& n = g.at(static_cast<int>(id));
      for (std::size_t k = 0; k < n.inputs.size(); ++k)
        uses_[static_cast<std::size_t>(n.inputs[k].node_id)].push_back(
          {static_cast<int>(id), static_cast<int>(k)});
      for (auto c : n.control_inputs)
        ++control_uses_[static_cast<std::size_t>(c)];
    }
  }

  /// The chain whose bias Add is `add_id` (and whose Relu is `relu_id`, or -1), if it fuses.
  std::optional<chain> match(int add_id, int relu_id) const {
    const auto& add = g_.at(add_id);
    if (add.op != "Add" || add.inputs.size() != 2 || taken(add_id))
      return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      auto from = add.inputs[static_cast<std::size_t>(side)];
      auto bias = add.inputs[static_cast<std::size_t>(1 - side)];
      const auto& contraction = g_.at(from.node_id);
      if (from.index != 0 || fused_op_for(contraction.op) == nullptr || taken(from.node_id))
        continue;
      auto* out = shape_of(g_, from);
      auto* bias_shape = shape_of(g_, bias);
      auto* add_shape = shape_of(g_, {add_id, 0});
      // A rank-1 bias as long as the output's last (channel) dimension: then the Add is a
      // BiasAdd and its output has the contraction's shape.
      if (out == nullptr || bias_shape == nullptr || add_shape == nullptr ||
          !out->rank_known() || out->rank() < 1 || !bias_shape->rank_known() ||
          bias_shape->rank() != 1 || bias_shape->dim(0) < 0 ||
          out->dim(out->rank() - 1) != bias_shape->dim(0) || !add_shape->rank_known() ||
          add_shape->rank() != out->rank())
        continue;
      chain c{from.node_id, add_id, relu_id, bias};
      if (allowed(c))
        return c;
    }
    return std::nullopt;
  }

  /// The backward chain whose ReluGrad is `id`, if it fuses: ReluGrad(MatMul(a, b), y), with
  /// the bias gradient SumToShapeOf(ReluGrad, bias) when there is one that may be absorbed.
  std::optional<chain> match_relu_grad(int id) const {
    const auto& relu_grad = g_.at(id);
    if (relu_grad.op != "ReluGrad" || relu_grad.inputs.size() != 2 || taken(id))
      return std::nullopt;
    auto from = relu_grad.inputs[0];
    const auto& product = g_.at(from.node_id);
    if (from.index != 0 || product.op != "MatMul" || taken(from.node_id))
      return std::nullopt;
    for (auto member : {from.node_id, id})
      if (g_.at(member).assigned_device != relu_grad.assigned_device)
        return std::nullopt;
    auto device = device_name::parse(relu_grad.assigned_device);
    if (!device || !device->type ||
        !has_kernel_("_FusedMatMulReluGrad", device_name::canonical_type(*device->type),
                     product.kernel_type))
      return std::nullopt;
    chain c;
    c.contraction = from.node_id;
    c.relu_grad = id;
    if (!absorbable(c.contraction, id, c))
      return std::nullopt;
    c.bias_grad = bias_grad_of(id);
    return c;
  }

  bool taken(int id) const { return in_chain_.count(id) > 0; }
  void take(const chain& c) {
    for (auto id : c.members())
      in_chain_.insert(id);
  }

private:
  /// A SumToShapeOf of ReluGrad `id`'s [m, n] output down to a rank-1 [n] (a bias's
  /// gradient: the column sums) that may disappear into the fused node, or -1. It must not be
  /// fetched, fed or waited for, nor wait for anything (the fused node comes before it).
  int bias_grad_of(int id) const {
    auto* out = shape_of(g_, {id, 0});
    if (out == nullptr || !out->rank_known() || out->rank() != 2 || out->dim(1) < 0)
      return -1;
    for (auto& u : uses_[static_cast<std::size_t>(id)]) {
      const auto& sum = g_.at(u.node_id);
      if (sum.op != "SumToShapeOf" || u.input != 0 || sum.inputs.size() != 2 ||
          sum.inputs[0].index != 0 || taken(u.node_id) || keep_.count(sum.name) > 0 ||
          control_uses_[static_cast<std::size_t>(u.node_id)] > 0 || !sum.control_inputs.empty() ||
          sum.assigned_device != g_.at(id).assigned_device ||
          sum.kernel_type != g_.at(id).kernel_type)
        continue;
      auto* target = shape_of(g_, sum.inputs[1]);
      if (target != nullptr && target->rank_known() && target->rank() == 1 &&
          target->dim(0) == out->dim(1))
        return u.node_id;
    }
    return -1;
  }

  bool allowed(const chain& c) const {
    const auto& last = g_.at(c.last());
    const auto& contraction = g_.at(c.contraction);
    for (auto id : {c.contraction, c.bias_add, c.relu})
      if (id >= 0 && g_.at(id).assigned_device != last.assigned_device)
        return false;
    auto device = device_name::parse(last.assigned_device);
    if (!device || !device->type)
      return false;
    if (!has_kernel_(fused_op_for(contraction.op), device_name::canonical_type(*device->type),
                     contraction.kernel_type))
      return false;
    return absorbable(c.contraction, c.bias_add, c) &&
           (c.relu < 0 || absorbable(c.bias_add, c.relu, c));
  }

  /// Whether node `id` may disappear into the chain: its only value reader is `next`.
  bool absorbable(int id, int next, const chain& c) const {
    const auto& n = g_.at(id);
    if (keep_.count(n.name) > 0 || control_uses_[static_cast<std::size_t>(id)] > 0)
      return false;
    int next_uses = 0;
    for (auto& u : uses_[static_cast<std::size_t>(id)]) {
      if (u.node_id == next) {
        ++next_uses;
        continue;
      }
      // A shape-only reader gets the fused output instead, which must come before it.
      auto* def = op_registry::global().find(g_.at(u.node_id).op);
      if (def == nullptr || !def->is_shape_only_input(u.input) || u.node_id < c.last())
        return false;
    }
    return next_uses == 1;
  }

  const graph& g_;
  const std::set<std::string>& keep_;
  const kernel_support& has_kernel_;
  std::vector<std::vector<use>> uses_;
  std::vector<int> control_uses_;
  std::set<int> in_chain_;
};

} // namespace

result<fusion_result> fuse_partition(const std::shared_ptr<graph>& partition,
                                     const std::set<std::string>& keep,
                                     const kernel_support& has_kernel) {
  const graph& g = *partition;
  fuser f{g, keep, has_kernel};
  std::vector<chain> chains;
  // Relu chains first, so that an Add under a Relu is not fused without it.
  for (std::size_t id = 0; id < g.size(); ++id) {
    const auto& n = g.at(static_cast<int>(id));
    if (n.op != "Relu" || n.inputs.size() != 1 || n.inputs[0].index != 0)
      continue;
    if (auto c = f.match(n.inputs[0].node_id, static_cast<int>(id))) {
      f.take(*c);
      chains.push_back(*c);
    }
  }
  for (std::size_t id = 0; id < g.size(); ++id)
    if (auto c = f.match(static_cast<int>(id), -1)) {
      f.take(*c);
      chains.push_back(*c);
    }
  for (std::size_t id = 0; id < g.size(); ++id)
    if (auto c = f.match_relu_grad(static_cast<int>(id))) {
      f.take(*c);
      chains.push_back(*c);
    }
  if (chains.empty())
    return fusion_result{partition, {}};

  // Absorbed node -> the output of the fused node (its chain's last) that replaces it: output
  // 0 (a shape-only reader of an absorbed node reads it: same shape), or 1 for a bias gradient.
  std::map<int, edge_source> replaced_by;
  std::map<int, const chain*> chain_at;
  for (auto& c : chains) {
    chain_at[c.last()] = &c;
    for (auto member : c.members())
      if (member != c.last())
        replaced_by[member] = {c.last(), member == c.bias_grad ? 1 : 0};
  }
  std::vector<int> new_id(g.size(), -1);
  int next = 0;
  for (std::size_t id = 0; id < g.size(); ++id)
    if (replaced_by.count(static_cast<int>(id)) == 0)
      new_id[id] = next++;
  auto remap = [&](edge_source e) {
    auto r = replaced_by.find(e.node_id);
    if (r != replaced_by.end())
      return edge_source{new_id[static_cast<std::size_t>(r->second.node_id)], r->second.index};
    return edge_source{new_id[static_cast<std::size_t>(e.node_id)], e.index};
  };

  auto out = std::make_shared<graph>();
  out->seed = g.seed;
  fusion_result done;
  for (std::size_t id = 0; id < g.size(); ++id) {
    if (new_id[id] < 0)
      continue;
    node n = g.at(static_cast<int>(id));
    auto c = chain_at.find(static_cast<int>(id));
    if (c != chain_at.end()) {
      const auto& ch = *c->second;
      const auto& contraction = g.at(ch.contraction);
      fusion_record record;
      record.name = n.name;
      auto backward = ch.relu_grad >= 0;
      record.op = backward ? "_FusedMatMulReluGrad" : fused_op_for(contraction.op);
      record.fused_ops = backward ? (ch.bias_grad >= 0 ? "ReluGrad,BiasAddGrad" : "ReluGrad")
                                  : (ch.relu >= 0 ? "BiasAdd,Relu" : "BiasAdd");
      record.device = n.assigned_device;
      std::vector<int> control;
      for (auto member : ch.members()) {
        record.nodes.push_back(g.at(member).name);
        for (auto k : g.at(member).control_inputs)
          control.push_back(k);
      }
      node fused;
      fused.name = n.name;
      fused.op = record.op;
      // Backward: the product's operands and the forward Relu's output, which ReluGrad read.
      fused.inputs = {contraction.inputs[0], contraction.inputs[1], backward ? n.inputs[1] : ch.bias};
      fused.control_inputs = control;
      // The contraction's attrs (transposes; strides, padding) drive the kernel.
      fused.attrs = contraction.attrs;
      fused.attrs["fused_ops"] = record.fused_ops;
      std::string names;
      for (auto& name : record.nodes)
        names += (names.empty() ? "" : ",") + name;
      fused.attrs["fused_nodes"] = names;
      fused.requested_device = n.requested_device;
      fused.assigned_device = n.assigned_device;
      fused.output_types = n.output_types;
      fused.output_shapes = n.output_shapes;
      if (ch.bias_grad >= 0) {
        const auto& sum = g.at(ch.bias_grad);
        fused.output_types.push_back(sum.output_types.at(0));
        fused.output_shapes.push_back(sum.output_shapes.at(0));
      }
      fused.kernel_type = contraction.kernel_type;
      n = std::move(fused);
      done.fusions.push_back(std::move(record));
    }
    for (auto& input : n.inputs)
      input = remap(input);
    for (auto& k : n.control_inputs)
      k = remap({k, 0}).node_id;
    std::sort(n.control_inputs.begin(), n.control_inputs.end());
    n.control_inputs.erase(std::unique(n.control_inputs.begin(), n.control_inputs.end()),
                           n.control_inputs.end());
    auto added = out->add_node_verbatim(std::move(n));
    if (!added)
      return added.error();
  }
  done.partition = std::move(out);
  return done;
}

bool fusion_enabled(bool requested) {
  const char* value = std::getenv("ACTORFLOW_FUSION");
  return requested && !(value != nullptr && std::string{value} == "0");
}

std::string fusion_line(const fusion_record& record) {
  std::string nodes;
  for (auto& name : record.nodes)
    nodes += (nodes.empty() ? "" : ", ") + name;
  return "fused " + record.name + " = " + record.op + "(" + nodes + ") fused_ops=[" +
         record.fused_ops + "] on " + record.device;
}

std::optional<fusion_record> parse_fusion_line(const std::string& line) {
  static const std::string prefix = "fused ";
  if (line.rfind(prefix, 0) != 0)
    return std::nullopt;
  auto eq = line.find(" = ", prefix.size());
  auto open = eq == std::string::npos ? eq : line.find('(', eq);
  auto close = open == std::string::npos ? open : line.find(") fused_ops=[", open);
  auto end = close == std::string::npos ? close : line.find("] on ", close);
  if (end == std::string::npos)
    return std::nullopt;
  fusion_record r;
  r.name = line.substr(prefix.size(), eq - prefix.size());
  r.op = line.substr(eq + 3, open - eq - 3);
  auto list = line.substr(open + 1, close - open - 1);
  for (std::size_t begin = 0; begin <= list.size();) {
    auto comma = list.find(", ", begin);
    r.nodes.push_back(list.substr(begin, comma == std::string::npos ? comma : comma - begin));
    if (comma == std::string::npos)
      break;
    begin = comma + 2;
  }
  auto ops_begin = close + std::string{") fused_ops=["}.size();
  r.fused_ops = line.substr(ops_begin, end - ops_begin);
  r.device = line.substr(end + 5);
  return r;
}

void note_fusion(graph& g, const fusion_record& record) {
  for (auto& name : record.nodes) {
    auto id = g.find(name);
    if (id < 0)
      continue;
    auto& n = g.at(id);
    if (name == record.name) {
      n.attrs["_fused_op"] = record.op;
      n.attrs["_fused_ops"] = record.fused_ops;
    } else {
      n.attrs["_fused_into"] = record.name;
    }
  }
}

// --- the fused ops' definitions ------------------------------------------------------------

void register_fused_ops(op_registry& r) {
  // The contraction's own shape inference on inputs 0 and 1 (the node has its attrs), then
  // the bias's length against the output's last dimension.
  auto fused = [&r](std::string base) {
    return [&r, base](shape_context& c) -> status {
      auto* def = r.find(base);
      if (def == nullptr || c.input_shapes.size() != 3)
        return make_error(errc::internal, "fused " + base + " needs three inputs");
      shape_context inner{c.n, {c.input_types[0], c.input_types[1]},
                          {c.input_shapes[0], c.input_shapes[1]}, {}, {}};
      AF_RETURN_IF_ERROR(def->infer(inner));
      auto& out = inner.output_shapes[0];
      auto& bias = c.input_shapes[2];
      if (bias.rank_known() && bias.rank() != 1)
        return make_error(errc::invalid_argument, "the bias must have rank 1, got " + bias.to_string());
      if (c.input_types[2] != c.input_types[0])
        return make_error(errc::invalid_argument, "the bias's dtype differs from the input's");
      if (out.rank_known() && bias.rank_known() && out.dim(out.rank() - 1) >= 0 &&
          bias.dim(0) >= 0 && out.dim(out.rank() - 1) != bias.dim(0))
        return make_error(errc::invalid_argument, "the bias " + bias.to_string() +
                                                    " does not match the output " + out.to_string());
      c.set_output(0, inner.output_types[0], out);
      return {};
    };
  };
  // Under mixed precision the forward fused contractions take bf16 operands (their kernels
  // honour _mixed_precision); the fused backward GEMM keeps float32 (its kernel is the BLAS's).
  for (auto [name, base] : {std::pair{"_FusedMatMul", "MatMul"}, {"_FusedConv2D", "Conv2D"}}) {
    op_def def{name, 3, false, false, fused(base)};
    def.bf16_compute = true;
    r.add(std::move(def));
  }
  // MatMul's shape inference on inputs 0 and 1; the Relu output y must have the product's
  // shape; with BiasAddGrad a second output, the product's column sums.
  r.add(op_def{"_FusedMatMulReluGrad", 3, false, false, [&r](shape_context& c) -> status {
    auto* def = r.find("MatMul");
    if (def == nullptr || c.input_shapes.size() != 3)
      return make_error(errc::internal, "_FusedMatMulReluGrad needs three inputs");
    shape_context inner{c.n, {c.input_types[0], c.input_types[1]},
                        {c.input_shapes[0], c.input_shapes[1]}, {}, {}};
    AF_RETURN_IF_ERROR(def->infer(inner));
    auto& out = inner.output_shapes[0];
    auto& y = c.input_shapes[2];
    if (c.input_types[2] != c.input_types[0])
      return make_error(errc::invalid_argument, "the Relu output's dtype differs from the input's");
    if (out.rank_known() && y.rank_known()) {
      bool same = y.rank() == out.rank();
      for (int d = 0; same && d < out.rank(); ++d)
        same = out.dim(d) < 0 || y.dim(d) < 0 || out.dim(d) == y.dim(d);
      if (!same)
        return make_error(errc::invalid_argument, "the Relu output " + y.to_string() +
                                                    " does not match the product " + out.to_string());
    }
    c.set_output(0, inner.output_types[0], out);
    if (c.n.attr_or<std::string>("fused_ops", "").find("BiasAddGrad") != std::string::npos)
      c.set_output(1, inner.output_types[0],
                   tensor_shape{out.rank_known() ? out.dim(out.rank() - 1) : -1});
    return {};
  }});
}

} // namespace actorflow

#include "graph/graph.hpp"

#include "graph/device_name.hpp"
#include "graph/op_registry.hpp"

#include <algorithm>

namespace actorflow {

// --- output ----------------------------------------------------------------------------------

const node& output::producer() const { return owner->at(node_id); }

dtype output::type() const {
  auto& n = producer();
  auto i = static_cast<std::size_t>(index);
  return i < n.output_types.size() ? n.output_types[i] : dtype::float32;
}

const tensor_shape& output::shape() const {
  static const tensor_shape unknown = tensor_shape::unknown();
  auto& n = producer();
  auto i = static_cast<std::size_t>(index);
  return i < n.output_shapes.size() ? n.output_shapes[i] : unknown;
}

std::string output::tensor_name() const { return name() + ":" + std::to_string(index); }

const std::string& output::name() const { return producer().name; }

// --- graph -----------------------------------------------------------------------------------

namespace {

dtype kernel_type_of(const node& n) {
  if (auto* t = n.attr<dtype>("kernel_dtype"))
    return *t;
  if (!n.output_types.empty() && n.inputs.empty())
    return n.output_types[0];
  return n.output_types.empty() ? dtype::float32 : n.output_types[0];
}

} // namespace

void graph::record_error(const actorflow::status& s) {
  if (status_.ok() && !s.ok()) {
    status_ = s;
    failed_from_ = nodes_.size();
    contexts_at_failure_ = contexts_.size();
    variables_at_failure_ = variables_.size();
  }
}

void graph::record_node_error(const actorflow::status& s, int id) {
  auto first = status_.ok();
  record_error(s);
  if (first && !s.ok())
    failed_from_ = static_cast<std::size_t>(id);
}

bool graph::discard_failed_nodes() {
  if (status_.ok())
    return true;
  if (contexts_.size() != contexts_at_failure_ || variables_.size() != variables_at_failure_)
    return false;
  auto removed = [this](int id) { return static_cast<std::size_t>(id) >= failed_from_; };
  for (auto i = failed_from_; i < nodes_.size(); ++i)
    if (node_context_[i] != nullptr)
      return false;
  for (auto& deps : control_stack_)
    if (std::any_of(deps.begin(), deps.end(), removed))
      return false;
  if (std::any_of(colocation_stack_.begin(), colocation_stack_.end(), removed))
    return false;
  while (nodes_.size() > failed_from_) {
    by_name_.erase(nodes_.back()->name);
    nodes_.pop_back();
    node_context_.pop_back();
  }
  status_ = {};
  return true;
}

actorflow::status graph::infer_shapes(int id) {
  auto& n = at(id);
  auto* def = op_registry::global().find(n.op);
  if (def == nullptr)
    return make_error(errc::not_found, "node '" + n.name + "': unknown op '" + n.op + "'");
  if (def->num_inputs >= 0 && static_cast<int>(n.inputs.size()) != def->num_inputs)
    return make_error(errc::invalid_argument,
                      "node '" + n.name + "': op '" + n.op + "' takes " +
                        std::to_string(def->num_inputs) + " inputs, got " +
                        std::to_string(n.inputs.size()));
  shape_context ctx{n, {}, {}, {}, {}};
  for (auto& in : n.inputs) {
    if (in.node_id < 0 || in.node_id >= static_cast<int>(size()))
      return make_error(errc::invalid_argument, "node '" + n.name + "': input refers to node " +
                                                  std::to_string(in.node_id) + " which does not exist");
    auto& src = at(in.node_id);
    if (in.index < 0 || in.index >= static_cast<int>(src.output_types.size()))
      return make_error(errc::invalid_argument, "node '" + n.name + "': input '" + src.name +
                                                  ":" + std::to_string(in.index) +
                                                  "' does not exist (op '" + src.op + "' has " +
                                                  std::to_string(src.output_types.size()) + " outputs)");
    ctx.input_types.push_back(src.output_types[static_cast<std::size_t>(in.index)]);
    ctx.input_shapes.push_back(src.output_shapes[static_cast<std::size_t>(in.index)]);
  }
  auto s = def->infer ? def->infer(ctx) : actorflow::status{};
  if (!s.ok())
    return s.with_context("node '" + n.name + "' (" + n.op + ")");
  n.output_types = std::move(ctx.output_types);
  n.output_shapes = std::move(ctx.output_shapes);
  // Kernels are keyed by input 0's dtype when there is an input (Cast, ArgMax, Equal...).
  if (!n.inputs.empty() && !n.has_attr("kernel_dtype"))
    n.kernel_type = ctx.input_types[0];
  else
    n.kernel_type = kernel_type_of(n);
  return actorflow::status{};
}

output graph::bring_into(control_flow_context* context, const output& x) {
  if (!x.valid() || x.owner != this)
    return x;
  auto* made_in = context_of(x.node_id);
  if (made_in == context)
    return x;
  if (context == nullptr) {
    record_error(make_error(errc::invalid_argument,
                            "tensor '" + x.tensor_name() + "' is made inside the " +
                              made_in->describe() + " and used outside it"));
    return x;
  }
  return context->capture(x);
}

scope_guard graph::enter_context(control_flow_context* context) {
  auto saved_context = current_context_;
  auto saved_controls = std::move(control_stack_);
  control_stack_.clear();
  current_context_ = context;
  return scope_guard{[this, saved_context, saved_controls = std::move(saved_controls)]() mutable {
    current_context_ = saved_context;
    control_stack_ = std::move(saved_controls);
  }};
}

int graph::add_node(node_spec spec) {
  if (!spec.inputs_from_other_contexts)
    for (auto& in : spec.inputs)
      in = bring_into(current_context_, in);
  if (current_context_ != nullptr) {
    for (auto c : spec.control_inputs)
      if (context_of(c) != current_context_)
        record_error(make_error(errc::unimplemented,
                                "a control dependency on '" + at(c).name +
                                  "', made outside the " + current_context_->describe() +
                                  ", cannot be used inside it"));
    if (spec.inputs.empty() && current_context_->pivot() >= 0)
      spec.control_inputs.push_back(current_context_->pivot());
  }
  auto n = std::make_unique<node>();
  n->id = static_cast<int>(nodes_.size());
  n->op = spec.op;
  if (spec.exact_name) {
    n->name = spec.name;
    if (by_name_.count(n->name) > 0)
      record_error(make_error(errc::already_exists, "duplicate node name '" + n->name + "'"));
    name_counts_.emplace(n->name, 1);
  } else {
    n->name = unique_name(spec.name.empty() ? spec.op : spec.name);
  }
  n->attrs = std::move(spec.attrs);
  for (auto& in : spec.inputs) {
    if (!in.valid() || in.owner != this) {
      record_error(make_error(errc::invalid_argument,
                              "node '" + n->name + "': an input is missing or from another graph"));
      n->inputs.push_back(edge_source{0, 0});
      continue;
    }
    n->inputs.push_back(edge_source{in.node_id, in.index});
  }
  for (auto& deps : control_stack_)
    n->control_inputs.insert(n->control_inputs.end(), deps.begin(), deps.end());
  n->control_inputs.insert(n->control_inputs.end(), spec.control_inputs.begin(),
                           spec.control_inputs.end());
  if (!n->has_attr("colocate_with") && !colocation_stack_.empty())
    n->attrs["colocate_with"] = at(colocation_stack_.back()).name;
  auto colocated = -1;
  if (auto* target = n->attr<std::string>("colocate_with"))
    colocated = find(*target);
  // Colocation beats device scopes: the node goes where its colocation target goes.
  if (colocated >= 0)
    n->requested_device = at(colocated).requested_device;
  // Otherwise the innermost device scope first; each outer one fills only what is unset (TF1).
  for (auto i = device_stack_.rbegin(); colocated < 0 && i != device_stack_.rend(); ++i) {
    n->requested_device = (*i)(*n);
    // Device functions may return any spelling; keep the canonical one.
    if (auto parsed = device_name::parse(n->requested_device))
      n->requested_device = parsed->to_string();
    else
      record_error(parsed.error().with_context("node '" + n->name + "'"));
  }
  auto id = n->id;
  by_name_.emplace(n->name, id);
  nodes_.push_back(std::move(n));
  node_context_.push_back(current_context_);
  auto s = infer_shapes(id);
  if (!s.ok()) {
    record_node_error(s, id);
    auto& added = at(id);
    // Keep building possible: an unknown float32 output per expected output.
    if (added.output_types.empty()) {
      added.output_types = {dtype::float32};
      added.output_shapes = {tensor_shape::unknown()};
    }
  }
  return id;
}

result<int> graph::add_node_verbatim(node n) {
  if (n.name.empty())
    return make_error(errc::invalid_argument, "a node has an empty name");
  if (by_name_.count(n.name) > 0)
    return make_error(errc::already_exists, "duplicate node name '" + n.name + "'");
  n.id = static_cast<int>(nodes_.size());
  by_name_.emplace(n.name, n.id);
  // Later unique_name() calls must not hand out this name again.
  name_counts_.emplace(n.name, 1);
  nodes_.push_back(std::make_unique<node>(std::move(n)));
  node_context_.push_back(nullptr);
  return nodes_.back()->id;
}

int graph::find(const std::string& name) const {
  auto i = by_name_.find(name);
  return i == by_name_.end() ? -1 : i->second;
}

output graph::find_output(const std::string& tensor_name) {
  auto colon = tensor_name.rfind(':');
  std::string name = tensor_name;
  int index = 0;
  if (colon != std::string::npos) {
    auto suffix = tensor_name.substr(colon + 1);
    if (!suffix.empty() && suffix.find_first_not_of("0123456789") == std::string::npos) {
      name = tensor_name.substr(0, colon);
      index = std::stoi(suffix);
    }
  }
  auto id = find(name);
  if (id < 0 || index >= static_cast<int>(at(id).output_types.size()))
    return {};
  return output{this, id, index};
}

std::vector<std::vector<int>> graph::consumers() const {
  std::vector<std::vector<int>> out(size());
  for (auto& n : nodes_) {
    for (auto& in : n->inputs)
      out[static_cast<std::size_t>(in.node_id)].push_back(n->id);
    for (auto c : n->control_inputs)
      out[static_cast<std::size_t>(c)].push_back(n->id);
  }
  return out;
}

std::string graph::scope_prefix() const {
  std::string prefix;
  for (auto& s : name_scopes_)
    prefix += s + "/";
  return prefix;
}

std::string graph::current_scope() const {
  auto prefix = scope_prefix();
  return prefix.empty() ? prefix : prefix.substr(0, prefix.size() - 1);
}

std::string graph::unique_name(const std::string& hint) {
  // TensorFlow's rule: the first use of a name keeps it, later ones get "_1", "_2", ...
  // skipping any suffixed name already taken.
  auto base = scope_prefix() + hint;
  auto uses = name_counts_[base]++;
  if (uses == 0)
    return base;
  auto name = base;
  while (name_counts_.count(name) > 0)
    name = base + "_" + std::to_string(uses++);
  name_counts_[name] = 1;
  return name;
}

scope_guard graph::name_scope(const std::string& name) {
  auto full = unique_name(name);
  auto prefix = scope_prefix();
  name_scopes_.push_back(full.substr(prefix.size()));
  return scope_guard{[this] { name_scopes_.pop_back(); }};
}

scope_guard graph::absolute_name_scope(const std::string& full_name) {
  auto enclosing = std::move(name_scopes_);
  name_scopes_.clear();
  if (!full_name.empty())
    name_scopes_.push_back(full_name);
  return scope_guard{[this, enclosing = std::move(enclosing)]() mutable {
    name_scopes_ = std::move(enclosing);
  }};
}

scope_guard graph::device(const std::string& spec) {
  auto parsed = device_name::parse(spec);
  if (!parsed) {
    record_error(parsed.error());
    device_stack_.push_back([](const node& n) { return n.requested_device; });
  } else {
    auto scope_name = *parsed;
    device_stack_.push_back([scope_name](const node& n) {
      auto current = device_name::parse(n.requested_device);
      if (!current)
        return n.requested_device;
      return device_name::merge(scope_name, *current).to_string();
    });
  }
  return scope_guard{[this] { device_stack_.pop_back(); }};
}

scope_guard graph::device(device_function fn) {
  device_stack_.push_back(std::move(fn));
  return scope_guard{[this] { device_stack_.pop_back(); }};
}

scope_guard graph::colocate_with(const output& target) {
  if (!target.valid() || target.owner != this) {
    record_error(make_error(errc::invalid_argument, "colocate_with: the target is not a node of this graph"));
    return scope_guard{[] {}};
  }
  colocation_stack_.push_back(target.node_id);
  return scope_guard{[this] { colocation_stack_.pop_back(); }};
}

scope_guard graph::control_dependencies(const std::vector<output>& deps) {
  std::vector<int> ids;
  for (auto& d : deps)
    if (d.valid())
      ids.push_back(d.node_id);
  control_stack_.push_back(std::move(ids));
  return scope_guard{[this] { control_stack_.pop_back(); }};
}

} // namespace actorflow

#pragma once
/// A dataflow graph and the scoped state used while building it.
///   graph g;
///   auto a = ops::constant(g, 3.f);
///   { auto scope = g.name_scope("layer"); auto dev = g.device("/cpu:0"); auto b = a * a; }
///   if (!g.status().ok()) ...   // construction errors are recorded, the first one kept
/// A graph is built from one thread. Nodes are never removed; node ids are dense indices.

#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

namespace actorflow {

class graph;
struct node;

/// One output of one node: what an op takes as input.
struct output {
  graph* owner = nullptr;
  int node_id = -1;
  int index = 0;

  bool valid() const { return owner != nullptr && node_id >= 0; }
  const node& producer() const;
  dtype type() const;
  const tensor_shape& shape() const;
  /// "mul:0".
  std::string tensor_name() const;
  /// The producing node's name, "mul".
  const std::string& name() const;
};

/// Values to feed for one step: each replaces the tensor an output would produce.
using feed_list = std::vector<std::pair<output, tensor>>;

/// A reference to one output by node id, as stored in a node's inputs.
struct edge_source {
  int node_id = -1;
  int index = 0;
  friend bool operator==(const edge_source& a, const edge_source& b) {
    return a.node_id == b.node_id && a.index == b.index;
  }
};

/// Attribute values an op may carry.
using attr_value = std::variant<bool, std::int64_t, double, std::string, dtype, tensor_shape,
                                std::vector<std::int64_t>, tensor>;

struct node {
  int id = -1;
  std::string name;
  std::string op;
  std::vector<edge_source> inputs;
  /// Nodes that must finish before this one runs, without a data edge.
  std::vector<int> control_inputs;
  std::map<std::string, attr_value> attrs;
  /// The device the user asked for (after scopes and device functions), possibly partial.
  std::string requested_device;
  /// The full device name chosen by the placer; empty until placed.
  std::string assigned_device;
  std::vector<dtype> output_types;
  std::vector<tensor_shape> output_shapes;

  /// The dtype kernels are registered under: input 0's dtype, else output 0's, else float32.
  dtype kernel_type = dtype::float32;

  bool has_attr(const std::string& key) const { return attrs.count(key) > 0; }
  template <class T>
  const T* attr(const std::string& key) const {
    auto i = attrs.find(key);
    return i == attrs.end() ? nullptr : std::get_if<T>(&i->second);
  }
  template <class T>
  T attr_or(const std::string& key, T fallback) const {
    auto* p = attr<T>(key);
    return p != nullptr ? *p : fallback;
  }
};

/// Chooses a device string for a node being created; sees node.requested_device as set by
/// the scopes inside this one.
using device_function = std::function<std::string(const node&)>;

/// Undoes a scope when destroyed (name scope, device scope, control dependencies).
class [[nodiscard]] scope_guard {
public:
  explicit scope_guard(std::function<void()> undo) : undo_(std::move(undo)) {}
  scope_guard(scope_guard&& other) noexcept : undo_(std::move(other.undo_)) { other.undo_ = nullptr; }
  scope_guard(const scope_guard&) = delete;
  scope_guard& operator=(const scope_guard&) = delete;
  scope_guard& operator=(scope_guard&&) = delete;
  ~scope_guard() {
    if (undo_)
      undo_();
  }

private:
  std::function<void()> undo_;
};

/// What add_node needs to create a node.
struct node_spec {
  std::string op;
  /// Name without scope; defaults to the op name.
  std::string name;
  std::vector<output> inputs;
  std::map<std::string, attr_value> attrs;
  /// Extra control inputs besides those of the enclosing control_dependencies scopes.
  std::vector<int> control_inputs;
  /// `name` is the full node name, used as is (it must be free); for a node named after the
  /// scope it opens, like a variable.
  bool exact_name = false;
  /// The inputs are used as given, not brought into the current control-flow context (a
  /// cond's Merge, whose inputs come from its two branches).
  bool inputs_from_other_contexts = false;
};

/// A cond branch or a while loop being built (graph/control_flow.hpp). Every node records the
/// context its outputs live in. While a context is current, add_node brings each input made
/// outside it in through capture() (a Switch for a branch, an Enter for a loop) and gives a node
/// without data inputs the context's pivot as a control input, so that it runs (or is dead)
/// with the context.
class control_flow_context {
public:
  explicit control_flow_context(control_flow_context* outer) : outer_(outer) {}
  virtual ~control_flow_context() = default;
  control_flow_context* outer() const { return outer_; }
  /// `x`, whose producer lives in another context, as the nodes inside see it; records an error
  /// in the graph when x cannot be used here (made inside another loop or branch).
  virtual output capture(const output& x) = 0;
  /// The node that nodes without data inputs made inside wait for; -1 for none.
  virtual int pivot() const = 0;
  /// "while loop 'rnn/while'": for error messages.
  virtual std::string describe() const = 0;
  /// Whether `ancestor` is this context or encloses it.
  bool is_within(const control_flow_context* ancestor) const {
    for (auto* c = this; c != nullptr; c = c->outer_)
      if (c == ancestor)
        return true;
    return ancestor == nullptr;
  }

private:
  control_flow_context* outer_;
};

/// A variable as returned by ops::variable: the variable node, its read identity and its
/// initializer. Arithmetic on a variable uses `read`. An op that takes `ref` directly reads the
/// variable's value when that op runs (TensorFlow's ref semantics), e.g. inside
/// control_dependencies after updates.
struct variable {
  output ref;
  output read;
  output initializer;
  const std::string& name() const { return ref.name(); }
  operator output() const { return read; }
};

class graph {
public:
  graph() = default;
  graph(const graph&) = delete;
  graph& operator=(const graph&) = delete;
  graph(graph&&) = delete;

  /// Adds a node after applying the enclosing scopes and running the op's shape inference.
  /// On error (unknown op, bad inputs, mismatched shapes) the error is recorded in status()
  /// with the node's name, and the node is still added with unknown output shapes so that
  /// building can go on. Returns the node id.
  int add_node(node_spec spec);

  /// Adds a node exactly as given (used by deserialisation and partitioning): no scopes, no
  /// shape inference, the name must be unique. Returns the id or an error.
  result<int> add_node_verbatim(node n);

  /// Runs shape inference for node `id` again from its inputs (used after loading).
  actorflow::status infer_shapes(int id);

  std::size_t size() const { return nodes_.size(); }
  const node& at(int id) const { return *nodes_[static_cast<std::size_t>(id)]; }
  node& at(int id) { return *nodes_[static_cast<std::size_t>(id)]; }
  /// Node id for a name; -1 when there is none.
  int find(const std::string& name) const;
  /// The output named "node" or "node:1"; invalid when there is none.
  output find_output(const std::string& tensor_name);
  output output_of(int node_id, int index = 0) { return output{this, node_id, index}; }

  /// Consumers of each node (data and control), computed on demand.
  std::vector<std::vector<int>> consumers() const;

  /// The first construction error, or ok.
  const actorflow::status& status() const { return status_; }
  void record_error(const actorflow::status& s);
  /// Forgets the construction error and removes the nodes added since it, from the one it
  /// names on (TensorFlow's Python API: an op that fails to build raises and is not in the
  /// graph, which stays usable). False, keeping both, when one of those nodes belongs to a
  /// control-flow context, a variable or an open scope, or a context was made since.
  bool discard_failed_nodes();

  /// Names created inside get the prefix "name/". A repeated scope name is made unique
  /// ("layer", "layer_1").
  scope_guard name_scope(const std::string& name);
  /// Names created inside get the prefix "full_name/" ("" for none), whatever scopes enclose
  /// it, and the enclosing ones are back when it ends (TensorFlow's name_scope("a/b/"), how
  /// get_variable names a variable after its variable scope, not the name scope open there).
  scope_guard absolute_name_scope(const std::string& full_name);
  /// The current scope prefix, "" or "a/b/".
  std::string scope_prefix() const;
  /// The innermost scope's full name without the trailing slash, "a/b"; "" at the top.
  std::string current_scope() const;
  /// A unique node name from a hint inside the current scope: "mul", then "mul_1", ...
  std::string unique_name(const std::string& hint);

  /// Nodes created inside request this (possibly partial) device; nested scopes override only
  /// the fields they name. An invalid string is recorded as an error quoting it.
  scope_guard device(const std::string& spec);
  /// Nodes created inside get the device this function returns for them (dynamic placement).
  scope_guard device(device_function fn);

  /// Nodes created inside run only after all of `deps`.
  scope_guard control_dependencies(const std::vector<output>& deps);

  /// Nodes created inside are colocated with `target`'s node (attr "colocate_with") and request
  /// its device; enclosing device scopes and functions do not apply to them (TensorFlow's
  /// colocate_with). A node given its own "colocate_with" attr follows that one instead.
  scope_guard colocate_with(const output& target);

  /// Variables in creation order.
  const std::vector<variable>& global_variables() const { return variables_; }
  /// The variables optimizers train by default (not optimizer slots or step counters).
  const std::vector<variable>& trainable_variables() const { return trainable_; }
  void add_variable(const variable& v, bool trainable = true) {
    variables_.push_back(v);
    if (trainable)
      trainable_.push_back(v);
  }

  /// Takes ownership of a control-flow context (graph/control_flow.hpp builds them).
  template <class Context>
  Context* add_context(std::unique_ptr<Context> context) {
    auto* raw = context.get();
    contexts_.push_back(std::move(context));
    return raw;
  }
  /// Nodes created inside belong to `context` (null: the top level); the control_dependencies
  /// scopes open outside do not apply inside (TensorFlow's while_loop and cond do the same).
  scope_guard enter_context(control_flow_context* context);
  control_flow_context* current_context() const { return current_context_; }
  /// The context node `id`'s outputs live in; null at the top level.
  control_flow_context* context_of(int id) const {
    return static_cast<std::size_t>(id) < node_context_.size()
             ? node_context_[static_cast<std::size_t>(id)]
             : nullptr;
  }
  void set_context_of(int id, control_flow_context* context) {
    node_context_[static_cast<std::size_t>(id)] = context;
  }
  /// `x` as nodes in `context` see it (captured into it when made outside).
  output bring_into(control_flow_context* context, const output& x);

  /// Graph-level random seed; ops derive their seeds from it and their own seed (TF rules).
  std::optional<std::int64_t> seed;

private:
  std::vector<std::unique_ptr<node>> nodes_;
  std::unordered_map<std::string, int> by_name_;
  std::unordered_map<std::string, int> name_counts_;
  std::vector<std::string> name_scopes_;
  std::vector<device_function> device_stack_;
  std::vector<std::vector<int>> control_stack_;
  std::vector<int> colocation_stack_;
  std::vector<variable> variables_;
  std::vector<variable> trainable_;
  std::vector<std::unique_ptr<control_flow_context>> contexts_;
  control_flow_context* current_context_ = nullptr;
  std::vector<control_flow_context*> node_context_;
  actorflow::status status_;
  /// At the first error: the first node id it may concern, and how many contexts and
  /// variables there were (discard_failed_nodes undoes nothing else).
  std::size_t failed_from_ = 0;
  std::size_t contexts_at_failure_ = 0;
  std::size_t variables_at_failure_ = 0;
  /// record_error for node `id`, already in nodes_.
  void record_node_error(const actorflow::status& s, int id);
};

} // namespace actorflow

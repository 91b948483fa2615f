/// Graphs, outputs, scopes and the ops of graph/ops.hpp for Python.
///   g = c.Graph(); s = g.name_scope("layer"); x = c.constant(g, np.float32(1), "x"); s.close()
/// Python keeps the Graph object alive as long as any output of it (actorflow/framework.py holds
/// the reference), so the raw graph pointer in an output stays valid.

#include "python/src/bindings.hpp"

#include "graph/graph.hpp"
#include "graph/math_ops.hpp"
#include "graph/ops.hpp"
#include "graph/shape_ops.hpp"
#include "graph/strided_slice.hpp"

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <set>

namespace actorflow::python {

namespace {

/// A graph scope (name, device, control dependencies, colocation) that Python ends with
/// close(), from the `with` block's __exit__, so scopes end in the order they began. Its undo
/// touches the graph, so each binding that makes one keeps the graph alive as long as it.
struct scope {
  std::unique_ptr<scope_guard> guard;
  void close() { guard.reset(); }
};

scope make_scope(scope_guard guard) { return scope{std::make_unique<scope_guard>(std::move(guard))}; }

/// A shape for Python: None for an unknown rank, else a list with None for unknown dimensions.
py::object shape_to_python(const tensor_shape& shape) {
  if (!shape.rank_known())
    return py::none();
  py::list dims;
  for (auto d : shape.dims())
    dims.append(d < 0 ? py::object(py::none()) : py::object(py::int_(d)));
  return std::move(dims);
}

tensor_shape shape_from_python(const py::object& shape) {
  if (shape.is_none())
    return tensor_shape::unknown();
  std::vector<std::int64_t> dims;
  for (auto d : shape)
    dims.push_back(d.is_none() ? -1 : d.cast<std::int64_t>());
  return tensor_shape{dims};
}

const node& node_at(const graph& g, int id) {
  if (id < 0 || static_cast<std::size_t>(id) >= g.size())
    throw py::index_error("the graph has no node " + std::to_string(id));
  return g.at(id);
}

/// Calls the Python device function `fn(op_type, name, requested_device)`; the Python side
/// (framework.py) catches the function's own exceptions and raises them after the op is made,
/// so one that still gets here is recorded as the graph's error rather than thrown through
/// add_node.
device_function python_device_function(graph& g, py::function fn) {
  return [&g, fn = std::move(fn)](const node& n) -> std::string {
    py::gil_scoped_acquire gil;
    try {
      py::object chosen = fn(n.op, n.name, n.requested_device);
      return chosen.is_none() ? n.requested_device : py::str(chosen).cast<std::string>();
    } catch (py::error_already_set& e) {
      g.record_error(make_error(errc::invalid_argument,
                                "the device function raised for node '" + n.name + "': " + e.what()));
      return n.requested_device;
    }
  };
}

void bind_graph_class(py::module_& m) {
  py::class_<scope>(m, "Scope").def("close", &scope::close);

  py::class_<output>(m, "Output")
    .def_readonly("node_id", &output::node_id)
    .def_readonly("index", &output::index)
    .def_property_readonly("valid", &output::valid)
    .def_property_readonly("dtype", [](const output& o) { return std::string{to_string(o.type())}; })
    .def_property_readonly("shape", [](const output& o) { return shape_to_python(o.shape()); })
    .def_property_readonly("tensor_name", &output::tensor_name);

  py::class_<variable>(m, "VariableHandle")
    .def_readonly("ref", &variable::ref)
    .def_readonly("read", &variable::read)
    .def_readonly("initializer", &variable::initializer);

  py::class_<graph, std::unique_ptr<graph>>(m, "Graph")
    .def(py::init<>())
    .def("size", &graph::size)
    .def("error", [](const graph& g) -> py::object {
      if (g.status().ok())
        return py::none();
      return py::make_tuple(to_string(g.status().code()), g.status().message());
    })
    .def("discard_failed_nodes", &graph::discard_failed_nodes)
    .def("find", &graph::find)
    .def("find_output", [](graph& g, const std::string& name) -> std::optional<output> {
      auto o = g.find_output(name);
      return o.valid() ? std::optional<output>{o} : std::nullopt;
    })
    .def("output", [](graph& g, int id, int index) {
      auto& n = node_at(g, id);
      if (index < 0 || static_cast<std::size_t>(index) >= n.output_types.size())
        throw py::index_error("node '" + n.name + "' has no output " + std::to_string(index));
      return g.output_of(id, index);
    })
    .def("node_name", [](const graph& g, int id) { return node_at(g, id).name; })
    .def("node_op", [](const graph& g, int id) { return node_at(g, id).op; })
    .def("node_requested_device", [](const graph& g, int id) { return node_at(g, id).requested_device; })
    .def("node_assigned_device", [](const graph& g, int id) { return node_at(g, id).assigned_device; })
    .def("node_num_outputs", [](const graph& g, int id) { return node_at(g, id).output_types.size(); })
    .def("node_inputs", [](const graph& g, int id) {
      std::vector<std::pair<int, int>> inputs;
      for (auto& e : node_at(g, id).inputs)
        inputs.emplace_back(e.node_id, e.index);
      return inputs;
    })
    .def("op_handle", [](graph& g, int id) {
      // A node as a target or control input: index 0 even when it has no outputs (NoOp).
      node_at(g, id);
      return output{&g, id, 0};
    })
    .def("node_control_inputs", [](const graph& g, int id) { return node_at(g, id).control_inputs; })
    .def("name_scope", [](graph& g, const std::string& name) { return make_scope(g.name_scope(name)); },
         py::keep_alive<0, 1>())
    .def("absolute_name_scope", [](graph& g, const std::string& full_name) {
      return make_scope(g.absolute_name_scope(full_name));
    }, py::keep_alive<0, 1>())
    .def("current_scope", &graph::current_scope)
    .def("unique_name", &graph::unique_name)
    .def("device", [](graph& g, const std::string& spec) { return make_scope(g.device(spec)); },
         py::keep_alive<0, 1>())
    .def("device_function", [](graph& g, py::function fn) {
      return make_scope(g.device(python_device_function(g, std::move(fn))));
    }, py::keep_alive<0, 1>())
    .def("device_native", [](graph& g, const native_device_function& fn) {
      return make_scope(g.device(fn.choose));
    }, py::keep_alive<0, 1>())
    .def("control_dependencies", [](graph& g, const std::vector<output>& deps) {
      return make_scope(g.control_dependencies(deps));
    }, py::keep_alive<0, 1>())
    .def("colocate_with", [](graph& g, const output& target) {
      return make_scope(g.colocate_with(target));
    }, py::keep_alive<0, 1>())
    .def("global_variables", &graph::global_variables)
    .def("trainable_variables", &graph::trainable_variables)
    .def_readwrite("seed", &graph::seed);
}

void bind_ops(py::module_& m) {
  using namespace pybind11::literals;
  // Sources.
  m.def("constant", [](graph& g, const py::array& value, const std::string& name) {
    return ops::constant(g, tensor_from_array(value), name);
  }, "graph"_a, "value"_a, "name"_a);
  m.def("placeholder", [](graph& g, const std::string& type, const py::object& shape,
                          const std::string& name) {
    return ops::placeholder(g, dtype_from_name(type), shape_from_python(shape), name);
  }, "graph"_a, "dtype"_a, "shape"_a, "name"_a);
  m.def("variable", [](graph& g, output initial, const std::string& name, bool trainable) {
    return ops::variable(g, initial, name, trainable);
  }, "graph"_a, "initial_value"_a, "name"_a, "trainable"_a);
  m.def("global_variables_initializer", &ops::global_variables_initializer, "graph"_a, "name"_a);
  m.def("assign", &ops::assign, "variable"_a, "value"_a, "name"_a);
  m.def("assign_add", &ops::assign_add, "variable"_a, "value"_a, "name"_a);
  m.def("assign_sub", &ops::assign_sub, "variable"_a, "value"_a, "name"_a);
  m.def("fill", &ops::fill, "graph"_a, "shape"_a, "value"_a, "name"_a);
  m.def("zeros", [](graph& g, std::vector<std::int64_t> shape, const std::string& type,
                    const std::string& name) {
    return ops::zeros(g, std::move(shape), dtype_from_name(type), name);
  }, "graph"_a, "shape"_a, "dtype"_a, "name"_a);
  m.def("ones", [](graph& g, std::vector<std::int64_t> shape, const std::string& type,
                   const std::string& name) {
    return ops::ones(g, std::move(shape), dtype_from_name(type), name);
  }, "graph"_a, "shape"_a, "dtype"_a, "name"_a);
  m.def("random_uniform", [](graph& g, std::vector<std::int64_t> shape, double minval, double maxval,
                             const std::string& type, std::optional<std::int64_t> seed,
                             const std::string& name) {
    return ops::random_uniform(g, std::move(shape), minval, maxval, dtype_from_name(type), seed, name);
  }, "graph"_a, "shape"_a, "minval"_a, "maxval"_a, "dtype"_a, "seed"_a, "name"_a);
  m.def("random_normal", [](graph& g, std::vector<std::int64_t> shape, double mean, double stddev,
                            const std::string& type, std::optional<std::int64_t> seed,
                            const std::string& name) {
    return ops::random_normal(g, std::move(shape), mean, stddev, dtype_from_name(type), seed, name);
  }, "graph"_a, "shape"_a, "mean"_a, "stddev"_a, "dtype"_a, "seed"_a, "name"_a);
  m.def("truncated_normal", [](graph& g, std::vector<std::int64_t> shape, double mean, double stddev,
                               const std::string& type, std::optional<std::int64_t> seed,
                               const std::string& name) {
    return ops::truncated_normal(g, std::move(shape), mean, stddev, dtype_from_name(type), seed, name);
  }, "graph"_a, "shape"_a, "mean"_a, "stddev"_a, "dtype"_a, "seed"_a, "name"_a);
  m.def("no_op", &ops::no_op, "graph"_a, "name"_a);
  m.def("group", &ops::group, "graph"_a, "deps"_a, "name"_a);

  // Elementwise, one input.
  using unary = output (*)(output, const std::string&);
  for (auto [py_name, fn] : {std::pair<const char*, unary>{"identity", &ops::identity},
                             {"neg", &ops::neg}, {"square", &ops::square}, {"sqrt", &ops::sqrt},
                             {"exp", &ops::exp}, {"log", &ops::log}, {"relu", &ops::relu},
                             {"sigmoid", &ops::sigmoid}, {"tanh", &ops::tanh},
                             {"softmax", &ops::softmax}, {"logical_not", &ops::logical_not},
                             {"abs", &ops::abs}, {"sign", &ops::sign}, {"floor", &ops::floor},
                             {"ceil", &ops::ceil}, {"round", &ops::round}, {"sin", &ops::sin},
                             {"cos", &ops::cos}, {"log1p", &ops::log1p}, {"expm1", &ops::expm1},
                             {"is_nan", &ops::is_nan}, {"is_inf", &ops::is_inf},
                             {"is_finite", &ops::is_finite},
                             {"stop_gradient", &ops::stop_gradient}})
    m.def(py_name, fn, "x"_a, "name"_a);

  // Elementwise, two inputs, numpy broadcasting.
  using binary = output (*)(output, output, const std::string&);
  for (auto [py_name, fn] : {std::pair<const char*, binary>{"add", &ops::add}, {"sub", &ops::sub},
                             {"mul", &ops::mul}, {"div", &ops::div}, {"equal", &ops::equal},
                             {"logical_and", &ops::logical_and}, {"maximum", &ops::maximum},
                             {"minimum", &ops::minimum}, {"pow", &ops::pow},
                             {"floor_div", &ops::floor_div}, {"floor_mod", &ops::floor_mod},
                             {"squared_difference", &ops::squared_difference},
                             {"not_equal", &ops::not_equal}, {"logical_or", &ops::logical_or}})
    m.def(py_name, fn, "x"_a, "y"_a, "name"_a);
  m.def("select", &ops::select, "condition"_a, "t"_a, "e"_a, "name"_a);
  // less/greater have a (output, double) overload too; these are the two-tensor forms.
  m.def("less", static_cast<binary>(&ops::less), "x"_a, "y"_a, "name"_a);
  m.def("less_equal", &ops::less_equal, "x"_a, "y"_a, "name"_a);
  m.def("greater", static_cast<binary>(&ops::greater), "x"_a, "y"_a, "name"_a);
  m.def("greater_equal", &ops::greater_equal, "x"_a, "y"_a, "name"_a);

  m.def("cast", [](output x, const std::string& to, const std::string& name) {
    return ops::cast(x, dtype_from_name(to), name);
  }, "x"_a, "dtype"_a, "name"_a);
  m.def("gather", &ops::gather, "params"_a, "indices"_a, "axis"_a, "name"_a);

  // Linear algebra, reductions, shapes.
  m.def("matmul", &ops::matmul, "a"_a, "b"_a, "transpose_a"_a, "transpose_b"_a, "name"_a);
  m.def("reduce_sum", &ops::reduce_sum, "x"_a, "axes"_a, "keep_dims"_a, "name"_a);
  m.def("reduce_mean", &ops::reduce_mean, "x"_a, "axes"_a, "keep_dims"_a, "name"_a);
  m.def("reduce_max", &ops::reduce_max, "x"_a, "axes"_a, "keep_dims"_a, "name"_a);
  m.def("reduce_min", &ops::reduce_min, "x"_a, "axes"_a, "keep_dims"_a, "name"_a);
  m.def("reduce_prod", &ops::reduce_prod, "x"_a, "axes"_a, "keep_dims"_a, "name"_a);
  m.def("argmax", &ops::argmax, "x"_a, "axis"_a, "name"_a);
  m.def("argmin", &ops::argmin, "x"_a, "axis"_a, "name"_a);
  m.def("where", &ops::where, "condition"_a, "name"_a);
  m.def("cumsum", &ops::cumsum, "x"_a, "axis"_a, "exclusive"_a, "reverse"_a, "name"_a);
  m.def("reshape", &ops::reshape, "x"_a, "shape"_a, "name"_a);
  m.def("concat", &ops::concat, "values"_a, "axis"_a, "name"_a);
  m.def("conv2d", &ops::conv2d, "x"_a, "filter"_a, "strides"_a, "padding"_a, "name"_a);
  m.def("max_pool", &ops::max_pool, "x"_a, "ksize"_a, "strides"_a, "padding"_a, "name"_a);
  m.def("avg_pool", &ops::avg_pool, "x"_a, "ksize"_a, "strides"_a, "padding"_a, "name"_a);

  // Ops that graph/ops.hpp has no builder for but the registry and the CPU kernels have (the
  // gradients make them); they take no attributes.
  m.def("make_op", [](graph& g, const std::string& op, const std::string& name,
                      const std::vector<output>& inputs) {
    static const std::set<std::string> attributeless{"AddN", "ZerosLike", "OnesLike"};
    if (attributeless.count(op) == 0)
      throw py::value_error("make_op makes only AddN, ZerosLike and OnesLike, not '" + op + "'");
    return ops::make(g, op, name, inputs);
  }, "graph"_a, "op"_a, "name"_a, "inputs"_a);

  m.def("softmax_cross_entropy_with_logits", &ops::softmax_cross_entropy_with_logits,
        "logits"_a, "labels"_a, "name"_a);

  // Layout and shape (graph/shape_ops.hpp).
  m.def("transpose", &ops::transpose, "x"_a, "perm"_a, "name"_a);
  m.def("shape", [](output x, const std::string& out_type, const std::string& name) {
    return ops::shape(x, dtype_from_name(out_type), name);
  }, "x"_a, "out_type"_a, "name"_a);
  m.def("size", [](output x, const std::string& out_type, const std::string& name) {
    return ops::size(x, dtype_from_name(out_type), name);
  }, "x"_a, "out_type"_a, "name"_a);
  m.def("rank", &ops::rank, "x"_a, "name"_a);
  m.def("strided_slice", [](output x, std::vector<std::int64_t> begin, std::vector<std::int64_t> end,
                            std::vector<std::int64_t> strides, std::int64_t begin_mask,
                            std::int64_t end_mask, std::int64_t ellipsis_mask,
                            std::int64_t new_axis_mask, std::int64_t shrink_axis_mask,
                            const std::string& name) {
    strided_slice_spec spec{std::move(begin), std::move(end), std::move(strides), begin_mask,
                            end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask};
    return ops::strided_slice(x, spec, name);
  }, "x"_a, "begin"_a, "end"_a, "strides"_a, "begin_mask"_a, "end_mask"_a, "ellipsis_mask"_a,
        "new_axis_mask"_a, "shrink_axis_mask"_a, "name"_a);
}

} // namespace

void bind_graph(py::module_& m) {
  bind_graph_class(m);
  bind_ops(m);
}

} // namespace actorflow::python

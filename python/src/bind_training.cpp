/// Training for Python: gradients(), the optimizers of graph/optimizers.hpp and
/// replica_device_setter (graph/replica_device_setter.hpp, with a cluster through
/// actors/cluster_spec.hpp, which needs no CAF).
///   grads = c.gradients([loss], [w.ref], [], False)         # None where loss does not depend
///   step = c.GradientDescentOptimizer(0.5).minimize(loss, [], False)
///   setter = c.replica_device_setter(2, "/job:ps", "/job:worker", True, ["VariableV2"], None)

#include "python/src/bindings.hpp"

#include "actors/cluster_spec.hpp"
#include "graph/gradients.hpp"
#include "graph/optimizers.hpp"
#include "graph/replica_device_setter.hpp"

#include <pybind11/stl.h>

#include <memory>
#include <optional>

namespace actorflow::python {

namespace {

/// Invalid outputs (no path from x to the ys) become None, as tf.gradients gives.
std::vector<std::optional<output>> optional_outputs(const std::vector<output>& outputs) {
  std::vector<std::optional<output>> out;
  for (auto& o : outputs)
    out.push_back(o.valid() ? std::optional<output>{o} : std::nullopt);
  return out;
}

gradient_options gradient_options_of(bool colocate_gradients_with_ops) {
  gradient_options options;
  options.colocate_gradients_with_ops = colocate_gradients_with_ops;
  return options;
}

void bind_gradients(py::module_& m) {
  using namespace pybind11::literals;
  m.def("gradients", [](const std::vector<output>& ys, const std::vector<output>& xs,
                        const std::vector<output>& grad_ys, bool colocate) {
    return optional_outputs(gradients(ys, xs, grad_ys, gradient_options_of(colocate)));
  }, "ys"_a, "xs"_a, "grad_ys"_a, "colocate_gradients_with_ops"_a);
}

void bind_optimizers(py::module_& m) {
  using namespace pybind11::literals;
  py::class_<optimizer>(m, "Optimizer")
    .def("compute_gradients", [](optimizer& o, output loss, std::vector<variable> vars, bool colocate) {
      return o.compute_gradients(loss, std::move(vars), gradient_options_of(colocate));
    }, "loss"_a, "var_list"_a, "colocate_gradients_with_ops"_a)
    .def("apply_gradients", &optimizer::apply_gradients, "pairs"_a, "name"_a)
    .def("minimize", [](optimizer& o, output loss, std::vector<variable> vars, bool colocate) {
      return o.minimize(loss, std::move(vars), gradient_options_of(colocate));
    }, "loss"_a, "var_list"_a, "colocate_gradients_with_ops"_a)
    .def("set_learning_rate", &optimizer::set_learning_rate, "rate"_a);
  py::class_<gradient_descent_optimizer, optimizer>(m, "GradientDescentOptimizer")
    .def(py::init<double>(), "learning_rate"_a);
  py::class_<momentum_optimizer, optimizer>(m, "MomentumOptimizer")
    .def(py::init<double, double, bool>(), "learning_rate"_a, "momentum"_a, "use_nesterov"_a);
  py::class_<adagrad_optimizer, optimizer>(m, "AdagradOptimizer")
    .def(py::init<double, double>(), "learning_rate"_a, "initial_accumulator_value"_a);
  py::class_<ftrl_optimizer, optimizer>(m, "FtrlOptimizer")
    .def(py::init<double, double, double, double, double, double>(), "learning_rate"_a,
         "learning_rate_power"_a, "initial_accumulator_value"_a, "l1"_a, "l2"_a, "l2_shrinkage"_a);
  py::class_<adam_optimizer, optimizer>(m, "AdamOptimizer")
    .def(py::init<double, double, double, double>(), "learning_rate"_a, "beta1"_a, "beta2"_a,
         "epsilon"_a);
}

void bind_device_setter(py::module_& m) {
  using namespace pybind11::literals;
  py::class_<native_device_function>(m, "NativeDeviceFunction")
    .def("__call__", [](const native_device_function& fn, const graph& g, int node_id) {
      if (node_id < 0 || static_cast<std::size_t>(node_id) >= g.size())
        throw py::index_error("the graph has no node " + std::to_string(node_id));
      return fn.choose(g.at(node_id));
    }, "graph"_a, "node_id"_a);
  m.def("replica_device_setter", [](int ps_tasks, const std::string& ps_device,
                                    const std::string& worker_device, bool merge_devices,
                                    std::vector<std::string> ps_ops,
                                    std::shared_ptr<cluster_spec> cluster) {
    replica_device_setter_options options;
    options.ps_tasks = ps_tasks;
    options.ps_device = ps_device;
    options.worker_device = worker_device;
    options.merge_devices = merge_devices;
    options.ps_ops = std::move(ps_ops);
    auto setter = cluster ? replica_device_setter_for(*cluster, std::move(options))
                          : replica_device_setter(std::move(options));
    return native_device_function{value_or_raise(std::move(setter))};
  }, "ps_tasks"_a, "ps_device"_a, "worker_device"_a, "merge_devices"_a, "ps_ops"_a, "cluster"_a);
}

} // namespace

void bind_training(py::module_& m) {
  bind_gradients(m);
  bind_optimizers(m);
  bind_device_setter(m);
}

} // namespace actorflow::python

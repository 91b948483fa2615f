/// Control flow and sparse values for Python: graph/control_flow.hpp's cond and while_loop, whose
/// branches and bodies are Python callables called while the C++ builder is inside their context
/// (so the ops they make go there), and graph/sparse_ops.hpp under TF's names.
///   outs = c.cond(pred, lambda: [x_output], lambda: [y_output], "cond")
///   finals = c.while_loop(lambda vs: less_output, lambda vs: [...], [v0], 10, None, [], "while")
///   parts = c.as_indexed_slices(gradient_output)   # (values, indices, dense_shape) or None
/// The callables run with the GIL held (graph building is Python's thread); their exceptions
/// propagate through the builder, whose scopes and contexts are RAII, so nothing stays entered.

#include "python/src/bindings.hpp"

#include "graph/control_flow.hpp"
#include "graph/partitioned_variable.hpp"
#include "graph/sampled_losses.hpp"
#include "graph/sparse_ops.hpp"

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <optional>

namespace actorflow::python {

namespace {

tensor_shape invariant_from_python(const py::object& shape) {
  if (shape.is_none())
    return tensor_shape::unknown();
  std::vector<std::int64_t> dims;
  for (auto d : shape)
    dims.push_back(d.is_none() ? -1 : d.cast<std::int64_t>());
  return tensor_shape{dims};
}

void bind_control_flow(py::module_& m) {
  using namespace pybind11::literals;
  m.def("cond", [](output pred, const py::function& true_fn, const py::function& false_fn,
                   const std::string& name) {
    auto branch = [](const py::function& fn) {
      return [&fn]() { return fn().cast<std::vector<output>>(); };
    };
    return ops::cond(pred, branch(true_fn), branch(false_fn), name);
  }, "pred"_a, "true_fn"_a, "false_fn"_a, "name"_a);
  m.def("while_loop", [](const py::function& cond, const py::function& body,
                         const std::vector<output>& loop_vars, std::int64_t parallel_iterations,
                         std::optional<std::int64_t> maximum_iterations,
                         const std::vector<py::object>& shape_invariants, const std::string& name) {
    ops::while_options options;
    options.parallel_iterations = parallel_iterations;
    options.maximum_iterations = maximum_iterations;
    for (auto& s : shape_invariants)
      options.shape_invariants.push_back(invariant_from_python(s));
    options.name = name;
    return ops::while_loop(
      [&cond](const std::vector<output>& vars) { return cond(vars).cast<output>(); },
      [&body](const std::vector<output>& vars) { return body(vars).cast<std::vector<output>>(); },
      loop_vars, options);
  }, "cond"_a, "body"_a, "loop_vars"_a, "parallel_iterations"_a, "maximum_iterations"_a,
     "shape_invariants"_a, "name"_a);
}

void bind_sparse(py::module_& m) {
  using namespace pybind11::literals;
  m.def("as_indexed_slices", [](const output& dense) -> std::optional<py::tuple> {
    auto parts = as_indexed_slices(dense);
    if (!parts)
      return std::nullopt;
    return py::make_tuple(parts->values, parts->indices, parts->dense_shape);
  }, "dense"_a);
  m.def("indexed_slices", &ops::indexed_slices, "values"_a, "indices"_a, "dense_shape"_a, "name"_a);
  m.def("unique", &ops::unique, "x"_a, "name"_a);
  m.def("unsorted_segment_sum", &ops::unsorted_segment_sum, "data"_a, "segment_ids"_a,
        "num_segments"_a, "name"_a);
  m.def("scatter_add", &ops::scatter_add, "variable"_a, "indices"_a, "updates"_a, "name"_a);
  m.def("scatter_sub", &ops::scatter_sub, "variable"_a, "indices"_a, "updates"_a, "name"_a);
  m.def("scatter_update", &ops::scatter_update, "variable"_a, "indices"_a, "updates"_a, "name"_a);
  m.def("embedding_lookup",
        static_cast<output (*)(const actorflow::variable&, output, const std::string&)>(
          &ops::embedding_lookup),
        "params"_a, "ids"_a, "name"_a);
  m.def("embedding_lookup_clipped",
        static_cast<output (*)(const actorflow::variable&, output, double, const std::string&)>(
          &ops::embedding_lookup),
        "params"_a, "ids"_a, "max_norm"_a, "name"_a);
  // A table stored as shards along axis 0 (a PartitionedVariable, or TF's list of Variables):
  // each shard's device gathers only the batch's ids that fall on it, by TF's mod or div rule.
  m.def("embedding_lookup_partitioned",
        [](const std::string& table_name, const std::vector<std::int64_t>& shape,
           const std::string& type, const std::vector<actorflow::variable>& shards,
           const std::vector<std::int64_t>& offsets, output ids, const std::string& strategy,
           double max_norm, const std::string& name) {
          partitioned_variable table{table_name, tensor_shape{shape}, dtype_from_name(type), 0,
                                     shards, offsets};
          return ops::embedding_lookup(table, ids, strategy, max_norm, name);
        },
        "table_name"_a, "shape"_a, "dtype"_a, "shards"_a, "offsets"_a, "ids"_a,
        "partition_strategy"_a, "max_norm"_a, "name"_a);
  m.def("sigmoid_cross_entropy_with_logits", &ops::sigmoid_cross_entropy_with_logits, "logits"_a,
        "labels"_a, "name"_a);
  m.def("embedding_lookup_sparse",
        [](const actorflow::variable& params, output ids, output segment_ids, output num_segments,
           std::optional<output> weights, const std::string& combiner, const std::string& name) {
          return ops::embedding_lookup_sparse(params, ids, segment_ids, num_segments,
                                              weights.value_or(output{}), combiner, name);
        },
        "params"_a, "ids"_a, "segment_ids"_a, "num_segments"_a, "weights"_a, "combiner"_a, "name"_a);
  m.def("log_uniform_candidate_sampler",
        [](output true_classes, int num_true, int num_sampled, bool unique, std::int64_t range_max,
           std::optional<std::int64_t> seed, const std::string& name) {
          auto drawn = ops::log_uniform_candidate_sampler(true_classes, num_true, num_sampled,
                                                          unique, range_max, seed, name);
          return py::make_tuple(drawn.candidates, drawn.true_expected_count,
                                drawn.sampled_expected_count);
        },
        "true_classes"_a, "num_true"_a, "num_sampled"_a, "unique"_a, "range_max"_a, "seed"_a,
        "name"_a);
  // nce_loss and sampled_softmax_loss: `sampled` is a sampler's three outputs or None (the
  // loss draws its own); `remove_accidental_hits` None keeps the loss's own default.
  auto sampled_loss = [](auto loss) {
    return [loss](const actorflow::variable& weights, const actorflow::variable& biases,
                  output labels, output inputs, int num_sampled, std::int64_t num_classes,
                  int num_true, std::optional<std::vector<output>> sampled,
                  std::optional<bool> remove_accidental_hits, std::optional<std::int64_t> seed,
                  const std::string& name) {
      ops::sampled_loss_options options;
      options.num_true = num_true;
      options.remove_accidental_hits = remove_accidental_hits;
      options.seed = seed;
      if (sampled) {
        if (sampled->size() != 3)
          throw py::value_error(name + ": sampled_values is (sampled_candidates, "
                                       "true_expected_count, sampled_expected_count)");
        options.sampled = sampled_values{(*sampled)[0], (*sampled)[1], (*sampled)[2]};
      }
      return loss(weights, biases, labels, inputs, num_sampled, num_classes, options, name);
    };
  };
  m.def("nce_loss", sampled_loss([](auto&&... args) { return ops::nce_loss(args...); }),
        "weights"_a, "biases"_a, "labels"_a, "inputs"_a, "num_sampled"_a, "num_classes"_a,
        "num_true"_a, "sampled"_a, "remove_accidental_hits"_a, "seed"_a, "name"_a);
  m.def("sampled_softmax_loss",
        sampled_loss([](auto&&... args) { return ops::sampled_softmax_loss(args...); }),
        "weights"_a, "biases"_a, "labels"_a, "inputs"_a, "num_sampled"_a, "num_classes"_a,
        "num_true"_a, "sampled"_a, "remove_accidental_hits"_a, "seed"_a, "name"_a);
}

} // namespace

void bind_control_flow_and_sparse(py::module_& m) {
  bind_control_flow(m);
  bind_sparse(m);
}

} // namespace actorflow::python

/// Sessions for Python: actors/session.hpp's blocking session, its options, and steps that run
/// with the GIL released.
///   s = c.Session(g, target="", log_device_placement=False, ...)
///   values = s.run([fetch_outputs], [feed_outputs], [feed_arrays], [target_outputs])

#include "python/src/bindings.hpp"

#include "actors/session.hpp"

#include <pybind11/stl.h>

#include <memory>
#include <optional>

namespace actorflow::python {

namespace {

python_session make_session(graph& g, const std::string& target, bool log_device_placement,
                            bool allow_soft_placement, int inter_op_threads, int intra_op_threads,
                            double timeout_seconds, double connect_timeout_seconds,
                            bool use_per_session_threads, double gpu_memory_fraction,
                            bool gpu_allow_growth, int cpu_device_count, int gpu_device_count) {
  session_options options;
  options.target = target;
  options.log_device_placement = log_device_placement;
  options.allow_soft_placement = allow_soft_placement;
  options.inter_op_parallelism_threads = inter_op_threads;
  options.intra_op_parallelism_threads = intra_op_threads;
  options.timeout_seconds = timeout_seconds;
  options.connect_timeout_seconds = connect_timeout_seconds;
  options.use_per_session_threads = use_per_session_threads;
  options.gpu.per_process_gpu_memory_fraction = gpu_memory_fraction;
  options.gpu.allow_growth = gpu_allow_growth;
  options.cpu_device_count = cpu_device_count;
  options.gpu.device_count = gpu_device_count;
  py::gil_scoped_release release;
  return python_session{std::make_unique<session>(g, std::move(options))};
}

/// A session's steps under per-step options (RunOptions.timeout_in_ms), for run_fed_step.
struct session_with_options {
  session& s;
  run_options options;

  template <class... Extra>
  result<std::vector<tensor>> run(const std::vector<output>& fetches, const feed_list& feeds,
                                  const std::vector<output>& targets, Extra... extra) {
    return s.run_with(options, fetches, feeds, targets, extra...);
  }

  session* cancellable_session() { return &s; }
};

session_with_options with_timeout(python_session& self, std::int64_t timeout_ms) {
  run_options options;
  options.timeout_ms = timeout_ms;
  return {self.get(), options};
}

} // namespace

py::list run_step(python_session& self, const std::vector<output>& fetches,
                  const std::vector<output>& feed_outputs, const std::vector<py::array>& feed_values,
                  const std::vector<output>& targets, std::int64_t timeout_ms) {
  auto stepping = with_timeout(self, timeout_ms);
  return run_fed_step(stepping, fetches, feed_outputs, feed_values, targets);
}

namespace {

/// run_step, and where the step's time went (actors/session.hpp's step_stats, the one part of
/// TF's RunMetadata the session gives): (values, total_seconds, execution_seconds).
py::tuple run_step_with_stats(python_session& self, const std::vector<output>& fetches,
                              const std::vector<output>& feed_outputs,
                              const std::vector<py::array>& feed_values,
                              const std::vector<output>& targets, std::int64_t timeout_ms) {
  step_stats stats;
  auto stepping = with_timeout(self, timeout_ms);
  auto values = run_fed_step(stepping, fetches, feed_outputs, feed_values, targets, &stats);
  return py::make_tuple(values, stats.total_seconds, stats.execution_seconds);
}

} // namespace

void bind_session(py::module_& m) {
  using namespace pybind11::literals;
  py::class_<python_session>(m, "Session")
    .def(py::init(&make_session), "graph"_a, "target"_a, "log_device_placement"_a,
         "allow_soft_placement"_a, "inter_op_parallelism_threads"_a,
         "intra_op_parallelism_threads"_a, "timeout_seconds"_a, "connect_timeout_seconds"_a,
         "use_per_session_threads"_a = false, "gpu_memory_fraction"_a = 0.0,
         "gpu_allow_growth"_a = false, "cpu_device_count"_a = 1, "gpu_device_count"_a = -1,
         // The session refers to its graph until it is destroyed.
         py::keep_alive<1, 2>())
    .def("run", &run_step, "fetches"_a, "feed_outputs"_a, "feed_values"_a, "targets"_a,
         "timeout_ms"_a = 0)
    .def("run_with_stats", &run_step_with_stats, "fetches"_a, "feed_outputs"_a, "feed_values"_a,
         "targets"_a, "timeout_ms"_a = 0)
    .def("close", &python_session::close)
    .def_property_readonly("closed", [](const python_session& s) { return !s.open && !s.borrowed; })
    .def("placement_log", [](python_session& s) { return s.get().placement_log(); })
    .def("device_names", [](python_session& s) { return s.get().device_names(); });
}

} // namespace actorflow::python

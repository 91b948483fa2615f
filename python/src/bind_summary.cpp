/// TensorBoard summaries for Python (tf.summary, python/actorflow/summary.py): a Summary
/// serialized from fetched values, and event files written by the C++ writer.
///   c.serialize_summary([("loss", False, array), ("weights", True, array)])   # bytes
///   w = c.EventFileWriter("logs"); w.add_summary(step, bytes); w.add_graph(graph); w.path

#include "python/src/bindings.hpp"

#include "serialization/event_file.hpp"

#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace actorflow::python {

namespace {

/// The values of `array` (any numeric dtype) as doubles.
std::vector<double> doubles_of(const py::array& array) {
  auto as_double = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(array);
  if (!as_double)
    throw py::type_error("a summary's value must be numeric");
  return {as_double.data(), as_double.data() + as_double.size()};
}

struct python_event_writer {
  std::unique_ptr<event_file_writer> writer;

  event_file_writer& get() {
    if (!writer)
      throw std::runtime_error("the FileWriter has been closed");
    return *writer;
  }
};

} // namespace

void bind_summary(py::module_& m) {
  using namespace pybind11::literals;
  m.def("serialize_summary",
        [](const std::vector<std::tuple<std::string, bool, py::array>>& entries) {
          std::vector<summary_value> values;
          for (auto& [tag, histogram, array] : entries)
            values.push_back({tag, histogram, doubles_of(array)});
          return py::bytes(value_or_raise(serialize_summary(values)));
        },
        "entries"_a);

  py::class_<python_event_writer>(m, "EventFileWriter")
    .def(py::init([](const std::string& log_dir) {
           return python_event_writer{value_or_raise(event_file_writer::open(log_dir))};
         }),
         "log_dir"_a)
    .def_property_readonly("path", [](python_event_writer& w) { return w.get().path(); })
    .def("add_summary",
         [](python_event_writer& w, std::int64_t step, const py::bytes& summary) {
           check(w.get().add_summary(step, std::string{summary}));
         },
         "step"_a, "summary"_a)
    .def("add_graph", [](python_event_writer& w, const graph& g) { check(w.get().add_graph(g)); },
         "graph"_a)
    .def("close", [](python_event_writer& w) { w.writer.reset(); });
}

} // namespace actorflow::python

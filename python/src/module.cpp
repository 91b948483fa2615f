/// The extension module and what every binding shares: status to exception, numpy to tensor.
///   import actorflow._actorflow as c; g = c.Graph(); x = c.constant(g, np.float32(3), "x")

#include "python/src/bindings.hpp"

#include <cstring>
#include <memory>
#include <vector>

namespace actorflow::python {

void raise_status(const status& s) {
  // The exception classes live in Python (actorflow/errors.py) so that users can subclass and
  // catch them as TF's; this only picks the one for the code.
  auto errors = py::module_::import("actorflow.errors");
  py::object error = errors.attr("_error_from_code")(to_string(s.code()), s.message());
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  throw py::error_already_set();
}

dtype dtype_from_name(const std::string& name) {
  if (auto type = parse_dtype(name))
    return *type;
  throw py::value_error("actorflow has no dtype '" + name +
                        "' (float32, float64, int32, int64 and bool exist)");
}

namespace {

/// The actorflow dtype of a numpy dtype; nullopt for those actorflow has not.
std::optional<dtype> dtype_of_numpy(const py::dtype& d) {
  auto kind = d.kind();
  auto size = d.itemsize();
  if (kind == 'f' && size == 4)
    return dtype::float32;
  if (kind == 'f' && size == 8)
    return dtype::float64;
  if (kind == 'i' && size == 4)
    return dtype::int32;
  if (kind == 'i' && size == 8)
    return dtype::int64;
  if (kind == 'b' && size == 1)
    return dtype::boolean;
  return std::nullopt;
}

} // namespace

tensor tensor_from_array(const py::array& array) {
  auto type = dtype_of_numpy(array.dtype());
  if (!type)
    throw py::type_error("actorflow has no dtype for numpy's " +
                         py::str(array.dtype()).cast<std::string>() +
                         " (float32, float64, int32, int64 and bool exist)");
  if (!(array.flags() & py::array::c_style))
    throw py::value_error("tensor_from_array needs a C-contiguous array");
  std::vector<std::int64_t> dims(array.shape(), array.shape() + array.ndim());
  tensor t{*type, tensor_shape{dims}};
  if (t.bytes() > 0)
    std::memcpy(t.raw_data(), array.data(), t.bytes());
  return t;
}

py::array array_from_tensor(tensor t) {
  if (!t.on_host())
    throw py::value_error("a fetched tensor is in device memory; actorflow fetches to the host");
  py::dtype type;
  switch (t.type()) {
    case dtype::float32: type = py::dtype::of<float>(); break;
    case dtype::float64: type = py::dtype::of<double>(); break;
    case dtype::int32: type = py::dtype::of<std::int32_t>(); break;
    case dtype::int64: type = py::dtype::of<std::int64_t>(); break;
    case dtype::boolean: type = py::dtype::of<bool>(); break;
  }
  std::vector<py::ssize_t> shape(t.shape().dims().begin(), t.shape().dims().end());
  // Nobody else can reach a buffer only `t` holds, so the array may own it (and write it).
  if (t.bytes() > 0 && t.buffer_ref().use_count() == 1) {
    void* data = t.raw_data();
    auto owner = std::make_unique<tensor>(std::move(t));
    py::capsule keep_alive{owner.get(), [](void* held) { delete static_cast<tensor*>(held); }};
    owner.release();
    return py::array{type, shape, data, keep_alive};
  }
  py::array out{type, shape};
  if (t.bytes() > 0)
    std::memcpy(out.mutable_data(), t.raw_data(), t.bytes());
  return out;
}

} // namespace actorflow::python

PYBIND11_MODULE(_actorflow, m) {
  m.doc() = "actorflow's C++ API for the Python package (use actorflow / actorflow.compat.v1)";
  actorflow::python::bind_graph(m);
  actorflow::python::bind_session(m);
  actorflow::python::bind_server(m);
  actorflow::python::bind_training(m);
  actorflow::python::bind_monitored(m);
  actorflow::python::bind_control_flow_and_sparse(m);
  actorflow::python::bind_summary(m);
}

#pragma once
/// The Python extension `actorflow._actorflow`, one translation unit per concern:
///   bind_graph(m);     // graph, outputs, scopes, ops::      (bind_graph.cpp)
///   bind_session(m);   // session, its options, step errors   (bind_session.cpp)
///   bind_server(m);    // cluster specs and servers           (bind_server.cpp, the only one with CAF)
///   bind_training(m);  // gradients, optimizers, device setters (bind_training.cpp)
///   bind_monitored(m); // saver, monitored session, hooks, sync replicas (bind_monitored.cpp)
///   bind_control_flow_and_sparse(m);  // cond, while_loop, IndexedSlices, embedding_lookup
///                                     // (bind_control_flow.cpp)
/// The pure-Python package (python/actorflow/) is the TF1 surface; this module is a thin layer
/// over the C++ API that it calls. Dtypes cross as their names ("float32"), tensors as numpy
/// arrays, errors as the actorflow.errors class of their code.

#include "actors/session.hpp"
#include "graph/graph.hpp"
#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <stdexcept>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace actorflow::python {

namespace py = pybind11;

void bind_graph(py::module_& m);
void bind_session(py::module_& m);
void bind_server(py::module_& m);
void bind_training(py::module_& m);
void bind_monitored(py::module_& m);
void bind_control_flow_and_sparse(py::module_& m);
void bind_summary(py::module_& m);

/// A session that Python can close before the object goes away (tf.Session.close), or one
/// borrowed from a monitored session for the length of a hook's call (`borrowed`, cleared when
/// the call returns, so a hook that kept it gets an error, not a dangling session).
struct python_session {
  std::unique_ptr<session> open;
  session* borrowed = nullptr;

  session& get() {
    if (open)
      return *open;
    if (borrowed)
      return *borrowed;
    throw std::runtime_error("Attempted to use a closed Session.");
  }

  void close() {
    borrowed = nullptr;
    // Closing a remote session waits for its master's answer: other Python threads go on.
    py::gil_scoped_release release;
    open.reset();
  }
};

/// One step of `self` with the GIL released, bounded by `timeout_ms` (0: no bound of its own):
/// the fetched values as numpy arrays.
py::list run_step(python_session& self, const std::vector<output>& fetches,
                  const std::vector<output>& feed_outputs, const std::vector<py::array>& feed_values,
                  const std::vector<output>& targets, std::int64_t timeout_ms = 0);

/// A Python object that may be dropped on a thread that does not hold the GIL (a callback kept
/// by C++ code that runs with the GIL released): it takes the GIL to let go of the object.
struct gil_object {
  py::object object;
  explicit gil_object(py::object o) : object(std::move(o)) {}
  gil_object(const gil_object&) = delete;
  gil_object& operator=(const gil_object&) = delete;
  ~gil_object() {
    py::gil_scoped_acquire gil;
    object = py::object();
  }
};

/// A device function made in C++ (replica_device_setter): Python hands it back to
/// Graph.device_native unchanged, so no Python runs while the node is placed.
struct native_device_function {
  device_function choose;
};

/// Raises the actorflow.errors exception for `s`'s code (InvalidArgumentError, ...) with its
/// message. `s` must not be ok.
[[noreturn]] void raise_status(const status& s);

inline void check(const status& s) {
  if (!s.ok())
    raise_status(s);
}

template <class T>
T value_or_raise(result<T> r) {
  if (!r)
    raise_status(r.error());
  return std::move(r).value();
}

/// The dtype named `name` ("float32", "int64", "bool", ...); ValueError naming it otherwise.
dtype dtype_from_name(const std::string& name);

/// A tensor holding a copy of `array`, which the Python side has made C-contiguous with one of
/// the five dtypes (np.asarray(value, dtype)); a TypeError names any other dtype.
tensor tensor_from_array(const py::array& array);

/// A numpy array of host tensor `t` (0-d for a scalar). When `t` is its buffer's only holder (a
/// step's fresh result, moved in) the array is that buffer, kept alive by the array and freed
/// with it: no copy. Otherwise (a variable's or a constant's stored value, which a later step
/// may write in place) the array is a copy, as TensorFlow's TF_TensorMaybeMove decides.
py::array array_from_tensor(tensor t);

/// While alive, Ctrl-C (SIGINT) cancels the steps in flight of `s` (session::cancel_running_steps;
/// null: nothing to cancel, the step runs on), so that a run blocked in a long step returns soon.
/// Python's own SIGINT handler still runs, chained, and records the KeyboardInterrupt that
/// run_fed_step then raises. A SIGINT Python ignores or leaves at its default is not touched.
/// (interrupts.cpp)
class interruptible_step {
public:
  explicit interruptible_step(session* s);
  ~interruptible_step();
  interruptible_step(const interruptible_step&) = delete;
  interruptible_step& operator=(const interruptible_step&) = delete;

private:
  session* session_;
};

/// The session a step of `s` may cancel: its cancellable_session() where it has one.
template <class S>
auto cancellable(S& s, int) -> decltype(s.cancellable_session()) {
  return s.cancellable_session();
}
template <class S>
session* cancellable(S&, long) {
  return nullptr;
}

/// One step of `s` (a session or a monitored session: anything with run(fetches, feeds,
/// targets, extra...)) fed numpy arrays, the GIL released while it runs; its values as numpy
/// arrays. `extra` goes to run after the targets (a session's step_stats*). Ctrl-C while it
/// runs cancels it (where `s` can cancel) and raises KeyboardInterrupt.
template <class Session, class... Extra>
py::list run_fed_step(Session& s, const std::vector<output>& fetches,
                      const std::vector<output>& feed_outputs,
                      const std::vector<py::array>& feed_values, const std::vector<output>& targets,
                      Extra... extra) {
  if (feed_outputs.size() != feed_values.size())
    throw py::value_error("a step needs one value per fed output");
  feed_list feeds;
  for (std::size_t i = 0; i < feed_outputs.size(); ++i)
    feeds.emplace_back(feed_outputs[i], tensor_from_array(feed_values[i]));
  // A Ctrl-C that came before the step: raised now, the step not run.
  if (PyErr_CheckSignals() != 0)
    throw py::error_already_set();
  std::optional<result<std::vector<tensor>>> outcome;
  {
    interruptible_step interruptible{cancellable(s, 0)};
    py::gil_scoped_release release;
    outcome.emplace(s.run(fetches, feeds, targets, extra...));
  }
  // A Ctrl-C during the step: the KeyboardInterrupt it recorded, not the cancelled step's error.
  if (PyErr_CheckSignals() != 0)
    throw py::error_already_set();
  auto values = value_or_raise(std::move(*outcome));
  py::list arrays;
  for (auto& t : values)
    arrays.append(array_from_tensor(std::move(t)));
  return arrays;
}

} // namespace actorflow::python

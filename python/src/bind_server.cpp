/// Cluster specs and servers for Python (tf.train.ClusterSpec, tf.train.Server): the only
/// translation unit of the extension that sees CAF, through actors/server.hpp.
///   spec = c.ClusterSpec({"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223"]})
///   server = c.Server.start(spec, "worker", 0); server.target; server.join()

#include "python/src/bindings.hpp"

#include "actors/cluster_spec.hpp"
#include "actors/server.hpp"

#include <pybind11/stl.h>

#include <memory>

namespace actorflow::python {

namespace {

/// pybind11 holders cannot be of const types; what the servers get is made const on the way.
using shared_cluster = std::shared_ptr<cluster_spec>;

/// A running server; stop() (or the object's end) stops it.
struct python_server {
  std::unique_ptr<server> running;

  server& get() {
    if (!running)
      throw std::runtime_error("the server has been stopped");
    return *running;
  }

  void stop() {
    // Stopping waits for the server's actors to end (at most 10 s): other threads go on.
    py::gil_scoped_release release;
    if (running)
      running->stop();
  }
};

server_options options_of(int threads, double timeout_seconds) {
  server_options options;
  options.threads = threads;
  options.timeout_seconds = timeout_seconds;
  return options;
}

python_server start_server(const shared_cluster& cluster, const std::string& job, int task,
                           int threads, double timeout_seconds,
                           std::vector<std::string> device_filters) {
  auto options = options_of(threads, timeout_seconds);
  options.device_filters = std::move(device_filters);
  std::optional<result<std::unique_ptr<server>>> started;
  {
    py::gil_scoped_release release;
    started.emplace(server::start(cluster, job, task, std::move(options)));
  }
  return python_server{value_or_raise(std::move(*started))};
}

python_server start_local_server(int port, int threads, double timeout_seconds) {
  auto options = options_of(threads, timeout_seconds);
  if (port < 0 || port > 65535)
    throw py::value_error("a port is 0 (any free one) to 65535, not " + std::to_string(port));
  options.port = static_cast<std::uint16_t>(port);
  std::optional<result<std::unique_ptr<server>>> started;
  {
    py::gil_scoped_release release;
    started.emplace(server::create_local_server(options));
  }
  return python_server{value_or_raise(std::move(*started))};
}

} // namespace

void bind_server(py::module_& m) {
  using namespace pybind11::literals;
  py::class_<cluster_spec, shared_cluster>(m, "ClusterSpec")
    .def(py::init([](cluster_spec::job_map jobs) {
      return std::make_shared<cluster_spec>(value_or_raise(cluster_spec::from_jobs(std::move(jobs))));
    }), "jobs"_a)
    .def("as_map", &cluster_spec::as_map)
    .def("jobs", &cluster_spec::jobs)
    .def("num_tasks", &cluster_spec::num_tasks)
    .def("address", [](const cluster_spec& c, const std::string& job, int task) {
      return value_or_raise(c.address(job, task));
    })
    .def("to_json", &cluster_spec::to_json);

  py::class_<python_server>(m, "Server")
    .def_static("start", &start_server, "cluster"_a, "job"_a, "task"_a, "threads"_a,
                "timeout_seconds"_a, "device_filters"_a)
    .def_static("create_local_server", &start_local_server, "port"_a, "threads"_a,
                "timeout_seconds"_a)
    .def_property_readonly("target", [](python_server& s) { return s.get().target(); })
    .def_property_readonly("name", [](python_server& s) { return s.get().name(); })
    .def("join", [](python_server& s) {
      auto& running = s.get();
      py::gil_scoped_release release;
      running.join();
    })
    .def("stop", &python_server::stop);

  m.def("parse_target", [](const std::string& target) {
    auto parsed = value_or_raise(parse_target(target));
    return py::make_tuple(parsed.host, parsed.port);
  }, "target"_a);
}

} // namespace actorflow::python

/// The training library for Python (tf.train's Saver, MonitoredTrainingSession, its hooks and
/// SyncReplicasOptimizer): actors/saver.hpp and apps/train/ (actorflow::actorflow_training),
/// not rewritten in Python.
///   hooks = [c.stop_at_step_hook(step.read, 100), c.python_hook(adapter)]
///   s = c.MonitoredSession(g, "", ..., step, True, "/tmp/ckpt", 50, 5, "", 100, 30, None, hooks)
///   values = s.run([loss_output], [], [], [train_op_output]); s.should_stop(); s.close()
/// Steps and creation run with the GIL released; a hook written in Python (python_hook) takes
/// it only while it calls into Python.

#include "python/src/bindings.hpp"

#include "actors/cluster_spec.hpp"
#include "actors/saver.hpp"
#include "serialization/checkpoint.hpp"
#include "train/monitored_session.hpp"
#include "train/sync_replicas_optimizer.hpp"

#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <optional>

namespace actorflow::python {

namespace {

/// A hook made here, waiting to be moved into the monitored session it is given to.
struct native_hook {
  std::unique_ptr<train::session_run_hook> hook;
};

/// The error a hook's Python call ends a step with. The adapter (train.py's _HookAdapter)
/// catches the Python exception itself and keeps it, so that MonitoredSession.run raises that
/// exception, not this status; failed_precondition, because a lost-task code would make the
/// monitored session run the step again.
status python_failure(const std::string& what, const std::string& message) {
  return status{errc::failed_precondition, "a Python hook's " + what + " raised: " + message};
}

/// Runs `call` with a borrowed Python session for `s`, cleared afterwards (a hook that kept the
/// session gets "closed Session", never a dangling one).
template <class Call>
auto with_borrowed(session& s, Call call) {
  py::object borrowed = py::cast(python_session{nullptr, &s});
  // Alive while `borrowed` refers to it, so the clearing below cannot dangle (or throw).
  struct clear {
    python_session* held;
    ~clear() { held->borrowed = nullptr; }
  } cleared{borrowed.cast<python_session*>()};
  return call(borrowed);
}

/// TF's SessionRunHook subclassed in Python: each method takes the GIL and calls the adapter,
/// which returns None (or, for before_run, the fetches and feeds; for after_run, whether to
/// stop) when the user's method returned, and the exception's text when it raised.
class python_hook final : public train::session_run_hook {
public:
  explicit python_hook(py::object adapter) : adapter_(std::make_shared<gil_object>(std::move(adapter))) {}

  status begin(graph&) override { return simple("begin", [&] { return call("begin"); }); }

  status after_create_session(session& s) override {
    return simple("after_create_session", [&] {
      return with_borrowed(s, [&](py::object& borrowed) { return call("after_create_session", borrowed); });
    });
  }

  status end(session& s) override {
    return simple("end", [&] {
      return with_borrowed(s, [&](py::object& borrowed) { return call("end", borrowed); });
    });
  }

  result<train::session_run_args> before_run(train::session_run_context& context) override {
    py::gil_scoped_acquire gil;
    try {
      auto answer = with_borrowed(context.raw_session(), [&](py::object& borrowed) {
        return call("before_run", borrowed);
      });
      if (py::isinstance<py::str>(answer))
        return python_failure("before_run", answer.cast<std::string>());
      auto parts = answer.cast<py::tuple>();
      train::session_run_args args;
      args.fetches = parts[0].cast<std::vector<output>>();
      auto feed_outputs = parts[1].cast<std::vector<output>>();
      auto feed_values = parts[2].cast<std::vector<py::array>>();
      for (std::size_t i = 0; i < feed_outputs.size() && i < feed_values.size(); ++i)
        args.feeds.emplace_back(feed_outputs[i], tensor_from_array(feed_values[i]));
      return args;
    } catch (py::error_already_set& e) {
      return python_failure("before_run", e.what());
    } catch (const std::exception& e) {
      return python_failure("before_run", e.what());
    }
  }

  status after_run(train::session_run_context& context, const std::vector<tensor>& values) override {
    py::gil_scoped_acquire gil;
    try {
      py::list arrays;
      for (auto& t : values)
        arrays.append(array_from_tensor(t));
      auto answer = call("after_run", arrays);
      if (py::isinstance<py::str>(answer))
        return python_failure("after_run", answer.cast<std::string>());
      if (answer.cast<bool>())
        context.request_stop();
      return {};
    } catch (py::error_already_set& e) {
      return python_failure("after_run", e.what());
    } catch (const std::exception& e) {
      return python_failure("after_run", e.what());
    }
  }

private:
  template <class... Args>
  py::object call(const char* method, Args&&... args) {
    return adapter_->object.attr(method)(std::forward<Args>(args)...);
  }

  /// begin, after_create_session, end: None is ok, a string the error.
  template <class Call>
  status simple(const char* what, Call body) {
    py::gil_scoped_acquire gil;
    try {
      py::object answer = body();
      if (py::isinstance<py::str>(answer))
        return python_failure(what, answer.cast<std::string>());
      return {};
    } catch (py::error_already_set& e) {
      return python_failure(what, e.what());
    } catch (const std::exception& e) {
      return python_failure(what, e.what());
    }
  }

  std::shared_ptr<gil_object> adapter_;
};

struct python_monitored_session {
  std::unique_ptr<train::monitored_session> open;
  /// The global step close() ended at (exact then), for global_step() after it.
  std::int64_t closed_at = 0;

  train::monitored_session& get() {
    if (!open)
      throw std::runtime_error("Attempted to use a closed MonitoredSession.");
    return *open;
  }
};

python_monitored_session
make_monitored_session(graph& g, const std::string& target, bool log_device_placement,
                       bool allow_soft_placement, int inter_op_threads, int intra_op_threads,
                       double timeout_seconds, double connect_timeout_seconds,
                       variable global_step, bool is_chief,
                       const std::string& checkpoint_dir, std::int64_t save_checkpoint_steps,
                       int keep_checkpoints, const std::string& summary_dir,
                       std::int64_t save_summaries_steps, int init_timeout_seconds,
                       std::shared_ptr<cluster_spec> cluster, std::vector<native_hook*> hooks) {
  train::monitored_session_options o;
  o.session.target = target;
  o.session.log_device_placement = log_device_placement;
  o.session.allow_soft_placement = allow_soft_placement;
  o.session.inter_op_parallelism_threads = inter_op_threads;
  o.session.intra_op_parallelism_threads = intra_op_threads;
  o.session.timeout_seconds = timeout_seconds;
  o.session.connect_timeout_seconds = connect_timeout_seconds;
  o.global_step = global_step;
  o.is_chief = is_chief;
  o.checkpoint_dir = checkpoint_dir;
  o.save_checkpoint_steps = save_checkpoint_steps;
  o.keep_checkpoints = keep_checkpoints;
  o.summary_dir = summary_dir;
  o.save_summaries_steps = save_summaries_steps;
  o.init_timeout_seconds = init_timeout_seconds;
  o.init_timeout_source = "MonitoredTrainingSession's max_wait_secs";
  o.cluster = cluster;
  for (auto* h : hooks) {
    if (!h || !h->hook)
      throw py::value_error("a hook was given to a MonitoredSession before; make a new one");
  }
  for (auto* h : hooks)
    o.hooks.push_back(std::move(h->hook));
  std::optional<result<std::unique_ptr<train::monitored_session>>> made;
  {
    py::gil_scoped_release release;
    made.emplace(train::monitored_session::create(g, std::move(o)));
  }
  return python_monitored_session{value_or_raise(std::move(*made))};
}

py::list run_monitored(python_monitored_session& self, const std::vector<output>& fetches,
                       const std::vector<output>& feed_outputs,
                       const std::vector<py::array>& feed_values, const std::vector<output>& targets) {
  return run_fed_step(self.get(), fetches, feed_outputs, feed_values, targets);
}

void close_monitored(python_monitored_session& self) {
  if (!self.open)
    return;
  status closed;
  {
    py::gil_scoped_release release;
    closed = self.open->close();
    self.closed_at = self.open->global_step();
    self.open.reset();
  }
  check(closed);
}

void bind_hooks(py::module_& m) {
  using namespace pybind11::literals;
  py::class_<native_hook>(m, "NativeHook")
    .def_property_readonly("used", [](const native_hook& h) { return !h.hook; });
  m.def("stop_at_step_hook", [](output global_step, std::int64_t last_step) {
    return native_hook{train::stop_at_step_hook(global_step, last_step)};
  }, "global_step"_a, "last_step"_a);
  m.def("nan_loss_hook", [](output loss, output global_step) {
    return native_hook{train::nan_loss_hook(loss, global_step)};
  }, "loss"_a, "global_step"_a);
  m.def("logging_hook", [](std::vector<output> tensors, std::int64_t every_n, py::object log) {
    if (every_n < 1)
      throw py::value_error("a logging hook logs every n >= 1 steps, not " + std::to_string(every_n));
    auto callback = std::make_shared<gil_object>(std::move(log));
    // The hook calls back on the stepping thread, with the GIL released: take it, and keep a
    // Python exception from leaving (the log is not worth ending training for; it is printed).
    return native_hook{train::logging_hook(
      std::move(tensors), every_n, [callback](std::int64_t step, const std::vector<tensor>& values) {
        py::gil_scoped_acquire gil;
        try {
          py::list arrays;
          for (auto& t : values)
            arrays.append(array_from_tensor(t));
          callback->object(step, arrays);
        } catch (py::error_already_set& e) {
          e.discard_as_unraisable("actorflow LoggingTensorHook");
        } catch (const std::exception& e) {
          PyErr_WarnEx(PyExc_RuntimeWarning, e.what(), 1);
        }
      })};
  }, "tensors"_a, "every_n"_a, "log"_a);
  m.def("python_hook", [](py::object adapter) {
    return native_hook{std::make_unique<python_hook>(std::move(adapter))};
  }, "adapter"_a);
}

void bind_monitored_session(py::module_& m) {
  using namespace pybind11::literals;
  py::class_<python_monitored_session>(m, "MonitoredSession")
    .def(py::init(&make_monitored_session), "graph"_a, "target"_a, "log_device_placement"_a,
         "allow_soft_placement"_a, "inter_op_parallelism_threads"_a,
         "intra_op_parallelism_threads"_a, "timeout_seconds"_a, "connect_timeout_seconds"_a,
         "global_step"_a, "is_chief"_a,
         "checkpoint_dir"_a, "save_checkpoint_steps"_a, "keep_checkpoints"_a, "summary_dir"_a,
         "save_summaries_steps"_a, "init_timeout_seconds"_a, "cluster"_a, "hooks"_a,
         py::keep_alive<1, 2>())
    .def("run", &run_monitored, "fetches"_a, "feed_outputs"_a, "feed_values"_a, "targets"_a)
    .def("should_stop", [](python_monitored_session& s) { return s.get().should_stop(); })
    .def("global_step", [](python_monitored_session& s) {
      return s.open ? s.open->global_step() : s.closed_at;
    })
    .def("close", &close_monitored)
    .def_property_readonly("closed", [](const python_monitored_session& s) { return !s.open; });
}

/// The saver and the directory of checkpoints it writes: a checkpoint_manager made per call,
/// as a Python Saver may save into several directories.
void bind_saver(py::module_& m) {
  using namespace pybind11::literals;
  py::class_<saver>(m, "Saver")
    .def(py::init([](graph& g, std::vector<variable> vars) {
      auto made = std::make_unique<saver>(g, std::move(vars));
      check(made->status());
      return made;
    }), "graph"_a, "variables"_a, py::keep_alive<1, 2>())
    .def("save", [](saver& self, python_session& s, const std::string& directory, int keep,
                    std::int64_t step) {
      auto& open = s.get();
      checkpoint_manager manager{directory, keep};
      status saved;
      {
        py::gil_scoped_release release;
        saved = self.save(open, manager, step);
      }
      check(saved);
      return manager.path_for_step(step);
    }, "session"_a, "directory"_a, "keep"_a, "step"_a)
    .def("restore", [](saver& self, python_session& s, const std::string& path) {
      auto& open = s.get();
      status restored;
      {
        py::gil_scoped_release release;
        restored = self.restore(open, path);
      }
      check(restored);
    }, "session"_a, "path"_a);
  m.def("latest_checkpoint", [](const std::string& directory) -> std::optional<std::string> {
    return checkpoint_manager{directory}.latest();
  }, "directory"_a);
  m.def("checkpoint_paths", [](const std::string& directory) {
    return checkpoint_manager{directory}.checkpoints();
  }, "directory"_a);
}

/// The C++ optimizer keeps a reference to the wrapped one: keep_alive holds the Python object.
void bind_sync_replicas(py::module_& m) {
  using namespace pybind11::literals;
  py::class_<train::sync_replicas_optimizer, optimizer>(m, "SyncReplicasOptimizer")
    .def(py::init([](optimizer& wrapped, variable global_step, int replicas_to_aggregate,
                     int total_num_replicas) {
      if (replicas_to_aggregate < 1 || total_num_replicas < replicas_to_aggregate)
        throw py::value_error("SyncReplicasOptimizer needs 1 <= replicas_to_aggregate (" +
                              std::to_string(replicas_to_aggregate) + ") <= total_num_replicas (" +
                              std::to_string(total_num_replicas) + ")");
      train::sync_replicas_settings settings;
      settings.replicas_to_aggregate = replicas_to_aggregate;
      settings.total_num_replicas = total_num_replicas;
      return std::make_unique<train::sync_replicas_optimizer>(wrapped, global_step, settings);
    }), "wrapped"_a, "global_step"_a, "replicas_to_aggregate"_a, "total_num_replicas"_a,
         py::keep_alive<1, 2>())
    .def("make_session_run_hook", [](const train::sync_replicas_optimizer& self, bool is_chief,
                                     std::shared_ptr<cluster_spec> cluster, int worker_task,
                                     const std::string& ps_job, std::optional<output> loss) {
      if (!cluster)
        throw py::value_error("the SyncReplicasOptimizer's hook needs the cluster");
      train::sync_replicas_hook_options options;
      options.cluster = cluster;
      options.worker_task = worker_task;
      options.ps_job = ps_job;
      if (loss)
        options.loss = *loss;
      return native_hook{self.make_session_run_hook(is_chief, std::move(options))};
    }, "is_chief"_a, "cluster"_a, "worker_task"_a, "ps_job"_a, "loss"_a);
}

} // namespace

void bind_monitored(py::module_& m) {
  bind_hooks(m);
  bind_monitored_session(m);
  bind_saver(m);
  bind_sync_replicas(m);
}

} // namespace actorflow::python

#pragma once
/// A between-graph worker for a model of its own (word2vec, wide-deep; the classifiers have
/// run_between_graph's loop): this task's server (its devices and master, placing over itself
/// and the ps tasks only) and a train::monitored_session on it, whose chief initialises (or
/// restores) and checkpoints while the others wait for the variables, as the classifiers'.
///   auto worker = between_graph_worker::start(o, cluster, job, task, g, global_step, progress);
///   auto run = (*worker)->steps();                     // run({loss}, feeds, {train}) ...
///   return (*worker)->end(score, throughput, progress); // the chief scores; the ps tasks told
#include "graph/replica_device_setter.hpp"
#include "train/run_common.hpp"

#include <functional>
#include <memory>
#include <string>

namespace actorflow {
class server;
}

namespace actorflow::train {
class monitored_session;
}

namespace actorflow::train_app {

class between_graph_worker {
public:
  /// Starts the task's server and the monitored session over `g`, counting `global_step`
  /// (check_worker_flags first).
  static result<std::unique_ptr<between_graph_worker>> start(const train_options& o,
                                                              const cluster_spec& cluster,
                                                              const std::string& job, int task,
                                                              graph& g,
                                                              const actorflow::variable& global_step,
                                                              progress_printer& progress);
  ~between_graph_worker();
  between_graph_worker(const between_graph_worker&) = delete;
  between_graph_worker& operator=(const between_graph_worker&) = delete;

  /// The ps tasks of the cluster (what the tables are sharded over).
  int ps_tasks() const { return ps_tasks_; }
  /// Steps of the monitored session (its hooks run, the global step counted).
  run_step_fn steps();
  /// The end of a run whose steps went well: "global step: N"; then the chief scores the shared
  /// model by `report` on the raw session (no hooks, no step counted; the others may still be
  /// training) and the others say "examples/s: N"; then finish(). The exit code.
  int end(const std::function<status(const run_step_fn&)>& report,
          const train::throughput_meter& throughput, progress_printer& progress);
  /// Closes the session (the chief's last checkpoint), then tells the ps tasks this worker is
  /// done, so that they stop once every worker is. Whether the session closed cleanly.
  status finish();

private:
  between_graph_worker() = default;
  std::unique_ptr<server> served_;
  std::unique_ptr<train::monitored_session> session_;
  std::string ps_job_;
  int ps_tasks_ = 0;
  bool chief_ = false;
  bool finished_ = false;
};

/// --job, --ps-job and --task name tasks of the cluster, and --sync's round (of `replicas`
/// gradients) fits the workers: a usage error naming the flag otherwise.
status check_worker_flags(const train_options& o, const cluster_spec& cluster,
                          const std::string& job, int task, int replicas);

/// The device placement of a between-graph worker's model: variables and tables round robin
/// over the ps tasks, the rest on `worker_device` (TF's replica_device_setter).
replica_device_setter_options worker_placement(const train_options& o, const cluster_spec& cluster,
                                               const std::string& worker_device);

} // namespace actorflow::train_app

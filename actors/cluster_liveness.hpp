#pragma once
/// Whether each task of a cluster answers, as the process's metrics see it:
/// actorflow_task_up{job,task} is 1 while the task answered its last probe (probe_task) and 0
/// once it did not. A thread probes every task in turn, one round per `interval`; what
/// actorflow-train and actorflow-master run beside --metrics-port.
///   cluster_liveness watch{sys, cluster, std::chrono::seconds(5)};   // until destroyed

#include "actors/cluster_spec.hpp"

#include <caf/fwd.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace actorflow {

class cluster_liveness {
public:
  /// Starts probing at once; each probe waits at most `probe_timeout_seconds`.
  cluster_liveness(caf::actor_system& sys, cluster_spec cluster,
                   std::chrono::milliseconds interval = std::chrono::seconds(5),
                   double probe_timeout_seconds = 2);
  /// The same from the process's default system (default_actor_system()), for plain code.
  explicit cluster_liveness(cluster_spec cluster);
  /// Stops the thread (a probe in flight ends within its timeout).
  ~cluster_liveness();
  cluster_liveness(const cluster_liveness&) = delete;
  cluster_liveness& operator=(const cluster_liveness&) = delete;

private:
  void run();

  caf::actor_system& system_;
  cluster_spec cluster_;
  std::chrono::milliseconds interval_;
  double probe_timeout_seconds_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace actorflow

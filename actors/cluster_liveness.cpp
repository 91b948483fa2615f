#include "actors/cluster_liveness.hpp"
#include "actors/session.hpp"

#include "actors/task_client.hpp"
#include "graph/metrics.hpp"

#include <string>
#include <vector>

namespace actorflow {

cluster_liveness::cluster_liveness(cluster_spec cluster)
  : cluster_liveness(default_actor_system(), std::move(cluster)) {}

cluster_liveness::cluster_liveness(caf::actor_system& sys, cluster_spec cluster,
                                   std::chrono::milliseconds interval, double probe_timeout_seconds)
  : system_(sys),
    cluster_(std::move(cluster)),
    interval_(interval),
    probe_timeout_seconds_(probe_timeout_seconds),
    thread_([this] { run(); }) {}

cluster_liveness::~cluster_liveness() {
  {
    std::lock_guard<std::mutex> lock{mutex_};
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void cluster_liveness::run() {
  // Each task's gauge, looked up once.
  struct watched {
    std::string job;
    int task;
    metric_gauge& up;
  };
  std::vector<watched> tasks;
  for (auto& job : cluster_.jobs())
    for (int task = 0; task < cluster_.num_tasks(job); ++task)
      tasks.push_back({job, task,
                       default_metrics().gauge(
                         "actorflow_task_up", "Whether a cluster task answered its last probe (1) or not (0).",
                         {{"job", job}, {"task", std::to_string(task)}})});
  for (;;) {
    for (auto& t : tasks) {
      {
        std::lock_guard<std::mutex> lock{mutex_};
        if (stopping_)
          return;
      }
      t.up.set(probe_task(system_, cluster_, t.job, t.task, probe_timeout_seconds_).ok() ? 1 : 0);
    }
    std::unique_lock<std::mutex> lock{mutex_};
    if (wake_.wait_for(lock, interval_, [this] { return stopping_; }))
      return;
  }
}

} // namespace actorflow

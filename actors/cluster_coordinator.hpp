#pragma once
/// TF2's ClusterCoordinator (ParameterServerStrategy; SPEC "Strategies") on a cluster of
/// actorflow-worker tasks: closures queued by schedule() run on whichever worker is free. A
/// closure whose worker is lost (killed, hung, cut off) runs again on another worker, and its
/// variable updates apply exactly once however often it ran (devices/update_fence.hpp).
///   cluster_coordinator coordinator{spec};
///   auto loss = coordinator.schedule([&](worker_context& w) {
///     return w.run(g, {mean_loss}, feeds, {train});   // g's unpinned nodes run on w's task
///   });
///   AF_RETURN_IF_ERROR(coordinator.join());             // all ran, or the first closure error
///   auto value = loss.fetch();                          // result<std::vector<tensor>>
/// Closures run on one thread per worker in this process, which acts as the master of every
/// step (as a TensorFlow client does): each worker's session places the nodes of the graph that
/// name no task on that worker, and variables where they are pinned (the ps tasks). A graph
/// must not change while closures run it.

#include "actors/cluster_spec.hpp"
#include "actors/session.hpp"
#include "graph/graph.hpp"
#include "graph/status.hpp"

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace caf {
class actor_system;
}

namespace actorflow {

struct coordinator_options {
  /// The job whose tasks run closures.
  std::string worker_job = "worker";
  /// Every worker session's options (timeout_seconds bounds each step and each probe, but the
  /// probe of a worker whose step just failed: probe_after_step_seconds; threads); the
  /// coordinator sets cluster, default_task and device_filters.
  session_options session;
  /// How long a lost worker waits between probes for its return.
  double probe_interval_seconds = 0.5;
  /// A worker lost for longer is given up; once every worker is, the closures left fail with
  /// an error naming them (nothing waits without bound). 0: wait for lost workers forever.
  double worker_return_seconds = 300;
  /// A closure whose attempt failed by a timeout or a lost connection although every task
  /// answers a probe after (a link broke and came back) is tried again this often.
  int transient_retries = 3;
};

/// What a closure attempt sees of the worker it runs on.
class worker_context {
public:
  /// The worker's task index in the worker job, and its name ("/job:worker/replica:0/task:1").
  int index() const;
  const std::string& task() const;
  /// The closure's id (from 1, in scheduling order) and how many attempts came before this one.
  std::int64_t closure_id() const { return fence_.closure; }
  int attempt() const { return attempt_; }

  /// Runs one step of `g` on this worker (session::run): nodes that name no task run here.
  /// The step's variable updates apply once per closure, whichever attempt gets there first.
  result<std::vector<tensor>> run(graph& g, const std::vector<output>& fetches,
                                  const feed_list& feeds = {},
                                  const std::vector<output>& targets = {});
  status run_targets(graph& g, const std::vector<output>& targets, const feed_list& feeds = {});

private:
  friend class cluster_coordinator;
  struct worker;
  worker_context(worker& w, update_fence fence, int attempt, std::function<std::int64_t()> settled)
    : worker_(w), fence_(fence), attempt_(attempt), settled_below_(std::move(settled)) {}

  worker& worker_;
  update_fence fence_;
  int attempt_ = 0;
  std::function<std::int64_t()> settled_below_;
};

namespace detail {

template <class T>
struct remote_state {
  std::mutex mutex;
  std::condition_variable changed;
  std::optional<result<T>> outcome;

  void publish(result<T> r) {
    {
      std::lock_guard<std::mutex> guard{mutex};
      outcome.emplace(std::move(r));
    }
    changed.notify_all();
  }
};

/// A scheduled closure with its type erased: `attempt` runs it once on a worker (keeping its
/// value), `finish` publishes the value of the attempt that succeeded, or the error.
struct queued_closure {
  std::function<status(worker_context&)> attempt;
  std::function<void(const status&)> finish;
};

template <class R>
struct closure_value;
template <class T>
struct closure_value<result<T>> {
  using type = T;
};

} // namespace detail

/// The value a scheduled closure will have (TF's RemoteValue).
template <class T>
class remote_value {
public:
  remote_value() = default;
  /// Waits for the closure: the value of its attempt that succeeded, or why it failed.
  result<T> fetch() const {
    std::unique_lock<std::mutex> lock{state_->mutex};
    state_->changed.wait(lock, [this] { return state_->outcome.has_value(); });
    return *state_->outcome;
  }
  bool ready() const {
    std::lock_guard<std::mutex> guard{state_->mutex};
    return state_->outcome.has_value();
  }

private:
  friend class cluster_coordinator;
  explicit remote_value(std::shared_ptr<detail::remote_state<T>> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::remote_state<T>> state_;
};

/// One value per worker (TF's PerWorkerValues): a closure uses the one of the worker it runs
/// on, e.g. each worker's shard of the dataset. Only that worker's closures touch it.
template <class T>
class per_worker {
public:
  T& on(const worker_context& w) { return at(w.index()); }
  /// Worker `index`'s value; read it only while no closure runs (after join()).
  T& at(int index) { return *values_.at(static_cast<std::size_t>(index)); }
  std::size_t size() const { return values_.size(); }

private:
  friend class cluster_coordinator;
  std::vector<std::shared_ptr<T>> values_;
};

/// How a coordinator's closures went.
struct coordinator_stats {
  std::int64_t scheduled = 0;
  std::int64_t succeeded = 0;
  std::int64_t failed = 0;
  /// Attempts that ended because their worker was lost, each followed by another attempt.
  std::int64_t rescheduled = 0;
  /// Times a worker was found lost.
  std::int64_t workers_lost = 0;
  /// Attempts tried again after failing in passing (transient_retries).
  std::int64_t retried = 0;
};

class cluster_coordinator {
public:
  /// Coordinates the tasks of options.worker_job in `spec`, from the process-wide actor system.
  explicit cluster_coordinator(const cluster_spec& spec, coordinator_options options = {});
  cluster_coordinator(caf::actor_system& sys, const cluster_spec& spec,
                      coordinator_options options = {});
  /// Stops after the attempts running now; closures still queued fail with "cancelled".
  ~cluster_coordinator();
  cluster_coordinator(const cluster_coordinator&) = delete;
  cluster_coordinator& operator=(const cluster_coordinator&) = delete;

  /// Queues `fn` (result<T>(worker_context&)); it runs once on a free worker, again on another
  /// when its worker is lost, and its error (any other failure) is its remote value's and
  /// join()'s.
  template <class F>
  auto schedule(F fn) -> remote_value<
    typename detail::closure_value<std::invoke_result_t<F&, worker_context&>>::type> {
    using T = typename detail::closure_value<std::invoke_result_t<F&, worker_context&>>::type;
    auto state = std::make_shared<detail::remote_state<T>>();
    auto value = std::make_shared<std::optional<T>>();
    detail::queued_closure c;
    c.attempt = [fn = std::move(fn), value](worker_context& w) mutable -> status {
      result<T> r = fn(w);
      if (!r)
        return r.error();
      value->emplace(std::move(*r));
      return {};
    };
    c.finish = [state, value](const status& outcome) {
      if (outcome.ok())
        state->publish(std::move(**value));
      else
        state->publish(outcome);
    };
    enqueue(std::move(c));
    return remote_value<T>{state};
  }

  /// Waits until every closure scheduled so far has finished. The first error of a closure
  /// since the last join (naming the closure and the task at fault), or ok.
  status join();
  /// Waits until at most `open` of the closures scheduled so far are queued or running, or one
  /// has failed since the last join: ok, or that failure (join() still reports it). A caller
  /// that keeps a bounded number of closures in flight schedules more after each wait, so a
  /// closure held up (its worker frozen until the step bound) holds up no other.
  status wait_until_open_at_most(std::size_t open);
  /// Whether every closure scheduled so far has finished.
  bool done() const;

  /// `make(worker_index)` for every worker.
  template <class F>
  auto create_per_worker(F make) -> per_worker<std::invoke_result_t<F&, int>> {
    per_worker<std::invoke_result_t<F&, int>> out;
    for (int i = 0; i < num_workers(); ++i)
      out.values_.push_back(std::make_shared<std::invoke_result_t<F&, int>>(make(i)));
    return out;
  }

  int num_workers() const;
  /// Workers not lost now (a lost one counts again once it answers a probe).
  int available_workers() const;
  coordinator_stats stats() const;

private:
  void enqueue(detail::queued_closure c);

  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace actorflow

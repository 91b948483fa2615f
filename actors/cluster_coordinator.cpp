#include "actors/cluster_coordinator.hpp"

#include "actors/logging.hpp"
#include "actors/protocols/master.hpp"
#include "actors/task_client.hpp"
#include "graph/device_name.hpp"
#include "graph/rendezvous_key.hpp"

#include <caf/actor_system.hpp>

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <set>
#include <thread>

namespace actorflow {

/// One worker task: its sessions (one per graph it ran, on a copy of the graph) and whether it
/// is lost. Only its own thread touches the sessions.
struct worker_context::worker {
  caf::actor_system& system;
  int index = 0;
  std::string task;
  session_options options;

  struct placed_graph {
    /// Nodes of the user's graph when copied: a graph that grew is copied again.
    std::size_t nodes = 0;
    std::shared_ptr<graph> copy;
    std::unique_ptr<session> s;
  };
  std::map<const graph*, placed_graph> graphs;

  /// The copy of `g` this worker runs (its own placements, none pinned by another worker's).
  result<placed_graph*> placed(graph& g) {
    auto& entry = graphs[&g];
    if (entry.copy && entry.nodes == g.size())
      return &entry;
    auto def = protocol::make_graph_def(g);
    if (!def)
      return def.error();
    auto& copy = *def->definition;
    for (std::size_t id = 0; id < copy.size(); ++id)
      copy.at(static_cast<int>(id)).assigned_device.clear();
    entry.s.reset();
    entry.copy = std::move(def->definition);
    entry.nodes = g.size();
    entry.s = std::make_unique<session>(system, *entry.copy, options);
    return &entry;
  }

  /// Sessions opened before the worker was lost name its old incarnation's devices.
  void forget_sessions() { graphs.clear(); }
};

int worker_context::index() const { return worker_.index; }

const std::string& worker_context::task() const { return worker_.task; }

namespace {

/// `o` on the copy instead of the user's graph (node ids are the same).
output on_copy(const output& o, graph& copy) { return output{&copy, o.node_id, o.index}; }

} // namespace

result<std::vector<tensor>> worker_context::run(graph& g, const std::vector<output>& fetches,
                                                const feed_list& feeds,
                                                const std::vector<output>& targets) {
  auto placed = worker_.placed(g);
  if (!placed)
    return placed.error();
  auto& copy = *(*placed)->copy;
  std::vector<output> copy_fetches, copy_targets;
  feed_list copy_feeds;
  for (auto& f : fetches)
    copy_fetches.push_back(f.owner == &g ? on_copy(f, copy) : f);
  for (auto& t : targets)
    copy_targets.push_back(t.owner == &g ? on_copy(t, copy) : t);
  for (auto& [o, value] : feeds)
    copy_feeds.emplace_back(o.owner == &g ? on_copy(o, copy) : o, value);
  run_options per_step;
  // A closure's updates apply only once its master commits them: an attempt given up (its ps
  // frozen past the step bound, its worker lost) is aborted, never applied when the ps wakes,
  // so the global step counts exactly the closures that succeeded. A repeat of an attempt
  // that did commit is refused by the fence.
  per_step.all_or_nothing = true;
  per_step.fence = fence_;
  per_step.fence.settled_below = settled_below_();
  ++fence_.run;
  return (*placed)->s->run_with(per_step, copy_fetches, copy_feeds, copy_targets);
}

status worker_context::run_targets(graph& g, const std::vector<output>& targets,
                                   const feed_list& feeds) {
  auto r = run(g, {}, feeds, targets);
  return r ? status{} : r.error();
}

struct cluster_coordinator::impl {
  impl(caf::actor_system& sys, const cluster_spec& spec, coordinator_options opts)
    : system(sys), cluster(std::make_shared<cluster_spec>(spec)), options(std::move(opts)) {
    owner = new_incarnation(); // never 0: 0 means unfenced
    probe_timeout = options.session.timeout_seconds > 0 ? options.session.timeout_seconds : 10.0;
    worker_probe_timeout = probe_after_step_seconds(probe_timeout);
    int n = cluster->num_tasks(options.worker_job);
    for (int i = 0; i < n; ++i) {
      auto w = std::make_unique<worker_context::worker>(worker_context::worker{sys, i, {}, {}, {}});
      w->task = task_name(options.worker_job, i);
      w->options = options.session;
      // A task that is not there is the coordinator's to handle (probes, rescheduling, waiting
      // for a lost worker): its sessions fail at once instead of waiting for it.
      w->options.connect_timeout_seconds = 0;
      w->options.cluster = cluster;
      w->options.default_task = w->task;
      // The ps tasks and this worker only: a lost worker must not hold up the others' steps.
      for (auto& job : cluster->jobs())
        if (job != options.worker_job)
          w->options.device_filters.push_back("/job:" + job);
      w->options.device_filters.push_back("/job:" + options.worker_job + "/task:" +
                                          std::to_string(i));
      workers.push_back(std::move(w));
    }
    for (auto& w : workers)
      threads.emplace_back([this, w = w.get()] { serve(*w); });
  }

  ~impl() {
    {
      std::lock_guard<std::mutex> guard{mutex};
      stopping = true;
    }
    changed.notify_all();
    for (auto& t : threads)
      t.join();
    for (auto& q : queue) {
      q.closure.finish(make_error(errc::aborted, "closure " + std::to_string(q.id) +
                                                   " was cancelled: its coordinator stopped"));
    }
  }

  struct entry {
    std::int64_t id = 0;
    int attempts = 0;
    /// Attempts that failed in passing (every task answered after).
    int transient_failures = 0;
    detail::queued_closure closure;
  };

  /// Every closure before the oldest one not finished has finished.
  std::int64_t settled_below() {
    std::lock_guard<std::mutex> guard{mutex};
    return open.empty() ? next_id : *open.begin();
  }

  /// What a failed attempt says about where to run the closure next.
  enum class verdict { closure_failed, worker_lost, retry };

  /// A failure that a lost connection or a timeout can cause is the worker's when the worker
  /// does not answer a probe; when it and every other task answer, it was passing (a link that
  /// broke and came back) and the closure is tried again, at most transient_retries times.
  /// Anything else (a bad feed, a lost ps, a missing kernel) is the closure's.
  verdict judge(const worker_context::worker& w, const status& failure, int transient_failures) {
    if (!connection_like(failure))
      return verdict::closure_failed;
    // The worker had the whole step bound already: a live one answers a probe at once. A full
    // bound more kept a frozen worker's closure from the others until it woke (or twice the
    // bound); taking a slow live worker for lost costs one closure run again (counted once)
    // and a probe_interval before it serves again.
    if (!probe_task(system, *cluster, options.worker_job, w.index, worker_probe_timeout).ok())
      return verdict::worker_lost;
    if (transient_failures >= options.transient_retries)
      return verdict::closure_failed;
    for (auto& job : cluster->jobs())
      if (job != options.worker_job && !probe_job(system, *cluster, job, probe_timeout).ok())
        return verdict::closure_failed;
    return verdict::retry;
  }

  /// Waits until the lost worker `w` answers again; false when the coordinator stops or the
  /// worker was given up (worker_return_seconds).
  bool wait_for_return(worker_context::worker& w) {
    auto interval = std::chrono::duration<double>(options.probe_interval_seconds);
    auto lost_at = std::chrono::steady_clock::now();
    for (;;) {
      {
        std::unique_lock<std::mutex> lock{mutex};
        changed.wait_for(lock, interval, [this] { return stopping; });
        if (stopping)
          return false;
      }
      if (options.worker_return_seconds > 0 &&
          std::chrono::steady_clock::now() - lost_at >
            std::chrono::duration<double>(options.worker_return_seconds)) {
        give_up(w);
        return false;
      }
      if (probe_task(system, *cluster, options.worker_job, w.index, probe_timeout).ok()) {
        log_verbose("coordinator: worker " + w.task + " is back");
        w.forget_sessions();
        return true;
      }
    }
  }

  void serve(worker_context::worker& w) {
    for (;;) {
      entry job;
      {
        std::unique_lock<std::mutex> lock{mutex};
        changed.wait(lock, [this] { return stopping || !queue.empty(); });
        if (stopping)
          return;
        job = std::move(queue.front());
        queue.pop_front();
      }
      update_fence fence;
      fence.owner = owner;
      fence.closure = job.id;
      worker_context ctx{w, fence, job.attempts, [this] { return settled_below(); }};
      auto outcome = job.closure.attempt(ctx);
      ++job.attempts;
      auto next = outcome.ok() ? verdict::closure_failed : judge(w, outcome, job.transient_failures);
      if (next == verdict::retry) {
        log_verbose("coordinator: closure " + std::to_string(job.id) + " failed in passing on " +
                    w.task + " (" + outcome.to_string() + "); every task answers: tried again");
        ++job.transient_failures;
        {
          std::lock_guard<std::mutex> guard{mutex};
          ++counts.retried;
          queue.push_front(std::move(job));
        }
        changed.notify_all();
        w.forget_sessions();
        continue;
      }
      if (next == verdict::worker_lost) {
        log_verbose("coordinator: worker " + w.task + " lost during closure " +
                    std::to_string(job.id) + " (" + outcome.to_string() + "); rescheduled");
        {
          std::lock_guard<std::mutex> guard{mutex};
          ++counts.rescheduled;
          ++counts.workers_lost;
          ++lost_now;
          queue.push_front(std::move(job));
        }
        changed.notify_all();
        if (!wait_for_return(w))
          return;
        {
          std::lock_guard<std::mutex> guard{mutex};
          --lost_now;
        }
        continue;
      }
      // A failed step may leave plans that name a lost ps's devices: the next closure opens
      // fresh sessions over the cluster as it is then.
      if (!outcome.ok())
        w.forget_sessions();
      finish(job, outcome, &w);
    }
  }

  /// `w` serves no more closures; when it was the last worker, the queued closures fail.
  void give_up(const worker_context::worker& w) {
    std::deque<entry> orphans;
    {
      std::lock_guard<std::mutex> guard{mutex};
      given_up.push_back(w.task);
      if (given_up.size() < workers.size())
        return;
      orphans = std::move(queue);
      queue.clear();
    }
    for (auto& job : orphans)
      finish(job, no_workers_left(), nullptr);
  }

  /// Why closures cannot run: every worker was given up (guarded by mutex at the callers').
  status no_workers_left() const {
    std::string names;
    for (auto& task : given_up)
      names += (names.empty() ? "" : ", ") + task;
    if (workers.empty())
      return make_error(errc::failed_precondition,
                        "the cluster has no task of job '" + options.worker_job + "' to run closures on");
    return make_error(errc::unavailable, "every worker was lost for longer than " +
                                           std::to_string(options.worker_return_seconds) +
                                           " s: " + names);
  }

  void finish(entry& job, const status& outcome, const worker_context::worker* w) {
    auto failure = outcome.ok() || w == nullptr
                     ? outcome
                     : outcome.with_context("closure " + std::to_string(job.id) + " on " + w->task);
    job.closure.finish(failure);
    {
      std::lock_guard<std::mutex> guard{mutex};
      open.erase(job.id);
      if (failure.ok()) {
        ++counts.succeeded;
      } else {
        ++counts.failed;
        if (first_error.ok())
          first_error = failure;
      }
    }
    changed.notify_all();
  }

  caf::actor_system& system;
  std::shared_ptr<const cluster_spec> cluster;
  coordinator_options options;
  std::uint64_t owner = 0;
  double probe_timeout = 10;
  /// How long a worker whose closure failed has to answer before it counts as lost.
  double worker_probe_timeout = 2;
  std::vector<std::unique_ptr<worker_context::worker>> workers;
  std::vector<std::thread> threads;

  mutable std::mutex mutex;
  std::condition_variable changed;
  bool stopping = false;
  std::deque<entry> queue;
  /// Closures queued or running.
  std::set<std::int64_t> open;
  std::int64_t next_id = 1;
  status first_error;
  coordinator_stats counts;
  /// Workers lost now (given up ones included).
  int lost_now = 0;
  /// Tasks of the workers given up.
  std::vector<std::string> given_up;
};

cluster_coordinator::cluster_coordinator(const cluster_spec& spec, coordinator_options options)
  : cluster_coordinator(default_actor_system(), spec, std::move(options)) {}

cluster_coordinator::cluster_coordinator(caf::actor_system& sys, const cluster_spec& spec,
                                         coordinator_options options)
  : impl_(std::make_unique<impl>(sys, spec, std::move(options))) {}

cluster_coordinator::~cluster_coordinator() = default;

void cluster_coordinator::enqueue(detail::queued_closure c) {
  impl::entry job;
  status refused;
  {
    std::lock_guard<std::mutex> guard{impl_->mutex};
    job.id = impl_->next_id++;
    job.closure = std::move(c);
    impl_->open.insert(job.id);
    ++impl_->counts.scheduled;
    if (impl_->given_up.size() < impl_->workers.size())
      impl_->queue.push_back(std::move(job));
    else
      refused = impl_->no_workers_left();
  }
  if (!refused.ok())
    impl_->finish(job, refused, nullptr);
  impl_->changed.notify_all();
}

status cluster_coordinator::join() {
  std::unique_lock<std::mutex> lock{impl_->mutex};
  impl_->changed.wait(lock, [this] { return impl_->open.empty(); });
  auto error = impl_->first_error;
  impl_->first_error = {};
  return error;
}

status cluster_coordinator::wait_until_open_at_most(std::size_t open) {
  std::unique_lock<std::mutex> lock{impl_->mutex};
  impl_->changed.wait(lock, [&] { return impl_->open.size() <= open || !impl_->first_error.ok(); });
  return impl_->first_error;
}

bool cluster_coordinator::done() const {
  std::lock_guard<std::mutex> guard{impl_->mutex};
  return impl_->open.empty();
}

int cluster_coordinator::num_workers() const { return static_cast<int>(impl_->workers.size()); }

int cluster_coordinator::available_workers() const {
  std::lock_guard<std::mutex> guard{impl_->mutex};
  return num_workers() - impl_->lost_now;
}

coordinator_stats cluster_coordinator::stats() const {
  std::lock_guard<std::mutex> guard{impl_->mutex};
  return impl_->counts;
}

} // namespace actorflow

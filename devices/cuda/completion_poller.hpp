#pragma once
/// Completions of GPU work (TensorFlow's EventMgr): work on a stream is followed by an event;
/// a polling thread asks every pending event whether it has happened, and callbacks of those
/// that have run on a callback thread of their own, in the order they were registered.
///   completion_poller completions{"GPU:0"};
///   completions.when_done([event] { return query(event); },      // on the polling thread
///                         [](status s) { /* on the callback thread */ });
/// The poller knows no CUDA: a probe is any function that says whether its work finished, so
/// unit tests drive it with plain flags. Probes run on the polling thread under its lock and
/// must be quick (cudaEventQuery is); callbacks run on the callback thread with no lock held,
/// and may call CUDA (it is an ordinary thread, not a cudaLaunchHostFunc callback) and
/// register further completions.

#include "graph/status.hpp"

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace actorflow::cuda {

class completion_poller {
public:
  /// What a probe found: not yet, done, or failed (the status says why, e.g. a kernel that
  /// faulted earlier on the stream).
  struct probe_result {
    bool finished = false;
    status error;

    static probe_result pending() { return {}; }
    static probe_result done() { return {true, {}}; }
    static probe_result failed(status why) { return {true, std::move(why)}; }
  };
  /// Asks whether a piece of work has finished; called on the polling thread until it says so,
  /// then destroyed there (the place to hand an event back to its pool).
  using probe = std::function<probe_result()>;
  /// Runs once, on the callback thread, with the probe's error or ok.
  using callback = std::function<void(status)>;

  /// Starts the two threads; `name` names them ("GPU:0 poll", "GPU:0 done"). `interval` is the
  /// pause between polls while anything is pending (TensorFlow's EventMgr polls every 10 us to
  /// 1 ms): short enough to add little latency to a step, long enough not to take a core.
  explicit completion_poller(std::string name,
                             std::chrono::microseconds interval = std::chrono::microseconds{50})
    : name_(std::move(name)), interval_(interval), poll_thread_([this] { poll(); }),
      callback_thread_([this] { serve(); }) {}

  /// Waits until every pending probe has finished and every callback has run, then joins.
  ~completion_poller() {
    {
      std::lock_guard<std::mutex> guard{poll_mutex_};
      stopping_ = true;
    }
    pending_cv_.notify_one();
    poll_thread_.join();
    {
      std::lock_guard<std::mutex> guard{ready_mutex_};
      ready_stopping_ = true;
    }
    ready_cv_.notify_one();
    callback_thread_.join();
  }

  completion_poller(const completion_poller&) = delete;
  completion_poller& operator=(const completion_poller&) = delete;

  /// Runs `done` on the callback thread once `finished` says the work has finished. Thread-safe.
  void when_done(probe finished, callback done) {
    {
      std::lock_guard<std::mutex> guard{poll_mutex_};
      pending_.push_back({std::move(finished), std::move(done)});
    }
    pending_cv_.notify_one();
  }

  /// Runs `done` (with ok) on the callback thread as soon as it gets to it: for completions
  /// that have nothing left to wait for but must not run inside their caller. Thread-safe.
  void post(callback done) { post_ready({{std::move(done), status{}}}); }

  /// Probes not yet finished.
  std::size_t pending() const {
    std::lock_guard<std::mutex> guard{poll_mutex_};
    return pending_.size();
  }

private:
  struct waiting {
    probe finished;
    callback done;
  };
  struct ready {
    callback done;
    status result;
  };

  static void name_this_thread(const std::string& name) {
    // Linux limits thread names to 15 characters.
    pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  }

  void post_ready(std::vector<ready> batch) {
    {
      std::lock_guard<std::mutex> guard{ready_mutex_};
      for (auto& r : batch)
        ready_.push_back(std::move(r));
    }
    ready_cv_.notify_one();
  }

  void poll() {
    name_this_thread(name_ + " poll");
    std::unique_lock<std::mutex> lock{poll_mutex_};
    for (;;) {
      pending_cv_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
      if (pending_.empty())
        return; // stopping, and nothing is left to wait for
      std::vector<ready> finished;
      // Every pending probe, not only the oldest: work on different streams finishes in any
      // order. Registration order is kept among those that finished.
      for (auto i = pending_.begin(); i != pending_.end();) {
        auto r = i->finished();
        if (!r.finished) {
          ++i;
          continue;
        }
        finished.push_back({std::move(i->done), std::move(r.error)});
        i = pending_.erase(i);
      }
      if (!finished.empty()) {
        lock.unlock();
        post_ready(std::move(finished));
        lock.lock();
      }
      if (!pending_.empty())
        pending_cv_.wait_for(lock, interval_);
    }
  }

  void serve() {
    name_this_thread(name_ + " done");
    for (;;) {
      ready r;
      {
        std::unique_lock<std::mutex> lock{ready_mutex_};
        ready_cv_.wait(lock, [this] { return ready_stopping_ || !ready_.empty(); });
        if (ready_.empty())
          return;
        r = std::move(ready_.front());
        ready_.pop_front();
      }
      r.done(std::move(r.result));
    }
  }

  std::string name_;
  std::chrono::microseconds interval_;

  mutable std::mutex poll_mutex_;
  std::condition_variable pending_cv_;
  std::deque<waiting> pending_;
  bool stopping_ = false;

  std::mutex ready_mutex_;
  std::condition_variable ready_cv_;
  std::deque<ready> ready_;
  bool ready_stopping_ = false;

  // Last: they start in the constructor and use everything above.
  std::thread poll_thread_;
  std::thread callback_thread_;
};

} // namespace actorflow::cuda

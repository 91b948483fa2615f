#pragma once
/// Streams served by a host thread: the test device's stand-in for CUDA streams, with the same
/// contract, so that machines without a GPU exercise the ordering a GPU needs.
///   host_stream compute{"TEST:0 compute"}, to_host{"TEST:0 d2h"};
///   compute.enqueue([&] { run_kernel(); });
///   to_host.wait_for(compute.record());        // the copy starts after the kernel
///   to_host.enqueue([&] { copy(); });
///   callbacks.when_done(to_host.record(), [] { /* on the callback thread */ });
/// Work on one stream runs in enqueue order, one item at a time, on the stream's thread. An
/// event fires once everything enqueued before it was recorded has run. Callbacks never run on
/// a stream's thread (CUDA forbids stream calls from its host callbacks; TensorFlow's EventMgr
/// runs them on a thread of its own): they run on a stream_callbacks thread.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace actorflow {

/// A point in a stream's work; fires once (and stays fired).
class stream_event {
public:
  bool fired() const;
  /// Blocks the calling thread until the event fired (streams use it; never an actor).
  void wait() const;
  /// Runs `then` on the calling thread once the event fired, or at once if it has.
  void on_fire(std::function<void()> then);
  void fire();

private:
  mutable std::mutex mutex_;
  mutable std::condition_variable fired_cv_;
  bool fired_ = false;
  std::vector<std::function<void()>> waiting_;
};

class host_stream {
public:
  /// Starts the stream's thread; `name` appears in thread listings and messages.
  explicit host_stream(std::string name);
  /// Runs what is queued, then joins the thread.
  ~host_stream();
  host_stream(const host_stream&) = delete;
  host_stream& operator=(const host_stream&) = delete;

  /// Queues `work` behind everything enqueued so far. Thread-safe.
  void enqueue(std::function<void()> work);
  /// An event that fires when what was enqueued so far has run.
  std::shared_ptr<stream_event> record();
  /// Work enqueued from now on starts only after `event` fired (cross-stream ordering).
  void wait_for(std::shared_ptr<stream_event> event);
  /// Whether the calling thread is this stream's thread.
  bool on_stream_thread() const { return std::this_thread::get_id() == thread_.get_id(); }
  const std::string& name() const { return name_; }
  /// Items run so far (tests check which stream did the work).
  std::uint64_t items_run() const;

private:
  void serve();

  std::string name_;
  mutable std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<std::function<void()>> queue_;
  std::uint64_t items_run_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

/// Runs completion callbacks on a thread of its own once their events fire. Destroy the
/// streams whose events it waits for first: their last events then fire before it stops.
class stream_callbacks {
public:
  explicit stream_callbacks(std::string name);
  /// Runs the callbacks already posted, then joins.
  ~stream_callbacks();
  stream_callbacks(const stream_callbacks&) = delete;
  stream_callbacks& operator=(const stream_callbacks&) = delete;

  /// Runs `callback` on the callback thread after `event` fired.
  void when_done(const std::shared_ptr<stream_event>& event, std::function<void()> callback);

private:
  void post(std::function<void()> callback);
  void serve();

  std::string name_;
  std::mutex mutex_;
  std::condition_variable posted_;
  std::deque<std::function<void()>> ready_;
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace actorflow

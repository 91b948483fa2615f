#pragma once
/// A fixed-size pool of worker threads.
///   thread_pool pool{"intra_op", 2};
///   pool.schedule([] { ... });
///   pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end) { ... });  // blocks
/// Threads start in the constructor and are joined in the destructor (after queued work ran).

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

class thread_pool {
public:
  /// `num_threads` of 0 means one per hardware thread. When the system cannot start them all,
  /// throws std::system_error naming the pool and the thread (and leaves none running).
  thread_pool(std::string name, int num_threads);
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int num_threads() const { return static_cast<int>(threads_.size()); }
  const std::string& name() const { return name_; }

  /// Runs `task` on some pool thread, later. Thread-safe.
  void schedule(std::function<void()> task);

  /// Splits [0, n) into at most num_threads() + 1 contiguous blocks of at least `min_block`
  /// items, runs them on the pool and on the calling thread, and returns when all are done.
  /// Small ranges run inline. Safe to call from a pool thread (the caller helps, so nested
  /// calls cannot deadlock).
  void parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn,
                    std::int64_t min_block = 1);

  /// Whether the calling thread belongs to this pool.
  bool on_pool_thread() const;

private:
  /// Stops the workers and joins them (detaching the calling thread's own).
  void stop_and_join();
  /// The queue outlives the pool object while a worker still runs: the last owner of a pool
  /// may release it from a task on one of the pool's own threads.
  struct work_queue {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<std::function<void()>> tasks;
    bool stopping = false;
  };

  static void worker_loop(std::shared_ptr<work_queue> queue, const thread_pool* owner);
  bool run_one_queued();

  std::string name_;
  std::vector<std::thread> threads_;
  std::shared_ptr<work_queue> queue_ = std::make_shared<work_queue>();
};

/// Effective thread count for a session option value: 0 means the hardware's.
int resolve_thread_count(int requested);

} // namespace actorflow

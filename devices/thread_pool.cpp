#include "devices/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <system_error>

namespace actorflow {

namespace {
thread_local const thread_pool* current_pool = nullptr;
} // namespace

int resolve_thread_count(int requested) {
  if (requested > 0)
    return requested;
  auto hw = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, hw);
}

thread_pool::thread_pool(std::string name, int num_threads) : name_(std::move(name)) {
  auto n = resolve_thread_count(num_threads);
  threads_.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    try {
      threads_.emplace_back(worker_loop, queue_, this);
    } catch (const std::system_error& e) {
      // Joins the threads already running (a joinable thread destroyed would terminate the
      // process), then says which pool could not start and how far it got.
      stop_and_join();
      throw std::system_error(e.code(), "cannot start thread " + std::to_string(i + 1) + " of " +
                                          std::to_string(n) + " of thread pool '" + name_ + "'");
    }
  }
}

thread_pool::~thread_pool() { stop_and_join(); }

void thread_pool::stop_and_join() {
  {
    std::lock_guard<std::mutex> guard{queue_->mutex};
    queue_->stopping = true;
  }
  queue_->ready.notify_all();
  for (auto& t : threads_) {
    // Destroyed from one of its own tasks: that thread finishes on its own, holding the queue.
    if (t.get_id() == std::this_thread::get_id())
      t.detach();
    else
      t.join();
  }
}

void thread_pool::schedule(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> guard{queue_->mutex};
    queue_->tasks.push_back(std::move(task));
  }
  queue_->ready.notify_one();
}

bool thread_pool::on_pool_thread() const { return current_pool == this; }

void thread_pool::worker_loop(std::shared_ptr<work_queue> queue, const thread_pool* owner) {
  current_pool = owner;
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock{queue->mutex};
      queue->ready.wait(lock, [&] { return queue->stopping || !queue->tasks.empty(); });
      if (queue->tasks.empty())
        return;
      task = std::move(queue->tasks.front());
      queue->tasks.pop_front();
    }
    task();
  }
}

bool thread_pool::run_one_queued() {
  std::function<void()> task;
  {
    std::lock_guard<std::mutex> guard{queue_->mutex};
    if (queue_->tasks.empty())
      return false;
    task = std::move(queue_->tasks.front());
    queue_->tasks.pop_front();
  }
  task();
  return true;
}

void thread_pool::parallel_for(std::int64_t n,
                               const std::function<void(std::int64_t, std::int64_t)>& fn,
                               std::int64_t min_block) {
  if (n <= 0)
    return;
  min_block = std::max<std::int64_t>(1, min_block);
  auto max_blocks = static_cast<std::int64_t>(threads_.size()) + 1;
  auto blocks = std::min(max_blocks, (n + min_block - 1) / min_block);
  if (blocks <= 1) {
    fn(0, n);
    return;
  }
  auto block_size = (n + blocks - 1) / blocks;
  blocks = (n + block_size - 1) / block_size;
  // Shared so that a worker finishing the last block may still touch it after the caller,
  // seeing zero, has returned.
  struct completion {
    std::atomic<std::int64_t> remaining;
    std::mutex mutex;
    std::condition_variable done;
  };
  auto sync = std::make_shared<completion>();
  sync->remaining.store(blocks - 1, std::memory_order_relaxed);
  for (std::int64_t b = 1; b < blocks; ++b) {
    auto begin = b * block_size;
    auto end = std::min(n, begin + block_size);
    schedule([&fn, sync, begin, end] {
      fn(begin, end);
      std::lock_guard<std::mutex> guard{sync->mutex};
      if (sync->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1)
        sync->done.notify_all();
    });
  }
  fn(0, std::min(n, block_size));
  // Help with queued work instead of sleeping: keeps nested parallel_for from deadlocking.
  while (sync->remaining.load(std::memory_order_acquire) > 0) {
    if (!run_one_queued()) {
      std::unique_lock<std::mutex> lock{sync->mutex};
      sync->done.wait_for(lock, std::chrono::microseconds(200), [&] {
        return sync->remaining.load(std::memory_order_acquire) == 0;
      });
    }
  }
}

} // namespace actorflow

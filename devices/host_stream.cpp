#include "devices/host_stream.hpp"

#include <pthread.h>

namespace actorflow {

namespace {

/// Linux limits thread names to 15 characters.
void name_this_thread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

} // namespace

// --- stream_event --------------------------------------------------------------------------

bool stream_event::fired() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return fired_;
}

void stream_event::wait() const {
  std::unique_lock<std::mutex> lock{mutex_};
  fired_cv_.wait(lock, [this] { return fired_; });
}

void stream_event::on_fire(std::function<void()> then) {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    if (!fired_) {
      waiting_.push_back(std::move(then));
      return;
    }
  }
  then();
}

void stream_event::fire() {
  std::vector<std::function<void()>> waiting;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    fired_ = true;
    waiting.swap(waiting_);
  }
  fired_cv_.notify_all();
  for (auto& then : waiting)
    then();
}

// --- host_stream ---------------------------------------------------------------------------

host_stream::host_stream(std::string name)
  : name_(std::move(name)), thread_([this] { serve(); }) {}

host_stream::~host_stream() {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    stopping_ = true;
  }
  queued_.notify_one();
  thread_.join();
}

void host_stream::enqueue(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    queue_.push_back(std::move(work));
  }
  queued_.notify_one();
}

std::shared_ptr<stream_event> host_stream::record() {
  auto event = std::make_shared<stream_event>();
  enqueue([event] { event->fire(); });
  return event;
}

void host_stream::wait_for(std::shared_ptr<stream_event> event) {
  enqueue([event = std::move(event)] { event->wait(); });
}

std::uint64_t host_stream::items_run() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return items_run_;
}

void host_stream::serve() {
  name_this_thread(name_);
  for (;;) {
    std::function<void()> work;
    {
      std::unique_lock<std::mutex> lock{mutex_};
      queued_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty())
        return; // stopping, and everything queued has run
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work();
    std::lock_guard<std::mutex> guard{mutex_};
    ++items_run_;
  }
}

// --- stream_callbacks ----------------------------------------------------------------------

stream_callbacks::stream_callbacks(std::string name)
  : name_(std::move(name)), thread_([this] { serve(); }) {}

stream_callbacks::~stream_callbacks() {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    stopping_ = true;
  }
  posted_.notify_one();
  thread_.join();
}

void stream_callbacks::when_done(const std::shared_ptr<stream_event>& event,
                                 std::function<void()> callback) {
  // The event fires on a stream's thread: only hand the callback over there.
  event->on_fire([this, callback = std::move(callback)]() mutable { post(std::move(callback)); });
}

void stream_callbacks::post(std::function<void()> callback) {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    ready_.push_back(std::move(callback));
  }
  posted_.notify_one();
}

void stream_callbacks::serve() {
  name_this_thread(name_);
  for (;;) {
    std::function<void()> callback;
    {
      std::unique_lock<std::mutex> lock{mutex_};
      posted_.wait(lock, [this] { return stopping_ || !ready_.empty(); });
      if (ready_.empty())
        return;
      callback = std::move(ready_.front());
      ready_.pop_front();
    }
    callback();
  }
}

} // namespace actorflow

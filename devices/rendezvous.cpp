#include "devices/rendezvous.hpp"

#include <vector>

namespace actorflow {

void rendezvous::deliver(const std::string& key, tensor value) {
  callback waiter;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    if (!aborted_.ok())
      return;
    auto i = waiting_.find(key);
    if (i == waiting_.end()) {
      arrived_[key] = std::move(value);
      return;
    }
    waiter = std::move(i->second);
    waiting_.erase(i);
  }
  waiter(std::move(value));
}

void rendezvous::recv(const std::string& key, callback done) {
  result<tensor> ready = make_error(errc::internal, "unset");
  {
    std::lock_guard<std::mutex> guard{mutex_};
    if (!aborted_.ok()) {
      ready = aborted_;
    } else if (auto i = arrived_.find(key); i != arrived_.end()) {
      ready = std::move(i->second);
      arrived_.erase(i);
    } else {
      waiting_[key] = std::move(done);
      return;
    }
  }
  done(std::move(ready));
}

void rendezvous::abort(const status& reason) {
  std::vector<callback> waiters;
  status error;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    if (!aborted_.ok())
      return;
    aborted_ = make_error(errc::aborted, "step aborted: " + reason.message());
    for (auto& [key, cb] : waiting_)
      waiters.push_back(std::move(cb));
    waiting_.clear();
    arrived_.clear();
    error = aborted_;
  }
  for (auto& w : waiters)
    w(error);
}

} // namespace actorflow

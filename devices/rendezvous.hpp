#pragma once
/// Where a step's tensors meet their receivers on one device: a _Recv waits for a key, a
/// delivery from another device fills it. Thread-safe; callbacks run outside the lock.
///   rendezvous rv;
///   rv.recv("a;b;x:0", [](result<tensor> t) { ... });
///   rv.deliver("a;b;x:0", value);     // runs the callback
///   rv.abort(error);                  // every waiting and later recv gets `error`

#include "graph/tensor.hpp"

#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

namespace actorflow {

class rendezvous {
public:
  using callback = std::function<void(result<tensor>)>;

  void deliver(const std::string& key, tensor value);
  void recv(const std::string& key, callback done);
  void abort(const status& reason);

private:
  std::mutex mutex_;
  std::unordered_map<std::string, tensor> arrived_;
  std::unordered_map<std::string, callback> waiting_;
  status aborted_;
};

} // namespace actorflow

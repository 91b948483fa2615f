#include "devices/rendezvous.hpp"

#include <cstring>
#include <iterator>
#include <limits>
#include <new>
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

bool rendezvous::aborted() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return !aborted_.ok();
}

namespace {

/// The bytes a tensor of `type` and `shape` needs; false when they do not fit in 64 bits or a
/// dimension is negative.
bool bytes_of(dtype type, const tensor_shape& shape, std::uint64_t& bytes) {
  std::uint64_t count = size_of(type);
  for (auto dim : shape.dims()) {
    if (dim < 0)
      return false;
    auto d = static_cast<std::uint64_t>(dim);
    if (d != 0 && count > std::numeric_limits<std::uint64_t>::max() / d)
      return false;
    count *= d;
  }
  bytes = count;
  return true;
}

} // namespace

result<tensor> tensor_assembler::add(std::int64_t step_id, const std::string& key, dtype type,
                                     const tensor_shape& shape, std::uint64_t total_bytes,
                                     std::uint64_t offset, const void* data, std::uint64_t size) {
  auto what = [&] {
    return "piece [" + std::to_string(offset) + ", " + std::to_string(offset) + "+" +
           std::to_string(size) + ") of tensor '" + key + "' " + to_string(type) +
           shape.to_string() + " in step " + std::to_string(step_id);
  };
  auto& pieces = steps_[step_id];
  auto i = pieces.find(key);
  auto refuse = [&](errc code, const std::string& why) -> result<tensor> {
    if (i != pieces.end()) {
      partial_bytes_ -= i->second.value.bytes();
      pieces.erase(i);
    }
    if (pieces.empty())
      steps_.erase(step_id);
    return make_error(code, what() + ": " + why);
  };
  std::uint64_t needed = 0;
  if (!shape.rank_known() || !bytes_of(type, shape, needed) || needed != total_bytes)
    return refuse(errc::data_loss, "the tensor's shape needs other than its declared " +
                                     std::to_string(total_bytes) + " bytes");
  if (total_bytes > max_tensor_bytes_)
    return refuse(errc::resource_exhausted,
                  "the tensor's " + std::to_string(total_bytes) + " bytes exceed the limit of " +
                    std::to_string(max_tensor_bytes_) + " bytes");
  if (size == 0 || data == nullptr || offset > total_bytes || size > total_bytes - offset)
    return refuse(errc::data_loss, "the piece does not fit the tensor's " +
                                     std::to_string(total_bytes) + " bytes");
  if (i == pieces.end()) {
    partial fresh;
    fresh.type = type;
    fresh.shape = shape;
    try {
      fresh.value = tensor{type, shape};
    } catch (const std::bad_alloc&) {
      return refuse(errc::resource_exhausted, "out of memory allocating the tensor");
    }
    partial_bytes_ += fresh.value.bytes();
    i = pieces.emplace(key, std::move(fresh)).first;
  } else if (i->second.type != type || !(i->second.shape == shape)) {
    return refuse(errc::data_loss, "earlier pieces declared " +
                                     std::string{to_string(i->second.type)} +
                                     i->second.shape.to_string());
  }
  auto& p = i->second;
  const auto end = offset + size;
  // The first range starting after `offset`, and the one before it: neither may overlap.
  auto next = p.ranges.upper_bound(offset);
  if (next != p.ranges.end() && next->first < end)
    return refuse(errc::data_loss, "it overlaps bytes already received");
  auto previous = next == p.ranges.begin() ? p.ranges.end() : std::prev(next);
  if (previous != p.ranges.end() && previous->second > offset)
    return refuse(errc::data_loss, "it overlaps bytes already received");
  std::memcpy(static_cast<char*>(p.value.raw_data()) + offset, data, static_cast<std::size_t>(size));
  p.received += size;
  // Merge with the neighbours so that in-order pieces keep one range.
  auto begin = offset;
  auto stop = end;
  if (previous != p.ranges.end() && previous->second == offset) {
    begin = previous->first;
    p.ranges.erase(previous);
  }
  if (next != p.ranges.end() && next->first == end) {
    stop = next->second;
    p.ranges.erase(next);
  }
  p.ranges[begin] = stop;
  if (p.received < total_bytes)
    return tensor{};
  auto complete = std::move(p.value);
  partial_bytes_ -= complete.bytes();
  pieces.erase(i);
  if (pieces.empty())
    steps_.erase(step_id);
  return complete;
}

void tensor_assembler::drop_step(std::int64_t step_id) {
  auto i = steps_.find(step_id);
  if (i == steps_.end())
    return;
  for (auto& [key, p] : i->second)
    partial_bytes_ -= p.value.bytes();
  steps_.erase(i);
}

std::size_t tensor_assembler::partial_count() const {
  std::size_t count = 0;
  for (auto& [step, pieces] : steps_)
    count += pieces.size();
  return count;
}

} // namespace actorflow

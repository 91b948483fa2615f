#include "devices/collective_execution.hpp"

#include <algorithm>
#include <cstring>
#include <set>
#include <type_traits>

namespace actorflow {

bool collective_supports(dtype type) {
  return type == dtype::float32 || type == dtype::float64 || type == dtype::int32 ||
         type == dtype::int64;
}

namespace {

template <class T>
void reduce_typed(reduction op, T* into, const T* from, std::int64_t count) {
  switch (op) {
    case reduction::sum:
    case reduction::mean:
      for (std::int64_t i = 0; i < count; ++i)
        into[i] += from[i];
      return;
    case reduction::max:
      for (std::int64_t i = 0; i < count; ++i)
        into[i] = std::max(into[i], from[i]);
      return;
    case reduction::min:
      for (std::int64_t i = 0; i < count; ++i)
        into[i] = std::min(into[i], from[i]);
      return;
  }
}

template <class T>
void divide_typed(T* values, std::int64_t count, int by) {
  for (std::int64_t i = 0; i < count; ++i)
    values[i] = static_cast<T>(values[i] / static_cast<T>(by));
}

} // namespace

void reduce_elements(dtype type, reduction op, void* into, const void* from, std::int64_t count) {
  visit_dtype(type, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!std::is_same_v<T, bool>)
      reduce_typed<T>(op, static_cast<T*>(into), static_cast<const T*>(from), count);
    return 0;
  });
}

collective_execution::collective_execution(collective_schedule schedule, tensor buffer,
                                           reduction op)
  : schedule_(std::move(schedule)), buffer_(std::move(buffer)), op_(op),
    element_bytes_(size_of(buffer_.type())), done_(schedule_.actions.size(), false),
    arrived_(schedule_.actions.size()) {
  for (std::size_t i = 0; i < schedule_.actions.size(); ++i) {
    auto& a = schedule_.actions[i];
    if (a.kind == collective_action::receive)
      receives_.emplace(std::make_pair(a.peer, a.tag), i);
  }
  progress();
}

bool collective_execution::ready(const collective_action& a) const {
  return std::all_of(a.after.begin(), a.after.end(),
                     [this](int j) { return done_[static_cast<std::size_t>(j)]; });
}

void collective_execution::progress() {
  // `after` points only backwards, so one pass in order does all that can be done now.
  auto* base = static_cast<char*>(buffer_.raw_data());
  for (std::size_t i = cursor_; i < schedule_.actions.size(); ++i) {
    if (done_[i])
      continue;
    auto& a = schedule_.actions[i];
    if (!ready(a))
      continue;
    auto offset = static_cast<std::size_t>(a.range.begin) * element_bytes_;
    auto bytes = static_cast<std::size_t>(a.range.size()) * element_bytes_;
    if (a.kind == collective_action::send) {
      tensor piece{buffer_.type(), tensor_shape{a.range.size()}};
      std::memcpy(piece.raw_data(), base + offset, bytes);
      outbox_.push_back({a.peer, a.tag, std::move(piece)});
    } else if (arrived_[i]) {
      if (a.reduce)
        reduce_elements(buffer_.type(), op_, base + offset, arrived_[i]->raw_data(),
                        a.range.size());
      else
        std::memcpy(base + offset, arrived_[i]->raw_data(), bytes);
      arrived_[i].reset();
    } else {
      continue;
    }
    done_[i] = true;
  }
  while (cursor_ < done_.size() && done_[cursor_])
    ++cursor_;
}

std::vector<collective_piece> collective_execution::take_sends() {
  return std::exchange(outbox_, {});
}

status collective_execution::receive(int from, std::int64_t tag, tensor piece) {
  auto what = [&] {
    return "piece " + std::to_string(tag >> 24) + "." + std::to_string(tag & 0xffffff) +
           " from member " + std::to_string(from);
  };
  auto i = receives_.find({from, tag});
  if (i == receives_.end())
    return make_error(errc::data_loss, what() + ": member " + std::to_string(schedule_.rank) +
                                         " expects no such piece");
  auto index = i->second;
  if (done_[index] || arrived_[index])
    return make_error(errc::data_loss, what() + " came twice");
  auto& a = schedule_.actions[index];
  if (piece.type() != buffer_.type() || piece.num_elements() != a.range.size() ||
      !piece.on_host())
    return make_error(errc::data_loss,
                      what() + " is " + to_string(piece.type()) + piece.shape().to_string() +
                        " but " + std::to_string(a.range.size()) + " elements of " +
                        to_string(buffer_.type()) + " were expected");
  arrived_[index] = std::move(piece);
  progress();
  return {};
}

tensor collective_execution::take_result() {
  if (op_ == reduction::mean && schedule_.kind == collective_kind::all_reduce)
    visit_dtype(buffer_.type(), [&](auto zero) {
      using T = decltype(zero);
      if constexpr (!std::is_same_v<T, bool>)
        divide_typed<T>(buffer_.data<T>(), buffer_.num_elements(), schedule_.size);
      return 0;
    });
  return std::move(buffer_);
}

const collective_action* collective_execution::first_pending() const {
  return finished() ? nullptr : &schedule_.actions[cursor_];
}

std::string collective_execution::describe_wait() const {
  // The first receive not done: a send is never what a member waits for.
  for (std::size_t i = cursor_; i < schedule_.actions.size(); ++i) {
    auto& a = schedule_.actions[i];
    if (!done_[i] && a.kind == collective_action::receive)
      return std::string{"the "} + to_string(a.phase) + " (round " + std::to_string(a.round) +
             ") waits for member " + std::to_string(a.peer);
  }
  return {};
}

std::vector<int> collective_execution::awaited_members() const {
  std::set<int> members;
  for (std::size_t i = cursor_; i < schedule_.actions.size(); ++i) {
    auto& a = schedule_.actions[i];
    if (!done_[i] && !arrived_[i] && a.kind == collective_action::receive)
      members.insert(a.peer);
  }
  return {members.begin(), members.end()};
}

} // namespace actorflow

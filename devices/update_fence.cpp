#include "devices/update_fence.hpp"

#include <algorithm>

namespace actorflow {

bool update_fence_book::admit(const update_claim& claim) {
  const auto& fence = claim.fence;
  if (!fence.fenced())
    return true;
  auto& record = owners_[fence.owner];
  if (fence.settled_below > record.settled_below) {
    record.settled_below = fence.settled_below;
    // Settled closures are never attempted again; what a late attempt sends is refused below.
    auto first_open = std::make_tuple(record.settled_below, std::int32_t{0}, std::string{});
    record.admitted.erase(record.admitted.begin(), record.admitted.lower_bound(first_open));
  }
  if (fence.closure < record.settled_below ||
      !record.admitted.emplace(fence.closure, fence.run, claim.node).second) {
    ++refused_;
    return false;
  }
  return true;
}

std::size_t update_fence_book::remembered() const {
  std::size_t n = 0;
  for (auto& [owner, record] : owners_)
    n += record.admitted.size();
  return n;
}

} // namespace actorflow

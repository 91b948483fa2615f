#include "devices/worker_lives.hpp"

namespace actorflow {

bool worker_lives::admit(const std::string& worker, std::uint64_t incarnation) {
  if (incarnation == 0)
    return true;
  if (retired_.count(incarnation) > 0) {
    ++refused_;
    return false;
  }
  auto [life, fresh] = current_.emplace(worker, incarnation);
  if (!fresh && life->second != incarnation) {
    // The worker restarted: its earlier life sends nothing that counts from now on.
    retired_.insert(life->second);
    life->second = incarnation;
  }
  return true;
}

} // namespace actorflow

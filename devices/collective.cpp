#include "devices/collective.hpp"

namespace actorflow {

collective_groups& collective_groups::global() {
  static collective_groups groups;
  return groups;
}

void collective_groups::join(const collective_member& member, tensor value, reduce_fn reduce,
                             done_fn done) {
  auto where = "collective '" + member.group + "' (step " + std::to_string(member.step_id) + ")";
  if (member.size < 1 || member.rank < 0 || member.rank >= member.size) {
    done(make_error(errc::invalid_argument, where + ": rank " + std::to_string(member.rank) +
                                              " of " + std::to_string(member.size)));
    return;
  }
  std::vector<tensor> values;
  std::vector<done_fn> waiting;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    auto& g = groups_[key{member.group, member.step_id}];
    if (g.size == 0) {
      g.size = member.size;
      g.values.resize(static_cast<std::size_t>(member.size));
      g.waiting.resize(static_cast<std::size_t>(member.size));
    }
    auto rank = static_cast<std::size_t>(member.rank);
    if (g.size != member.size || g.waiting[rank]) {
      auto why = g.size != member.size
                   ? "members disagree on the size (" + std::to_string(g.size) + " and " +
                       std::to_string(member.size) + ")"
                   : "rank " + std::to_string(member.rank) + " joined twice";
      done(make_error(errc::invalid_argument, where + ": " + why));
      return;
    }
    g.values[rank] = std::move(value);
    g.waiting[rank] = std::move(done);
    if (++g.joined < g.size)
      return;
    values = std::move(g.values);
    waiting = std::move(g.waiting);
    groups_.erase(key{member.group, member.step_id});
  }
  // The last member reduces, outside the lock: other groups go on meanwhile.
  auto reduced = reduce(values);
  if (!reduced)
    reduced = reduced.error().with_context(where);
  for (auto& member_done : waiting)
    member_done(reduced);
}

bool collective_groups::leave(const collective_member& member, status why) {
  done_fn done;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    auto i = groups_.find(key{member.group, member.step_id});
    if (i == groups_.end())
      return false;
    auto& g = i->second;
    auto rank = static_cast<std::size_t>(member.rank);
    if (rank >= g.waiting.size() || !g.waiting[rank])
      return false;
    done = std::move(g.waiting[rank]);
    g.waiting[rank] = nullptr;
    g.values[rank] = tensor{};
    if (--g.joined == 0)
      groups_.erase(i);
  }
  done(std::move(why));
  return true;
}

std::size_t collective_groups::pending_groups() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return groups_.size();
}

} // namespace actorflow

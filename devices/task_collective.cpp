#include "devices/task_collective.hpp"

#include "graph/graph.hpp"

namespace actorflow {

task_collective_registry::offer&
task_collective_registry::offer::operator=(offer&& other) noexcept {
  if (this != &other) {
    reset();
    registry_ = std::exchange(other.registry_, nullptr);
    name_ = std::move(other.name_);
    device_ = std::move(other.device_);
    group_ = std::move(other.group_);
  }
  return *this;
}

void task_collective_registry::offer::reset() {
  if (registry_ != nullptr)
    registry_->withdraw(name_, device_, group_);
  registry_ = nullptr;
  group_.reset();
}

task_collective_registry::watch&
task_collective_registry::watch::operator=(watch&& other) noexcept {
  if (this != &other) {
    reset();
    registry_ = std::exchange(other.registry_, nullptr);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

void task_collective_registry::watch::reset() {
  if (registry_ != nullptr)
    registry_->unwatch(id_);
  registry_ = nullptr;
}

task_collective_registry::offer task_collective_registry::add(std::string name, std::string device,
                                                              std::shared_ptr<task_collective> group) {
  std::shared_ptr<task_collective> replaced;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    auto& offered = groups_[{name, device}];
    if (offered != group)
      replaced = std::exchange(offered, group);
  }
  if (replaced)
    tell_watchers(device, replaced);
  return offer{this, std::move(name), std::move(device), std::move(group)};
}

std::shared_ptr<task_collective> task_collective_registry::find(const std::string& name,
                                                                const std::string& device) const {
  std::lock_guard<std::mutex> guard{mutex_};
  auto found = groups_.find({name, device});
  return found == groups_.end() ? nullptr : found->second;
}

void task_collective_registry::withdraw(const std::string& name, const std::string& device,
                                        const std::shared_ptr<task_collective>& group) {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    auto found = groups_.find({name, device});
    if (found == groups_.end() || found->second != group)
      return;
    groups_.erase(found);
  }
  tell_watchers(device, group);
}

task_collective_registry::watch task_collective_registry::watch_withdrawals(withdrawal gone) {
  std::lock_guard<std::mutex> guard{watchers_mutex_};
  auto id = next_watch_++;
  watchers_.emplace(id, std::move(gone));
  return watch{this, id};
}

void task_collective_registry::tell_watchers(const std::string& device,
                                             const std::shared_ptr<task_collective>& group) {
  std::lock_guard<std::mutex> guard{watchers_mutex_};
  for (auto& [id, gone] : watchers_)
    gone(device, group);
}

void task_collective_registry::unwatch(std::uint64_t id) {
  std::lock_guard<std::mutex> guard{watchers_mutex_};
  watchers_.erase(id);
}

task_collective_registry& task_collectives() {
  static task_collective_registry registry;
  return registry;
}

collective_reduce_attrs collective_reduce_attrs::of(const node& n) {
  return {n.attr_or<std::string>("collective_group", ""),
          n.attr_or<std::int64_t>("instance_key", 0),
          parse_reduction(n.attr_or<std::string>("reduction", "sum"))};
}

result<std::shared_ptr<task_collective>>
collective_reduce_attrs::member_on(const std::string& device) const {
  if (!op || instance < 1 || instance > max_graph_collective_instance)
    return make_error(errc::invalid_argument,
                      "CollectiveReduce needs a reduction of sum, mean, max or min and an "
                      "instance_key in 1.." + std::to_string(max_graph_collective_instance));
  auto member = task_collectives().find(group, device);
  if (!member)
    return make_error(errc::failed_precondition,
                      "no collective group '" + group + "' is offered to device " + device +
                        " (form one with collective_group::join and offer_to_graph)");
  return member;
}

} // namespace actorflow

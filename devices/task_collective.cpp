#include "devices/task_collective.hpp"

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

task_collective_registry::offer task_collective_registry::add(std::string name, std::string device,
                                                              std::shared_ptr<task_collective> group) {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    groups_[{name, device}] = group;
  }
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
  std::lock_guard<std::mutex> guard{mutex_};
  auto found = groups_.find({name, device});
  if (found != groups_.end() && found->second == group)
    groups_.erase(found);
}

task_collective_registry& task_collectives() {
  static task_collective_registry registry;
  return registry;
}

} // namespace actorflow

#include "actors/device_directory.hpp"

#include "devices/kernel.hpp"

#include <algorithm>
#include <set>
#include <tuple>

namespace actorflow {

namespace {

std::string task_of(const device_name& d) {
  return task_name(d.job.value_or(""), d.task.value_or(0));
}

} // namespace

status device_directory::add_task(const std::string& where, const protocol::device_list& listed) {
  std::vector<std::pair<device_name, protocol::device_actor>> added;
  for (auto& [name, actor] : listed.devices) {
    auto parsed = device_name::parse(name);
    if (!parsed || !parsed->fully_specified())
      return make_error(errc::data_loss,
                        "task " + where + " reported a bad device name '" + name + "'");
    added.emplace_back(*parsed, actor);
  }
  for (auto& [type, kernels] : listed.kernels)
    kernels_[type].insert(kernels.begin(), kernels.end());
  for (auto& [name, actor] : added) {
    if (!listed.bulk_address.empty())
      bulk_addresses_[name.to_string()] = listed.bulk_address;
    incarnations_[name.to_string()] = listed.incarnation;
    devices_.emplace_back(std::move(name), actor);
  }
  return {};
}

bool device_directory::has_kernel(const std::string& op, const std::string& device_type,
                                  dtype type) const {
  auto reported = kernels_.find(device_type);
  if (reported == kernels_.end())
    return kernel_registry::global().has(op, device_type, type);
  return reported->second.count(kernel_key_name(op, type)) > 0;
}

void device_directory::finish() {
  std::sort(devices_.begin(), devices_.end(), [](auto& a, auto& b) {
    return std::make_tuple(a.first.job, a.first.task, a.first.type, a.first.id) <
           std::make_tuple(b.first.job, b.first.task, b.first.type, b.first.id);
  });
}

void device_directory::clear() {
  kernels_.clear();
  devices_.clear();
  bulk_addresses_.clear();
  incarnations_.clear();
}

std::vector<device_name> device_directory::names() const {
  std::vector<device_name> out;
  for (auto& d : devices_)
    out.push_back(d.first);
  return out;
}

bool device_directory::has(const std::string& full_name) const {
  return std::any_of(devices_.begin(), devices_.end(),
                     [&](auto& d) { return d.first.to_string() == full_name; });
}

protocol::device_actor device_directory::find(const std::string& full_name) const {
  for (auto& [name, actor] : devices_)
    if (name.to_string() == full_name)
      return actor;
  return {};
}

bool device_directory::has_actor(const caf::actor_addr& source) const {
  return std::any_of(devices_.begin(), devices_.end(),
                     [&](auto& d) { return d.second && d.second.address() == source; });
}

protocol::peer_table device_directory::peers() const {
  protocol::peer_table peers;
  for (auto& [name, actor] : devices_)
    peers.devices.emplace(name.to_string(), actor);
  peers.bulk_addresses = bulk_addresses_;
  peers.incarnations = incarnations_;
  return peers;
}

device_name device_directory::default_task(const std::string& requested,
                                           const std::string& own_task) const {
  for (auto* name : {&requested, &own_task})
    if (!name->empty())
      if (auto parsed = device_name::parse(*name))
        return *parsed;
  std::vector<std::string> jobs;
  for (auto& [name, actor] : devices_)
    if (std::find(jobs.begin(), jobs.end(), *name.job) == jobs.end())
      jobs.push_back(*name.job);
  device_name d;
  if (jobs.empty())
    return d;
  auto has_worker = std::find(jobs.begin(), jobs.end(), "worker") != jobs.end();
  d.job = has_worker ? std::string{"worker"} : jobs.front();
  d.replica = 0;
  d.task = 0;
  return d;
}

result<std::vector<unreached_task>>
device_directory::unreached(const cluster_spec& cluster, const std::vector<std::string>& filters) const {
  std::vector<device_name> wanted;
  for (auto& filter : filters) {
    auto parsed = device_name::parse(filter);
    if (!parsed)
      return make_error(errc::invalid_argument, "device filter '" + filter + "': " +
                                                  parsed.error().message());
    wanted.push_back(*parsed);
  }
  auto kept = [&](const std::string& job, int task) {
    return wanted.empty() || std::any_of(wanted.begin(), wanted.end(), [&](auto& f) {
             return (!f.job || *f.job == job) && (!f.task || *f.task == task);
           });
  };
  std::set<std::string> reached;
  for (auto& [name, actor] : devices_)
    reached.insert(task_of(name));
  std::vector<unreached_task> out;
  for (auto& job : cluster.jobs()) {
    for (int task = 0; task < cluster.num_tasks(job); ++task) {
      auto name = task_name(job, task);
      if (reached.count(name) > 0 || !kept(job, task))
        continue;
      auto address = cluster.address(job, task);
      if (!address)
        return address.error();
      auto split = parse_host_port(*address);
      if (!split)
        return split.error();
      out.push_back({name + " at " + *address, split->host, split->port, {job, task, 0}});
    }
  }
  return out;
}

} // namespace actorflow

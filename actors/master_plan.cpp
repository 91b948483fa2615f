#include "actors/master_plan.hpp"

#include "devices/commit_gate.hpp"
#include "devices/kernel.hpp"
#include "graph/fusion.hpp"
#include "graph/variable_gather.hpp"
#include "graph/mixed_precision.hpp"
#include "graph/op_registry.hpp"
#include "graph/partition.hpp"

#include <algorithm>
#include <set>

namespace actorflow {

using namespace protocol;

void run_plan::finish_registration(const status& outcome) {
  registering = false;
  registration = outcome;
  auto ready = std::move(waiting);
  waiting.clear();
  for (auto& w : ready)
    w(outcome);
}

std::string run_signature(const master_run_request& request) {
  std::string signature;
  for (auto& f : request.fetches)
    signature += f + ",";
  signature += "|";
  for (auto& f : request.feeds)
    signature += f.first + ",";
  signature += "|";
  for (auto& t : request.targets)
    signature += t + ",";
  return signature;
}

namespace {

/// The updates among `needed` (ops taking a variable ref: Assign*, Apply*) that no other update
/// of the step feeds, directly or through other nodes: an all-or-nothing step holds these until
/// all are ready. Later updates (a beta power after Adam's apply) follow them by themselves.
std::set<std::string> first_updates_of(const graph& g, std::vector<int> needed,
                                       const std::set<int>& fed) {
  std::sort(needed.begin(), needed.end()); // inputs always have smaller ids
  // The step's updates and every node after one of them.
  std::set<int> after_update;
  std::set<std::string> first;
  for (auto id : needed) {
    const auto& n = g.at(id);
    bool preceded = false;
    if (fed.count(id) == 0) {
      for (auto& input : n.inputs)
        preceded = preceded || after_update.count(input.node_id) > 0;
      for (auto control : n.control_inputs)
        preceded = preceded || after_update.count(control) > 0;
    }
    auto* def = op_registry::global().find(n.op);
    bool is_update = def != nullptr && def->takes_variable_ref;
    if (is_update && !preceded)
      first.insert(n.name);
    if (is_update || preceded)
      after_update.insert(id);
  }
  return first;
}

} // namespace

result<std::shared_ptr<run_plan>> make_run_plan(graph& g, const master_run_request& request,
                                                const device_directory& directory,
                                                const placement_options& placement,
                                                std::int64_t& next_handle,
                                                std::vector<std::string>& placed,
                                                bool fuse_ops,
                                                const std::string& mixed_precision) {
  std::vector<int> roots;
  std::vector<output> fetches;
  for (auto& name : request.fetches) {
    auto o = g.find_output(name);
    if (!o.valid())
      return make_error(errc::invalid_argument, "fetch '" + name + "' names no tensor of the graph");
    fetches.push_back(o);
    roots.push_back(o.node_id);
  }
  for (auto& name : request.targets) {
    auto id = g.find(name);
    if (id < 0)
      return make_error(errc::invalid_argument, "target '" + name + "' names no node of the graph");
    add_target_roots(g, id, roots);
  }
  std::set<int> fed;
  std::vector<output> feeds;
  for (auto& [name, value] : request.feeds) {
    auto o = g.find_output(name);
    if (!o.valid())
      return make_error(errc::invalid_argument, "feed '" + name + "' names no tensor of the graph");
    feeds.push_back(o);
    fed.insert(o.node_id);
  }
  auto needed = prune(g, roots, fed);
  AF_RETURN_IF_ERROR(place_nodes(
    g, needed, directory.names(),
    [&directory](const std::string& op, const std::string& type, dtype t) {
      return directory.has_kernel(op, type, t);
    },
    placement, &placed));
  auto parts = partition_graph(g, needed, fed, directory.incarnations());
  if (!parts)
    return parts.error();
  auto first_updates = first_updates_of(g, needed, fed);
  // Fetched and fed tensors must keep their producers.
  std::set<std::string> keep;
  for (auto& o : fetches)
    keep.insert(g.at(o.node_id).name);
  for (auto& o : feeds)
    keep.insert(g.at(o.node_id).name);
  kernel_support has_kernel = [&directory](const std::string& op, const std::string& type,
                                           dtype t) { return directory.has_kernel(op, type, t); };
  // Lookups of variables take rows under the variable's lock, not an alias of it, so that
  // updates of large tables are made in place (graph/variable_gather.hpp).
  for (auto& [device, part] : *parts) {
    auto gathered = gather_from_variables(part, keep, has_kernel);
    if (!gathered)
      return gathered.error().with_context("rewriting the gathers for " + device);
    part = gathered->partition;
  }
  if (fuse_ops) {
    for (auto& [device, part] : *parts) {
      auto fused = fuse_partition(part, keep, has_kernel);
      if (!fused)
        return fused.error().with_context("fusing the partition for " + device);
      part = fused->partition;
      for (auto& record : fused->fusions)
        placed.push_back(fusion_line(record));
    }
  }
  // After fusion, so that the fused contractions are the ones marked. Only the CPU kernels
  // read the mark (their oneDNN path, devices/cpu/onednn_conv.hpp); elsewhere it would lie.
  auto honours = [](const std::string& device_type) { return device_type == "CPU"; };
  for (auto& [device, part] : *parts)
    for (auto& record : apply_mixed_precision(*part, mixed_precision, honours))
      placed.push_back(mixed_precision_line(record));

  auto plan = std::make_shared<run_plan>();
  for (auto& [device, part] : *parts) {
    partition_entry entry;
    if (!directory.has(device))
      return make_error(errc::internal, "no device actor for " + device);
    entry.actor = directory.find(device);
    entry.device = device;
    if (auto known = directory.incarnations().find(device); known != directory.incarnations().end())
      entry.incarnation = known->second;
    entry.handle = ++next_handle;
    entry.partition = part;
    for (std::size_t i = 0; i < feeds.size(); ++i)
      if (g.at(feeds[i].node_id).assigned_device == device)
        entry.feeds.emplace_back(i, request.feeds[i].first);
    for (std::size_t i = 0; i < fetches.size(); ++i)
      if (g.at(fetches[i].node_id).assigned_device == device) {
        entry.fetch_names.push_back(request.fetches[i]);
        entry.fetch_slots.push_back(i);
      }
    for (std::size_t id = 0; id < part->size(); ++id) {
      auto& n = part->at(static_cast<int>(id));
      if (first_updates.count(n.name) > 0) {
        n.attrs[commit_gate_attr] = true;
        ++entry.gated_updates;
      }
    }
    plan->partitions.push_back(std::move(entry));
  }
  return plan;
}

step_plan make_step_plan(const run_plan& plan, std::int64_t step_id,
                         const master_run_request& request, std::int64_t timeout_ms) {
  step_plan step;
  step.step_id = step_id;
  step.timeout_ms = timeout_ms;
  step.step_timeout_ms = request.timeout_ms;
  for (auto& p : plan.partitions) {
    step.device_names.push_back(p.device);
    step.device_incarnations.push_back(p.incarnation);
    std::vector<std::pair<std::string, tensor>> device_feeds;
    for (auto& [index, name] : p.feeds)
      device_feeds.emplace_back(name, request.feeds[index].second);
    step.calls.emplace_back(p.actor, make_run_request(p.handle, step_id, std::move(device_feeds),
                                                      p.fetch_names));
    step.calls.back().second.fence = request.fence;
    if (request.all_or_nothing && p.gated_updates > 0) {
      step.calls.back().second.all_or_nothing = true;
      step.gated.push_back(static_cast<std::int32_t>(step.calls.size() - 1));
    }
  }
  return step;
}

std::vector<tensor> gather_fetches(const run_plan& plan, std::vector<std::vector<tensor>>& fetched,
                                   std::size_t fetch_count) {
  std::vector<tensor> out(fetch_count);
  auto& parts = plan.partitions;
  for (std::size_t k = 0; k < parts.size() && k < fetched.size(); ++k) {
    auto& slots = parts[k].fetch_slots;
    for (std::size_t j = 0; j < slots.size() && j < fetched[k].size(); ++j)
      out[slots[j]] = std::move(fetched[k][j]);
  }
  return out;
}

std::shared_ptr<run_plan> plan_cache::find(const std::string& signature) const {
  auto i = plans_.find(signature);
  return i == plans_.end() ? nullptr : i->second;
}

void plan_cache::insert(const std::string& signature, std::shared_ptr<run_plan> plan) {
  plans_[signature] = std::move(plan);
}

void plan_cache::forget(const std::string& signature, const std::shared_ptr<run_plan>& plan) {
  auto i = plans_.find(signature);
  if (i != plans_.end() && i->second == plan)
    plans_.erase(i);
}

} // namespace actorflow

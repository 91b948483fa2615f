#include "graph/placement.hpp"

#include "graph/frames.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

namespace actorflow {

namespace {

/// A colocation group: nodes that must share a device.
struct group {
  std::vector<int> members;
  device_name request;
  std::string assigned;
  int pinned_by = -1;
};

int find_root(std::vector<int>& parent, int x) {
  while (parent[static_cast<std::size_t>(x)] != x) {
    parent[static_cast<std::size_t>(x)] = parent[static_cast<std::size_t>(parent[static_cast<std::size_t>(x)])];
    x = parent[static_cast<std::size_t>(x)];
  }
  return x;
}

/// Puts a's and b's groups together.
void unite(std::vector<int>& parent, int a, int b) {
  parent[static_cast<std::size_t>(find_root(parent, a))] = find_root(parent, b);
}

std::string join_names(const std::vector<device_name>& devices) {
  std::string out;
  for (auto& d : devices)
    out += (out.empty() ? "" : ", ") + d.to_string();
  return out;
}

bool supports_all(const graph& g, const std::vector<int>& members, const std::string& type,
                  const kernel_support& has_kernel) {
  return std::all_of(members.begin(), members.end(), [&](int id) {
    auto& n = g.at(id);
    return has_kernel(n.op, type, n.kernel_type);
  });
}

/// TensorFlow's priorities for the types it knows; the device layer knows the rest.
int builtin_priority(const std::string& type) {
  return type == "GPU" ? 210 : type == "CPU" ? 70 : 0;
}

/// Devices of `candidates` in preference order: by type priority, then by task and index.
std::vector<device_name> by_preference(std::vector<device_name> candidates,
                                       const placement_options& options) {
  auto priority = [&](const device_name& d) {
    return options.device_priority ? options.device_priority(*d.type) : builtin_priority(*d.type);
  };
  std::stable_sort(candidates.begin(), candidates.end(), [&](auto& a, auto& b) {
    auto pa = priority(a), pb = priority(b);
    if (pa != pb)
      return pa > pb;
    return std::tie(*a.task, *a.id) < std::tie(*b.task, *b.id);
  });
  return candidates;
}

} // namespace

status place_nodes(graph& g, const std::vector<int>& node_ids, const std::vector<device_name>& devices,
                   const kernel_support& has_kernel, const placement_options& options,
                   std::vector<std::string>* log) {
  // Union nodes with what they are colocated with; groups may reach outside node_ids
  // (a variable placed in an earlier run pins its assign).
  std::vector<int> parent(g.size());
  std::iota(parent.begin(), parent.end(), 0);
  std::set<int> wanted(node_ids.begin(), node_ids.end());
  for (auto id : node_ids) {
    auto& n = g.at(id);
    if (auto* target = n.attr<std::string>("colocate_with")) {
      auto other = g.find(*target);
      if (other >= 0)
        unite(parent, id, other);
    }
  }
  // A while loop's control (its variables' Enters, Merges, Switches, Exits, NextIterations and
  // LoopCond) stays on one device, so that devices running parts of its body need only the
  // condition's value each iteration (graph/partition.cpp, add_loop_control).
  auto layout = find_frames(g);
  if (!layout)
    return layout.error();
  std::map<int, int> control_member;
  for (auto id : node_ids) {
    auto& op = g.at(id).op;
    auto frame = layout->frame_of[static_cast<std::size_t>(id)];
    // (A loop invariant's Enter goes with what reads it.)
    if (op == "Enter" && g.at(id).attr_or<bool>("is_constant", false))
      continue;
    if (op == "Enter")
      frame = layout->child_frame[static_cast<std::size_t>(id)];
    else if (op != "Merge" && op != "Switch" && op != "Exit" && op != "NextIteration" &&
             op != "LoopCond")
      continue;
    if (frame == 0)
      continue; // a cond's Switches and Merges go where their inputs' devices say
    if (auto [first, added] = control_member.emplace(frame, id); !added)
      unite(parent, id, first->second);
  }
  std::map<int, group> groups;
  for (auto id : node_ids)
    groups[find_root(parent, id)].members.push_back(id);
  // Members outside node_ids still constrain the group (their placement or request).
  for (std::size_t id = 0; id < g.size(); ++id) {
    auto root = find_root(parent, static_cast<int>(id));
    auto i = groups.find(root);
    if (i != groups.end() && wanted.count(static_cast<int>(id)) == 0 &&
        (!g.at(static_cast<int>(id)).assigned_device.empty() || static_cast<int>(id) == root))
      i->second.members.push_back(static_cast<int>(id));
  }

  std::vector<std::pair<int, std::string>> decisions;
  for (auto& [root, grp] : groups) {
    for (auto id : grp.members) {
      auto& n = g.at(id);
      if (!n.assigned_device.empty())
        grp.assigned = n.assigned_device;
      if (n.requested_device.empty())
        continue;
      auto request = device_name::parse(n.requested_device);
      if (!request)
        return request.error().with_context("node '" + n.name + "'");
      if (grp.pinned_by >= 0 && !grp.request.matches(*request) && !request->matches(grp.request)) {
        if (!options.allow_soft_placement)
          return make_error(errc::invalid_argument,
                            "cannot colocate node '" + n.name + "' (requested '" +
                              n.requested_device + "') with node '" + g.at(grp.pinned_by).name +
                              "' (requested '" + g.at(grp.pinned_by).requested_device + "')");
        continue;
      }
      grp.request = device_name::merge(grp.request, *request);
      if (grp.pinned_by < 0)
        grp.pinned_by = id;
    }
    if (grp.assigned.empty()) {
      // Fill what the request leaves open from the master's task (SPEC defaulting rules).
      auto request = grp.request;
      if (!request.job && !request.task) {
        request.job = options.default_task.job;
        request.replica = options.default_task.replica;
        request.task = options.default_task.task;
      }
      if (!request.task)
        request.task = 0;
      std::vector<device_name> matching;
      for (auto& d : devices)
        if (request.matches(d))
          matching.push_back(d);
      std::vector<device_name> runnable;
      for (auto& d : by_preference(matching, options))
        if (supports_all(g, grp.members, *d.type, has_kernel))
          runnable.push_back(d);
      auto pinned = grp.pinned_by >= 0 && grp.request.type.has_value();
      if (runnable.empty()) {
        auto& culprit = g.at(grp.pinned_by >= 0 ? grp.pinned_by : grp.members.front());
        if (!options.allow_soft_placement || !pinned) {
          std::string why = matching.empty()
                              ? "no devices matching that specification are registered (available: " +
                                  join_names(devices) + ")"
                              : "no supported kernel for " + (request.type ? *request.type : std::string{"its"}) +
                                  " devices is available for op '" + culprit.op + "' with dtype " +
                                  to_string(culprit.kernel_type);
          return make_error(errc::invalid_argument,
                            "cannot assign a device to node '" + culprit.name +
                              "': could not satisfy explicit device specification '" +
                              culprit.requested_device + "' because " + why);
        }
        // Soft placement: keep the job and task, let the device type go.
        auto relaxed = request;
        relaxed.type.reset();
        relaxed.id.reset();
        for (auto& d : devices)
          if (relaxed.matches(d))
            matching.push_back(d);
        for (auto& d : by_preference(matching, options))
          if (supports_all(g, grp.members, *d.type, has_kernel)) {
            runnable.push_back(d);
            break;
          }
        if (runnable.empty())
          return make_error(errc::invalid_argument,
                            "cannot assign a device to node '" + culprit.name +
                              "': no device of task " + relaxed.to_string() +
                              " has a kernel for op '" + culprit.op + "'");
      }
      grp.assigned = runnable.front().to_string();
    }
    for (auto id : grp.members)
      if (wanted.count(id) > 0 && g.at(id).assigned_device.empty())
        decisions.emplace_back(id, grp.assigned);
  }
  std::sort(decisions.begin(), decisions.end());
  for (auto& [id, device] : decisions) {
    g.at(id).assigned_device = device;
    if (log != nullptr)
      log->push_back(g.at(id).name + ": " + device);
  }
  return {};
}

} // namespace actorflow

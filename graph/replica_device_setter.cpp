#include "graph/replica_device_setter.hpp"

#include "graph/device_name.hpp"

#include <algorithm>
#include <memory>
#include <utility>

namespace actorflow {

namespace {

/// What every copy of one setter shares: the parsed options and the round-robin position.
struct setter_state {
  int ps_tasks = 0;
  bool has_ps_device = false;
  device_name ps_device;
  bool has_worker_device = false;
  device_name worker_device;
  bool merge_devices = true;
  std::vector<std::string> ps_ops;
  ps_strategy strategy;
  int next_task = 0;

  bool is_ps_op(const node& n) const {
    return std::find(ps_ops.begin(), ps_ops.end(), n.op) != ps_ops.end();
  }

  int choose_task(const node& n) {
    if (strategy)
      return strategy(n);
    auto task = next_task;
    next_task = (next_task + 1) % ps_tasks;
    return task;
  }

  // TF1's _ReplicaDeviceChooser.device_function, on actorflow's device names.
  std::string choose(const node& n) {
    if (!merge_devices && !n.requested_device.empty())
      return n.requested_device;
    auto current = device_name::parse(n.requested_device);
    // add_node keeps requests canonical, so this only fails for a node built by hand; leave
    // such a request alone and let add_node report it.
    if (!current)
      return n.requested_device;
    if (ps_tasks > 0 && has_ps_device && is_ps_op(n)) {
      auto ps = ps_device;
      // A request for another job (say a variable pinned to a worker) gets no ps task.
      if (ps.job && (!current->job || current->job == ps.job))
        ps.task = choose_task(n);
      return device_name::merge(ps, *current).to_string();
    }
    if (!has_worker_device)
      return n.requested_device;
    return device_name::merge(worker_device, *current).to_string();
  }
};

} // namespace

result<device_function> replica_device_setter(replica_device_setter_options options) {
  if (options.ps_tasks < 0)
    return make_error(errc::invalid_argument,
                      "replica_device_setter: ps_tasks is " + std::to_string(options.ps_tasks) +
                        ", it must not be negative");
  auto state = std::make_shared<setter_state>();
  state->ps_tasks = options.ps_tasks;
  if (!options.ps_device.empty()) {
    auto ps = device_name::parse(options.ps_device);
    if (!ps)
      return ps.error().with_context("replica_device_setter: ps_device");
    state->has_ps_device = true;
    state->ps_device = *ps;
  }
  if (!options.worker_device.empty()) {
    auto worker = device_name::parse(options.worker_device);
    if (!worker)
      return worker.error().with_context("replica_device_setter: worker_device");
    state->has_worker_device = true;
    state->worker_device = *worker;
  }
  state->merge_devices = options.merge_devices;
  state->ps_ops = std::move(options.ps_ops);
  state->strategy = std::move(options.strategy);
  return device_function{[state](const node& n) { return state->choose(n); }};
}

result<device_function> replica_device_setter(int ps_tasks) {
  replica_device_setter_options options;
  options.ps_tasks = ps_tasks;
  return replica_device_setter(std::move(options));
}

} // namespace actorflow

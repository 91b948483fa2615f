#pragma once
/// One variable (or one shard of a partitioned variable) as a parameter server serves it: reads
/// and updates of its stored value, counted by a version. It lives on the device that runs the
/// graph's ops on the variable and updates it with that device's own kernels (AssignAdd,
/// ApplyGradientDescent), so updates from a training step and from the shard protocol
/// (actors/protocols/ps.hpp) apply one at a time under the variable's mutex, by the same code.
/// A read shares the stored buffer without copying it: an update never writes a buffer someone
/// else still holds, so a read racing an update sees the old or the new value, never half.
///   variable_shard w{"w", cpu_device};           // the device whose resources hold "w"
///   auto now = w.read();                         // {value, version}
///   w.apply_gradient_descent(0.1, gradient);     // value -= 0.1 * gradient; version + 1
/// The shard actor (actors/shard_actor.hpp) owns one and orders its calls.

#include "devices/device.hpp"
#include "devices/kernel.hpp"
#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

namespace actorflow {

/// A variable's value and how many updates it has applied.
struct versioned_value {
  tensor value;
  std::int64_t version = 0;
};

class variable_shard {
public:
  /// The variable `name` of `dev`'s resources (created empty when it does not exist yet).
  variable_shard(std::string name, std::shared_ptr<device> dev);
  /// Gives the device's update kernels back their own thread if this shard ordered them.
  ~variable_shard();
  variable_shard(variable_shard&&) = default;
  variable_shard& operator=(variable_shard&&) = default;

  const std::string& name() const { return name_; }

  /// The value (sharing its buffer) and version; failed_precondition, naming the variable,
  /// when it was never initialised.
  result<versioned_value> read() const;
  std::int64_t version() const;

  /// Each update returns the version after it.
  /// Replaces the value (same dtype and shape once initialised; the variable takes `value` as
  /// its own: do not write it afterwards).
  result<std::int64_t> assign(tensor value);
  /// value += delta (the AssignAdd kernel).
  result<std::int64_t> assign_add(const tensor& delta);
  /// value -= learning_rate * gradient (the ApplyGradientDescent kernel); floating point.
  result<std::int64_t> apply_gradient_descent(double learning_rate, const tensor& gradient);
  /// Puts back a snapshot: the value and its version (checkpoint restore).
  result<std::int64_t> restore(versioned_value snapshot);

  /// From now on the device's update kernels for this variable hand their updates to `order`
  /// (variable_state::order_update) instead of applying them on their own thread; an empty
  /// function gives them back their thread.
  void order_updates_through(std::function<void(pending_update, update_claim)> order);

private:
  /// Runs the device's kernel for `op` on this variable with the inputs `make_inputs` gives for
  /// the variable's dtype (input 0, the variable itself, is named by the node's "variable"
  /// attribute instead); the version after it.
  result<std::int64_t> run_kernel(const std::string& op,
                                  const std::function<std::vector<tensor>(dtype)>& make_inputs);

  std::string name_;
  std::shared_ptr<device> dev_;
  std::shared_ptr<variable_state> state_;
  bool orders_updates_ = false;
  /// Kernels made once per (op, dtype), with the node each was made for.
  std::map<std::pair<std::string, dtype>, std::pair<std::unique_ptr<node>, std::unique_ptr<op_kernel>>>
    kernels_;
};

} // namespace actorflow

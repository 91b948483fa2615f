#pragma once
/// One variable (or one shard of a partitioned variable) as a parameter server serves it: reads
/// and updates of its stored value, counted by a version. It shares the variable's storage with
/// the device that runs the graph's ops on it (the same variable_state, same mutex), so updates
/// from a training step and from the shard protocol (actors/protocols/ps.hpp) apply one at a
/// time, and a read shares the stored buffer without copying it: an update never writes a
/// buffer someone else still holds, so a read racing an update sees the old or the new value,
/// never half of one.
///   variable_shard w{"w", device.resources().variable("w")};
///   auto now = w.read();                         // {value, version}
///   w.apply_gradient_descent(0.1, gradient);     // value -= 0.1 * gradient; version + 1
/// A plain class; the shard actor (actors/shard_actor.hpp) owns one and orders its calls.

#include "devices/kernel.hpp"
#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace actorflow {

/// A variable's value and how many updates it has applied.
struct versioned_value {
  tensor value;
  std::int64_t version = 0;
};

class variable_shard {
public:
  variable_shard(std::string name, std::shared_ptr<variable_state> state);

  const std::string& name() const { return name_; }

  /// The value (sharing its buffer) and version; failed_precondition, naming the variable,
  /// when it was never initialised.
  result<versioned_value> read() const;
  std::int64_t version() const;

  /// Each update returns the version after it.
  /// Replaces the value (the variable takes `value` as its own: do not write it afterwards).
  result<std::int64_t> assign(tensor value);
  /// value += delta (same dtype and shape).
  result<std::int64_t> assign_add(const tensor& delta);
  /// value -= learning_rate * gradient (TensorFlow's ApplyGradientDescent); floating point.
  result<std::int64_t> apply_gradient_descent(double learning_rate, const tensor& gradient);
  /// Puts back a snapshot: the value and its version (checkpoint restore).
  result<std::int64_t> restore(versioned_value snapshot);

private:
  /// The stored value, checked initialised and like `other` (dtype and shape).
  status check_like(const tensor& other, const char* what) const;
  /// Applies `update(stored, other, out)` elementwise, in place when nobody else holds the
  /// stored buffer, else into a fresh one that replaces it.
  template <class Update>
  result<std::int64_t> update(const tensor& other, const char* what, Update&& fn);

  std::string name_;
  std::shared_ptr<variable_state> state_;
};

} // namespace actorflow

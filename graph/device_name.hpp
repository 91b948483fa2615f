#pragma once
/// Device names as TensorFlow writes them, possibly partial.
///   auto d = device_name::parse("/job:ps/replica:0/task:1/device:CPU:0");
///   auto g = device_name::parse("/gpu:1");            // type GPU, id 1, nothing else
///   auto m = device_name::merge(*outer, *inner);      // inner overrides only what it names
/// Accepted forms (components in any order, each at most once, each optional):
///   /job:NAME  /replica:N  /task:N  /device:TYPE:N  /device:TYPE:*  /TYPE:N (legacy: cpu, gpu)
/// Types are printed upper-case ("CPU", "GPU"); "/cpu:0" and "/device:CPU:0" are the same device.

#include "graph/status.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace actorflow {

struct device_name {
  std::optional<std::string> job;
  std::optional<int> replica;
  std::optional<int> task;
  /// Upper-case device type, e.g. "CPU", "GPU".
  std::optional<std::string> type;
  /// Device index; unset for "*" or when not named.
  std::optional<int> id;

  /// Parses a device string; the empty string is a name with no field set. Errors quote the
  /// whole string and say which part is wrong.
  static result<device_name> parse(std::string_view text);

  /// Fields of `inner` override those of `outer`; fields `inner` leaves unset come from `outer`.
  static device_name merge(const device_name& outer, const device_name& inner);

  /// Whether every field is set.
  bool fully_specified() const;
  /// Whether no field is set.
  bool empty() const;
  /// Whether every field set here is equal in `other` (other may be more specific).
  bool matches(const device_name& other) const;

  /// Canonical form of the set fields, in the order job, replica, task, device:
  /// "/job:ps/replica:0/task:1/device:CPU:0"; a type without id prints "/device:GPU:*";
  /// an empty name prints "".
  std::string to_string() const;
  /// Just the device part, "/device:CPU:0" ("" when no type is set).
  std::string local_name() const;

  friend bool operator==(const device_name& a, const device_name& b) {
    return a.job == b.job && a.replica == b.replica && a.task == b.task && a.type == b.type &&
           a.id == b.id;
  }
  friend bool operator!=(const device_name& a, const device_name& b) { return !(a == b); }
};

} // namespace actorflow

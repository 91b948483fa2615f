#pragma once
/// Device names as TensorFlow writes them, possibly partial.
///   auto d = device_name::parse("/job:ps/replica:0/task:1/device:CPU:0");
///   auto g = device_name::parse("/gpu:1");            // type GPU, id 1, nothing else
///   auto m = device_name::merge(*outer, *inner);      // inner overrides only what it names
/// Accepted forms (components in any order, each at most once, each optional):
///   /job:NAME  /replica:N  /task:N  /device:TYPE:N  /device:TYPE:*  /TYPE:N (legacy: cpu, gpu)
/// "cpu" and "gpu" are read in any case and printed "CPU" and "GPU" ("/cpu:0", "/device:cpu:0" and
/// "/device:CPU:0" are the same device); every other type keeps its case ("/device:MyDevice:2").

#include "graph/status.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace actorflow {

struct device_name {
  std::optional<std::string> job;
  std::optional<int> replica;
  std::optional<int> task;
  /// Device type as written, e.g. "CPU", "GPU", "XLA_GPU", "MyDevice"; parse stores "cpu" and
  /// "gpu" (any case) as "CPU" and "GPU", and printing and comparing treat a "cpu" or "gpu" set
  /// here in code the same way (canonical_type).
  std::optional<std::string> type;
  /// Device index; unset for "*" or when not named.
  std::optional<int> id;

  /// The canonical spelling of a device type: "CPU" or "GPU" for "cpu" or "gpu" in any case
  /// (TensorFlow's legacy lower-case names), `type` unchanged otherwise.
  static std::string canonical_type(std::string_view type);

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

  /// Field by field; types compare by canonical_type, so a "cpu" set in code equals "CPU".
  friend bool operator==(const device_name& a, const device_name& b);
  friend bool operator!=(const device_name& a, const device_name& b) { return !(a == b); }
};

/// A task's name, the prefix of its devices' names: "/job:ps/replica:0/task:1".
std::string task_name(const std::string& job, int task);

/// The task of device `device` ("/job:ps/replica:0/task:1/device:CPU:0": ps, 1), with
/// `incarnation`; nullopt when the name names no job and task (a device of this process).
std::optional<task_origin> task_origin_of(const std::string& device, std::uint64_t incarnation = 0);

} // namespace actorflow

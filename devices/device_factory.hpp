#pragma once
/// Device factories (TensorFlow's DeviceFactory): a task asks every registered factory for the
/// devices of its type instead of making CPU devices by hand, so a GPU (or test) device type
/// joins by registering a factory.
///   device_factory_options o{"worker", 1, 1, pools.intra_op};
///   auto made = make_task_devices(o);          // CPU:0 and, where there are any, GPU:0...
///   for (auto& line : made.notes) log(line);   // "no GPU devices: built without CUDA"
/// Devices are named /job:<job>/replica:0/task:<task>/device:<TYPE>:<i>, in factory order.

#include "devices/device.hpp"
#include "devices/gpu_options.hpp"

#include <memory>
#include <string>
#include <vector>

namespace actorflow {

class thread_pool;

struct device_factory_options {
  std::string job = "localhost";
  int task = 0;
  /// CPU devices to make (sessions and tests ask for several to place over).
  int cpu_device_count = 1;
  /// The intra-op pool the devices share (null: each makes its own).
  std::shared_ptr<thread_pool> intra_op;
  /// Test devices to make (devices/test_device.hpp); -1: as many as the environment variable
  /// ACTORFLOW_TEST_DEVICES says, none without it.
  int test_device_count = -1;
  gpu_options gpu;
};

/// What the factories made, and what they have to say about what they did not (why a process
/// has no GPU devices, say): for a log at verbose level, not errors.
struct made_devices {
  std::vector<std::shared_ptr<device>> devices;
  std::vector<std::string> notes;
};

class device_factory {
public:
  virtual ~device_factory() = default;
  /// "CPU", "GPU".
  virtual std::string type() const = 0;
  /// How much placement prefers this type for nodes no one pinned; higher first (TensorFlow's
  /// DeviceFactory priorities: GPU 210, CPU 70).
  virtual int priority() const = 0;
  /// This type's devices for the task; none (with a note in `made` saying why) is not an error.
  virtual status create(const device_factory_options& options, made_devices& made) = 0;
};

/// Registers a factory for every later make_task_devices; the CPU's (and, in a CUDA build, the
/// GPU's) are there from the start. Thread-safe.
void register_device_factory(std::shared_ptr<device_factory> factory);

/// The devices of every registered factory, in registration order; the first factory's error
/// stops it.
result<made_devices> make_task_devices(const device_factory_options& options);

/// Empty when the factories make a device of `type` with these options; otherwise why not (the
/// factories' notes, "no GPU devices: no CUDA driver (...)"), for skips and logs.
std::string why_no_device(const std::string& type, const device_factory_options& options);

/// The priority of `type`'s factory; 0 for types no factory makes. Thread-safe; what
/// placement_options::device_priority asks.
int device_type_priority(const std::string& type);

/// The name of device `id` of `type` in a task.
device_name task_device_name(const std::string& job, int task, const std::string& type, int id);

} // namespace actorflow

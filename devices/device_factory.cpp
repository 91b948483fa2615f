#include "devices/device_factory.hpp"

#include <algorithm>
#include <mutex>

namespace actorflow {

namespace {

class cpu_device_factory final : public device_factory {
public:
  std::string type() const override { return "CPU"; }
  status create(const device_factory_options& options, made_devices& made) override {
    for (int i = 0; i < std::max(1, options.cpu_device_count); ++i)
      made.devices.push_back(make_cpu_device(
        task_device_name(options.job, options.task, "CPU", i), options.intra_op));
    return {};
  }
};

/// Until a GPU device is built: no GPU devices, and a note saying why (no driver, nothing
/// visible, or GPUs this build cannot use yet).
class gpu_device_factory final : public device_factory {
public:
  std::string type() const override { return "GPU"; }
  status create(const device_factory_options&, made_devices& made) override {
    if (auto n = gpu_count(); n == 0)
      made.notes.push_back("no GPU devices: " + gpu_absence_reason());
    else
      made.notes.push_back("no GPU devices: the driver shows " + std::to_string(n) +
                           " GPU(s), but this build has no GPU device yet");
    return {};
  }
};

std::mutex registry_mutex;

std::vector<std::shared_ptr<device_factory>>& registry() {
  static std::vector<std::shared_ptr<device_factory>> factories{
    std::make_shared<cpu_device_factory>(), std::make_shared<gpu_device_factory>()};
  return factories;
}

} // namespace

void register_device_factory(std::shared_ptr<device_factory> factory) {
  std::lock_guard<std::mutex> guard{registry_mutex};
  registry().push_back(std::move(factory));
}

result<made_devices> make_task_devices(const device_factory_options& options) {
  std::vector<std::shared_ptr<device_factory>> factories;
  {
    std::lock_guard<std::mutex> guard{registry_mutex};
    factories = registry();
  }
  made_devices made;
  for (auto& factory : factories)
    if (auto st = factory->create(options, made); !st.ok())
      return st.with_context("making the " + factory->type() + " devices of /job:" + options.job +
                             "/task:" + std::to_string(options.task));
  return made;
}

device_name task_device_name(const std::string& job, int task, const std::string& type, int id) {
  device_name name;
  name.job = job;
  name.replica = 0;
  name.task = task;
  name.type = type;
  name.id = id;
  return name;
}

} // namespace actorflow

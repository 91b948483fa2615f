#include "devices/device_factory.hpp"

#include "devices/test_device.hpp"
#if defined(ACTORFLOW_HAVE_CUDA)
#include "devices/cuda/cuda_device.hpp"
#endif

#include <algorithm>
#include <cstdlib>
#include <mutex>

namespace actorflow {

namespace {

class cpu_device_factory final : public device_factory {
public:
  std::string type() const override { return "CPU"; }
  int priority() const override { return 70; }
  status create(const device_factory_options& options, made_devices& made) override {
    for (int i = 0; i < std::max(1, options.cpu_device_count); ++i)
      made.devices.push_back(make_cpu_device(
        task_device_name(options.job, options.task, "CPU", i), options.intra_op));
    return {};
  }
};

/// One GPU device per GPU CUDA shows the process (devices/cuda/cuda_device.hpp) in CUDA builds;
/// otherwise none. Where there are none, or a GPU cannot be used, a note says why (no driver,
/// nothing visible, a CUDA error, a build without CUDA).
class gpu_device_factory final : public device_factory {
public:
  std::string type() const override { return "GPU"; }
  int priority() const override { return 210; }
#if defined(ACTORFLOW_HAVE_CUDA)
  status create(const device_factory_options& options, made_devices& made) override {
    if (options.gpu.device_count == 0) {
      made.notes.push_back("no GPU devices: the session's device_count asks for none");
      return {};
    }
    // gpu_count() asks the driver without loading the CUDA runtime's state: no driver, no
    // CUDA calls at all.
    if (gpu_count() == 0)
      made.notes.push_back("no GPU devices: " + gpu_absence_reason());
    else
      make_cuda_devices(options, made);
    return {};
  }
#else
  status create(const device_factory_options&, made_devices& made) override {
    if (auto n = gpu_count(); n == 0)
      made.notes.push_back("no GPU devices: " + gpu_absence_reason());
    else
      made.notes.push_back("no GPU devices: the driver shows " + std::to_string(n) +
                           " GPU(s), but this build has no CUDA support");
    return {};
  }
#endif
};

/// Test devices where the options or ACTORFLOW_TEST_DEVICES ask for them.
class test_device_factory final : public device_factory {
public:
  std::string type() const override { return test_device_type; }
  /// Like a GPU: unpinned nodes go to it when it has their kernel.
  int priority() const override { return 200; }
  status create(const device_factory_options& options, made_devices& made) override {
    auto count = options.test_device_count;
    if (count < 0) {
      auto from_environment = count_from_environment();
      if (!from_environment)
        return from_environment.error();
      count = *from_environment;
    }
    if (count > max_test_devices)
      return make_error(errc::invalid_argument, std::to_string(count) +
                                                  " test devices asked for; at most " +
                                                  std::to_string(max_test_devices));
    test_device_options test;
    test.memory_fraction = options.gpu.per_process_gpu_memory_fraction;
    test.allow_growth = options.gpu.allow_growth;
    for (int i = 0; i < count; ++i)
      made.devices.push_back(make_test_device(
        task_device_name(options.job, options.task, test_device_type, i), options.intra_op, test));
    return {};
  }

private:
  static constexpr int max_test_devices = 16;

  static result<int> count_from_environment() {
    const char* text = std::getenv("ACTORFLOW_TEST_DEVICES");
    if (text == nullptr || *text == '\0')
      return 0;
    char* end = nullptr;
    auto value = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || value < 0 || value > max_test_devices)
      return make_error(errc::invalid_argument,
                        std::string{"ACTORFLOW_TEST_DEVICES='"} + text +
                          "' is not a number of test devices from 0 to " +
                          std::to_string(max_test_devices));
    return static_cast<int>(value);
  }
};

std::mutex registry_mutex;

std::vector<std::shared_ptr<device_factory>>& registry() {
  static std::vector<std::shared_ptr<device_factory>> factories{
    std::make_shared<cpu_device_factory>(), std::make_shared<gpu_device_factory>(),
    std::make_shared<test_device_factory>()};
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

std::string why_no_device(const std::string& type, const device_factory_options& options) {
  auto made = make_task_devices(options);
  if (!made)
    return made.error().to_string();
  for (auto& dev : made->devices)
    if (dev->type() == type)
      return {};
  std::string why;
  for (auto& note : made->notes)
    why += (why.empty() ? "" : "; ") + note;
  return why.empty() ? "no " + type + " device" : why;
}

int device_type_priority(const std::string& type) {
  std::lock_guard<std::mutex> guard{registry_mutex};
  for (auto& factory : registry())
    if (factory->type() == type)
      return factory->priority();
  return 0;
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

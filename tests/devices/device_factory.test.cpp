// Device factories: a task's devices come from every registered factory, named in the task,
// with notes (not errors) for types the process has none of.
#include "devices/device_factory.hpp"

#include <catch2/catch.hpp>

using namespace actorflow;

namespace {

/// Makes one device of type "XPU" (the CPU's implementation under another name) for tasks of
/// job "xpu-test", and fails for job "broken-test"; nothing for other jobs, so that the rest of
/// this test program's tasks are unaffected.
class xpu_factory final : public device_factory {
public:
  std::string type() const override { return "XPU"; }
  int priority() const override { return 5; }
  status create(const device_factory_options& options, made_devices& made) override {
    if (options.job == "broken-test")
      return make_error(errc::unavailable, "the XPU driver is gone");
    if (options.job == "xpu-test")
      made.devices.push_back(make_cpu_device(task_device_name(options.job, options.task, "XPU", 0),
                                             options.intra_op));
    return {};
  }
};

std::vector<std::string> names(const made_devices& made) {
  std::vector<std::string> out;
  for (auto& d : made.devices)
    out.push_back(d->full_name());
  return out;
}

} // namespace

TEST_CASE("the GPU count comes from the CUDA driver, with a reason when there is none",
          "[devices][factory]") {
  if (gpu_count() > 0) {
    CHECK(gpu_absence_reason().empty());
    return;
  }
  auto why = gpu_absence_reason();
  INFO(why);
  // Without libcuda.so.1 (this machine, CI) the reason names it; with a driver and no device
  // visible, it says so.
  bool no_driver = why.find("no CUDA driver") != std::string::npos && why.find("libcuda.so.1") != std::string::npos;
  bool none_visible = why.find("no CUDA device visible") != std::string::npos;
  CHECK((no_driver || none_visible));
}

TEST_CASE("a task's devices come from every registered factory, in order", "[devices][factory]") {
  device_factory_options options;
  options.job = "worker";
  options.task = 1;
  options.cpu_device_count = 2;
  auto made = make_task_devices(options);
  REQUIRE(made.ok());
  CHECK(names(*made) == std::vector<std::string>{"/job:worker/replica:0/task:1/device:CPU:0",
                                                 "/job:worker/replica:0/task:1/device:CPU:1"});
  // Without a GPU device type yet, the GPU factory makes none and says why, as a note for the
  // verbose log: no driver here, or GPUs this build cannot use.
  REQUIRE(made->notes.size() == 1);
  CHECK(made->notes[0].rfind("no GPU devices: ", 0) == 0);
  if (gpu_count() == 0)
    CHECK(made->notes[0].find(gpu_absence_reason()) != std::string::npos);

  // Once per process, however often this test runs in it.
  static const bool registered = [] {
    register_device_factory(std::make_shared<xpu_factory>());
    return true;
  }();
  (void)registered;
  // The registry knows the factory now, with its priority.
  CHECK(device_type_priority("XPU") == 5);
  options.job = "xpu-test";
  options.cpu_device_count = 1;
  auto with_xpu = make_task_devices(options);
  REQUIRE(with_xpu.ok());
  CHECK(names(*with_xpu) == std::vector<std::string>{"/job:xpu-test/replica:0/task:1/device:CPU:0",
                                                     "/job:xpu-test/replica:0/task:1/device:XPU:0"});
  CHECK(with_xpu->devices.back()->type() == "XPU");

  options.job = "broken-test";
  auto broken = make_task_devices(options);
  REQUIRE_FALSE(broken.ok());
  CHECK(broken.error().message().find("making the XPU devices of /job:broken-test/task:1") !=
        std::string::npos);
  CHECK(broken.error().message().find("the XPU driver is gone") != std::string::npos);
}

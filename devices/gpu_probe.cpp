// How many GPUs this process could use, asked of the CUDA driver itself (libcuda.so.1, loaded
// at run time), so that every build, with CUDA or without, can say why it has no GPU device:
// no driver, no device visible (CUDA_VISIBLE_DEVICES is the driver's to honour), or GPUs
// present that this build has no device for.
#include "devices/device.hpp"

#include <dlfcn.h>

#include <mutex>

namespace actorflow {

namespace {

struct probe_result {
  int count = 0;
  std::string reason;
};

probe_result probe_driver() {
  probe_result r;
  void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    const char* why = ::dlerror();
    r.reason = std::string{"no CUDA driver ("} + (why != nullptr ? why : "libcuda.so.1 not found") + ")";
    return r;
  }
  using init_fn = int (*)(unsigned int);
  using count_fn = int (*)(int*);
  auto init = reinterpret_cast<init_fn>(::dlsym(driver, "cuInit"));
  auto count = reinterpret_cast<count_fn>(::dlsym(driver, "cuDeviceGetCount"));
  if (init == nullptr || count == nullptr) {
    r.reason = "the CUDA driver lacks cuInit/cuDeviceGetCount";
  } else if (int err = init(0); err != 0) {
    // 100 is CUDA_ERROR_NO_DEVICE: nothing visible (CUDA_VISIBLE_DEVICES may hide them all).
    r.reason = err == 100 ? "no CUDA device visible (CUDA_VISIBLE_DEVICES?)"
                          : "the CUDA driver failed to start (cuInit error " + std::to_string(err) + ")";
  } else if (int err2 = count(&r.count); err2 != 0) {
    r.count = 0;
    r.reason = "cuDeviceGetCount failed (error " + std::to_string(err2) + ")";
  } else if (r.count == 0) {
    r.reason = "no CUDA device visible (CUDA_VISIBLE_DEVICES?)";
  }
  // The driver stays loaded: unloading it after cuInit is not supported.
  return r;
}

const probe_result& probed() {
  static std::once_flag once;
  static probe_result result;
  std::call_once(once, [] { result = probe_driver(); });
  return result;
}

} // namespace

int gpu_count() { return probed().count; }

std::string gpu_absence_reason() { return probed().reason; }

} // namespace actorflow

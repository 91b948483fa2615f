// Which device the kernel tests run on (support/kernel_test_util.hpp). A run asked to use a GPU
// in a process without one ends before any test, with CTest's "skipped" exit code and the
// reason, instead of failing every kernel test or passing them on the CPU.
#include "support/kernel_test_util.hpp"

#include "devices/device_factory.hpp"

#include <cstdio>
#include <cstdlib>

using namespace actorflow;
using namespace actorflow::testing;

namespace {

[[maybe_unused]] const bool gpu_run_checked = [] {
  if (kernel_test_device_type() != "GPU")
    return true;
  device_factory_options options;
  options.test_device_count = 0;
  if (auto why = why_no_device("GPU", options); !why.empty()) {
    std::printf("SKIPPED: the kernel tests on a GPU: %s\n", why.c_str());
    std::fflush(stdout);
    std::_Exit(77);
  }
  return true;
}();

} // namespace

TEST_CASE("kernel tests run on the device type the environment names", "[kernels]") {
  // The process has a device of that type (a GPU run without a GPU ended before any test).
  auto type = kernel_test_device_type();
  device_factory_options options;
  options.test_device_count = type == test_device_type ? 1 : 0;
  auto why = why_no_device(type, options);
  INFO(type << ": " << why);
  CHECK(why.empty());
  kernel_test_env env;
  CHECK(env.dev().type() == kernel_test_device_type());
}

#pragma once
/// Helpers for kernel tests: build a node by hand, make its kernel through the global registry
/// and run it on a CPU device; random inputs from a printed seed; float64 comparisons.
///   kernel_test_env env;
///   auto n = make_node("Add", "add", dtype::float32);
///   auto r = env.run(n, {a, b});                 // r.status, r.outputs
///   require_near(r.outputs[0], expected, 1e-6);
/// One env per test case; it owns a device with a small intra-op pool of its own: the CPU, or
/// the device type ACTORFLOW_KERNEL_TEST_DEVICE names ("TEST", "GPU"), so that every kernel
/// test runs on every device type (ggml's test-backend-ops): inputs are copied into the
/// device's memory and outputs back, and the float64 references stay on the host.

#include "devices/cuda/cuda_device.hpp"
#include "devices/device.hpp"
#include "devices/kernel.hpp"
#include "devices/test_device.hpp"
#include "devices/thread_pool.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace actorflow::testing {

/// A node as the executor sees it: op, name, kernel dtype, attributes, output types.
inline node make_node(std::string op, std::string name, dtype kernel_type,
                      std::map<std::string, attr_value> attrs = {},
                      std::vector<dtype> output_types = {}) {
  node n;
  n.name = std::move(name);
  n.op = std::move(op);
  n.kernel_type = kernel_type;
  n.attrs = std::move(attrs);
  n.output_types = output_types.empty() ? std::vector<dtype>{kernel_type} : std::move(output_types);
  return n;
}

/// What one kernel run produced.
struct kernel_run {
  actorflow::status status;
  std::vector<tensor> outputs;
};

inline device_name test_device_name(const std::string& type) {
  device_name name;
  name.job = "localhost";
  name.replica = 0;
  name.task = 0;
  name.type = type;
  name.id = 0;
  return name;
}

inline device_name test_cpu_name() { return test_device_name("CPU"); }

/// The device type kernel tests run on: ACTORFLOW_KERNEL_TEST_DEVICE, else "CPU".
inline std::string kernel_test_device_type() {
  const char* type = std::getenv("ACTORFLOW_KERNEL_TEST_DEVICE");
  return type != nullptr && *type != '\0' ? std::string{type} : std::string{"CPU"};
}

class kernel_test_env {
public:
  /// `intra_op_threads` threads besides the caller, so parallel paths run even on small hosts.
  explicit kernel_test_env(int intra_op_threads = 3)
    : pool_(std::make_shared<thread_pool>("test_intra_op", intra_op_threads)),
      type_(kernel_test_device_type()), device_(make_device(type_, pool_)) {}

  device& dev() { return *device_; }

  /// Makes the kernel for `n` on this env's device; fails the test when there is none.
  std::unique_ptr<op_kernel> make_kernel(const node& n) {
    auto k = kernel_registry::global().create(n, type_);
    INFO(k.error().to_string());
    REQUIRE(k.ok());
    return std::move(*k);
  }

  /// Runs an existing kernel once (step ids count up). Host inputs are copied into the
  /// device's memory first and its outputs back to the host, each wait bounded.
  kernel_run run(op_kernel& kernel, const node& n, std::vector<tensor> inputs) {
    for (auto& input : inputs)
      if (input.is_initialized())
        input = require_copied(copy_from_host_and_wait(*device_, input));
    last_input_data_.clear();
    for (auto& input : inputs)
      last_input_data_.push_back(input.raw_data());
    kernel_context ctx{n, *device_, next_step_++, std::move(inputs)};
    // The outcome is ctx.status(), returned below; only a device that never finishes fails here.
    auto outcome = compute_and_wait(*device_, kernel, ctx);
    REQUIRE(outcome.code() != errc::deadline_exceeded);
    auto outputs = ctx.outputs();
    last_output_data_.clear();
    for (auto& output : outputs)
      last_output_data_.push_back(output.raw_data());
    for (auto& output : outputs)
      output = require_copied(copy_to_host_and_wait(*device_, output));
    return {ctx.status(), std::move(outputs)};
  }

  /// Where output `i` of the last run was, in the device's memory (before its copy to the host).
  const void* last_output_data(int i) const {
    return last_output_data_.at(static_cast<std::size_t>(i));
  }
  /// Whether the last run's output `output` used input `input`'s buffer (as the kernel saw them,
  /// in the device's memory): the kernels that forward instead of copying.
  bool last_output_forwards_input(int output, int input) const {
    auto* data = last_output_data(output);
    return data != nullptr && data == last_input_data_.at(static_cast<std::size_t>(input));
  }

  /// Makes the kernel for `n` and runs it once.
  kernel_run run(const node& n, std::vector<tensor> inputs) {
    auto kernel = make_kernel(n);
    return run(*kernel, n, std::move(inputs));
  }

  /// Runs `n`, requires success, and returns output 0.
  tensor run_ok(const node& n, std::vector<tensor> inputs) {
    auto r = run(n, std::move(inputs));
    INFO("node '" << n.name << "' (" << n.op << "): " << r.status.to_string());
    REQUIRE(r.status.ok());
    REQUIRE(!r.outputs.empty());
    return r.outputs[0];
  }

  /// A device of `type` computing on `pool` (the test device, a GPU or the CPU).
  static std::unique_ptr<device> make_device(const std::string& type,
                                             std::shared_ptr<thread_pool> pool) {
    if (type == test_device_type)
      return make_test_device(test_device_name(type), std::move(pool), {});
    if (type == "GPU") {
      // CUDA device 0, taking memory as tests need it (the first device made fixes the card's
      // options for the process). Builds without CUDA say so here; kernel_devices.test.cpp
      // skips the GPU run before any test gets this far where there is no GPU device.
      gpu_options options;
      options.allow_growth = true;
      auto gpu = make_cuda_device(test_device_name(type), 0, std::move(pool), options);
      INFO(gpu.error().to_string());
      REQUIRE(gpu.ok());
      return std::move(*gpu);
    }
    INFO("ACTORFLOW_KERNEL_TEST_DEVICE names device type '" << type
                                                            << "', which kernel tests cannot make");
    REQUIRE(type == "CPU");
    return make_cpu_device(test_cpu_name(), std::move(pool));
  }
private:

  static tensor require_copied(result<tensor> copy) {
    INFO(copy.error().to_string());
    REQUIRE(copy.ok());
    return std::move(*copy);
  }

  std::shared_ptr<thread_pool> pool_;
  std::string type_;
  std::unique_ptr<device> device_;
  std::int64_t next_step_ = 1;
  // Raw addresses, not tensors: holding a reference would change what kernels that adopt an
  // unshared buffer (Assign) do.
  std::vector<const void*> last_input_data_;
  std::vector<const void*> last_output_data_;
};

/// Test data from a fixed seed; the seed is printed with every failure via INFO by the caller.
class test_random {
public:
  explicit test_random(std::uint32_t seed) : engine_(seed) {}

  /// Uniform values in [lo, hi) converted to T.
  template <class T>
  tensor uniform(tensor_shape shape, double lo = -1.0, double hi = 1.0) {
    tensor t{dtype_of<T>(), std::move(shape)};
    std::uniform_real_distribution<double> dist{lo, hi};
    T* p = t.data<T>();
    for (std::int64_t i = 0; i < t.num_elements(); ++i)
      p[i] = static_cast<T>(dist(engine_));
    return t;
  }

  /// Integers in [lo, hi].
  template <class T>
  tensor integers(tensor_shape shape, std::int64_t lo, std::int64_t hi) {
    tensor t{dtype_of<T>(), std::move(shape)};
    std::uniform_int_distribution<std::int64_t> dist{lo, hi};
    T* p = t.data<T>();
    for (std::int64_t i = 0; i < t.num_elements(); ++i)
      p[i] = static_cast<T>(dist(engine_));
    return t;
  }

private:
  std::mt19937 engine_;
};

/// All elements as float64, the reference type.
inline std::vector<double> as_doubles(const tensor& t) { return t.to_vector<double>(); }

/// Requires `actual` to have `shape` and every element within `tolerance` (absolute, plus the
/// same relative to the reference's magnitude) of `expected`.
inline void require_near(const tensor& actual, const tensor_shape& shape,
                         const std::vector<double>& expected, double tolerance) {
  REQUIRE(actual.is_initialized());
  REQUIRE(actual.shape() == shape);
  auto values = as_doubles(actual);
  REQUIRE(values.size() == expected.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    INFO("element " << i << ": got " << values[i] << ", expected " << expected[i]);
    if (std::isnan(expected[i])) {
      REQUIRE(std::isnan(values[i]));
      continue;
    }
    REQUIRE(std::abs(values[i] - expected[i]) <= tolerance * (1.0 + std::abs(expected[i])));
  }
}

} // namespace actorflow::testing

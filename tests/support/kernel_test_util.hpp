#pragma once
/// Helpers for kernel tests: build a node by hand, make its kernel through the global registry
/// and run it on a CPU device; random inputs from a printed seed; float64 comparisons.
///   kernel_test_env env;
///   auto n = make_node("Add", "add", dtype::float32);
///   auto r = env.run(n, {a, b});                 // r.status, r.outputs
///   require_near(r.outputs[0], expected, 1e-6);
/// One env per test case; it owns a CPU device with a small intra-op pool of its own.

#include "devices/device.hpp"
#include "devices/kernel.hpp"
#include "devices/thread_pool.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
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

inline device_name test_cpu_name() {
  device_name name;
  name.job = "localhost";
  name.replica = 0;
  name.task = 0;
  name.type = "CPU";
  name.id = 0;
  return name;
}

class kernel_test_env {
public:
  /// `intra_op_threads` threads besides the caller, so parallel paths run even on small hosts.
  explicit kernel_test_env(int intra_op_threads = 3)
    : pool_(std::make_shared<thread_pool>("test_intra_op", intra_op_threads)),
      device_(make_cpu_device(test_cpu_name(), pool_)) {}

  device& dev() { return *device_; }

  /// Makes the CPU kernel for `n`; fails the test when there is none.
  std::unique_ptr<op_kernel> make_kernel(const node& n) {
    auto k = kernel_registry::global().create(n, "CPU");
    INFO(k.error().to_string());
    REQUIRE(k.ok());
    return std::move(*k);
  }

  /// Runs an existing kernel once (step ids count up).
  kernel_run run(op_kernel& kernel, const node& n, std::vector<tensor> inputs) {
    kernel_context ctx{n, *device_, next_step_++, std::move(inputs)};
    device_->compute(kernel, ctx, [] {});
    return {ctx.status(), ctx.outputs()};
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

private:
  std::shared_ptr<thread_pool> pool_;
  std::unique_ptr<device> device_;
  std::int64_t next_step_ = 1;
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

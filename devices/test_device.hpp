#pragma once
/// The test device: a device that takes the GPU's path on machines without one. Its tensors
/// live in a memory space of its own (host memory underneath, carved by a bfc_allocator, but
/// tensor::on_host() is false, so every host-only accessor refuses them); its kernels are the
/// CPU's, run on a compute stream served by its own thread; copies in and out run on streams
/// of their own, ordered with events; completions arrive on a callback thread. So every CI run
/// covers the stream ordering, the completion callbacks, the copies on send/recv and fetch,
/// the allocator and the placement a GPU needs.
///   auto dev = make_test_device(task_device_name("worker", 0, "TEST", 0), pools.intra_op, {});
/// Tasks make them when device_factory_options::test_device_count (or the environment variable
/// ACTORFLOW_TEST_DEVICES) asks for some; placement prefers them over the CPU as it would a GPU.

#include "devices/device.hpp"

#include <cstddef>
#include <memory>

namespace actorflow {

class thread_pool;

/// The device type's name in device names ("/device:TEST:0") and the kernel registry, which
/// has every CPU kernel under it too (kernel_registry::global()).
inline constexpr const char* test_device_type = "TEST";

/// Sizes of a test device's memory, as a GPU's card and GPUOptions would give them.
struct test_device_options {
  /// The pretend card's memory.
  std::size_t card_bytes = std::size_t{256} << 20;
  /// Share of the card the allocator may use (per_process_gpu_memory_fraction); 0 or 1: all.
  double memory_fraction = 0;
  /// Grow the reservation as needed instead of taking it all at the start.
  bool allow_growth = false;
};

std::unique_ptr<device> make_test_device(device_name name, std::shared_ptr<thread_pool> intra_op,
                                         test_device_options options);

} // namespace actorflow

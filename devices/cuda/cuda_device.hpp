#pragma once
/// The CUDA GPU device: kernels launched on a compute stream, tensors in the card's memory (a
/// bfc_allocator over cudaMalloc), copies on a host-to-device and a device-to-host stream
/// ordered with events, completions from an event-polling thread.
///   auto gpu = make_cuda_device(task_device_name("worker", 0, "GPU", 0), 0, pools.intra_op, {});
///   if (!gpu) log(gpu.error().to_string());   // "built without CUDA", no driver, ...
/// Tasks get theirs from the GPU device factory (devices/device_factory.cpp), one per GPU that
/// CUDA shows the process. No CUDA header here: everything that includes one stays in
/// devices/cuda/.
///
/// Per card (CUDA ordinal), the process has one allocator, one set of streams, one cuBLAS
/// handle and one completion thread, shared by every device object made for that card
/// (TensorFlow's GPUProcessState and its stream groups): memory that one session frees and
/// another reuses is then ordered by the one compute stream. The first device made for a card
/// fixes its gpu_options.

#include "devices/device.hpp"
#include "devices/gpu_options.hpp"

#include <memory>

namespace actorflow {

class thread_pool;
struct device_factory_options;
struct made_devices;

/// A GPU device named `name` on CUDA device `cuda_ordinal` (after CUDA_VISIBLE_DEVICES).
/// `intra_op` may be null (the device makes its own). Errors say why there is no device: a
/// build without CUDA, a CUDA error (naming the call), a card this build has no code for.
result<std::unique_ptr<device>> make_cuda_device(device_name name, int cuda_ordinal,
                                                 std::shared_ptr<thread_pool> intra_op,
                                                 gpu_options options);

/// The GPU devices of a task: one per card CUDA shows, named task_device_name(job, task,
/// "GPU", i), with options.gpu. A card that cannot be used adds a note to `made` saying why;
/// that is not an error. Only in CUDA builds (the GPU device factory calls it).
void make_cuda_devices(const device_factory_options& options, made_devices& made);

} // namespace actorflow

// Every GPU kernel, registered under device type "GPU" (kernel_registry::global() calls this in
// CUDA builds).
#include "devices/cpu/kernels/cpu_kernels.hpp"
#include "devices/cuda/kernels/cuda_kernels.hpp"
#include "devices/kernel.hpp"

namespace actorflow {

namespace {

/// The CPU's kernels of ops that only pass tensor handles around and never touch the data
/// (Identity forwards its input, Reshape and ReshapeLike share the buffer under another shape,
/// VariableV2 outputs the variable's stored tensor, Placeholder only fails, NoOp does nothing;
/// the executor runs the control-flow primitives, LoopCond forwards its predicate, StackPush
/// and StackPop keep handles and read their indices in host memory):
/// they work on device memory as they are. A registry of their own, so that these and only
/// these are reused.
const kernel_registry& handle_kernels() {
  static const kernel_registry* registry = [] {
    auto* r = new kernel_registry;
    register_placeholder_kernels(*r);
    register_variable_kernels(*r);
    register_identity_kernels(*r);
    register_no_op_kernels(*r);
    register_reshape_kernels(*r);
    register_gradient_kernels(*r); // for ReshapeLike
    register_control_flow_kernels(*r);
    return r;
  }();
  return *registry;
}

} // namespace

void register_cuda_kernels(kernel_registry& registry) {
  for (const char* op : {"Placeholder", "VariableV2", "Identity", "StopGradient", "NoOp", "Reshape", "ReshapeLike",
                         "Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond",
                         "StackPush", "StackPop"})
    for (auto type : all_dtypes())
      if (handle_kernels().has(op, "CPU", type))
        registry.add({op, "GPU", type},
                     [](const node& n) { return handle_kernels().create(n, "CPU"); });
  cuda::register_constant_kernels(registry);
  cuda::register_matmul_kernels(registry);
  cuda::register_elementwise_kernels(registry);
  cuda::register_reduction_kernels(registry);
  cuda::register_softmax_kernels(registry);
  cuda::register_variable_update_kernels(registry);
  cuda::register_concat_kernels(registry);
  cuda::register_random_kernels(registry);
  cuda::register_all_reduce_kernels(registry);
  cuda::register_collective_reduce_kernels(registry);
  cuda::register_conv_kernels(registry);
  cuda::register_transpose_kernels(registry);
  cuda::register_shape_kernels(registry);
}

} // namespace actorflow

#include "devices/cpu/kernels/cpu_kernels.hpp"
#include "devices/kernel.hpp"

namespace actorflow {

// Explicit calls, not static registrars: the linker drops unreferenced objects of a static
// library, and their registrars with them.
void register_cpu_kernels(kernel_registry& registry) {
  register_constant_kernels(registry);
  register_placeholder_kernels(registry);
  register_variable_kernels(registry);
  register_assign_kernels(registry);
  register_identity_kernels(registry);
  register_no_op_kernels(registry);
  register_unary_kernels(registry);
  register_binary_kernels(registry);
  register_cast_kernels(registry);
  register_conv_kernels(registry);
  register_matmul_kernels(registry);
  register_fused_matmul_kernels(registry);
  register_fused_conv_kernels(registry);
  register_reduction_kernels(registry);
  register_argmax_kernels(registry);
  register_reshape_kernels(registry);
  register_concat_kernels(registry);
  register_softmax_kernels(registry);
  register_softmax_cross_entropy_kernels(registry);
  register_fill_kernels(registry);
  register_random_kernels(registry);
  register_apply_kernels(registry);
  register_sparse_kernels(registry);
  register_hash_embedding_kernels(registry);
  register_candidate_sampler_kernels(registry);
  register_gradient_kernels(registry);
  register_all_reduce_kernels(registry);
  register_collective_reduce_kernels(registry);
  register_checkpoint_shard_kernels(registry);
  register_control_flow_kernels(registry);
  register_transpose_kernels(registry);
  register_strided_slice_kernels(registry);
  register_shape_kernels(registry);
  register_select_kernels(registry);
  register_cumsum_kernels(registry);
}

} // namespace actorflow

#pragma once
/// The registration functions of the CPU kernel files, one per op family; internal to devices/.
///   kernel_registry r;
///   register_matmul_kernels(r);      // MatMul for float32, float64, int32, int64
/// register_cpu_kernels (declared in devices/kernel.hpp) calls every one of them.

namespace actorflow {

class kernel_registry;

void register_constant_kernels(kernel_registry& registry);   // Const
void register_placeholder_kernels(kernel_registry& registry); // Placeholder
void register_variable_kernels(kernel_registry& registry);   // VariableV2, IsVariableInitialized, _VariableGather
void register_assign_kernels(kernel_registry& registry);     // Assign, AssignAdd, AssignSub
void register_identity_kernels(kernel_registry& registry);   // Identity, StopGradient
void register_no_op_kernels(kernel_registry& registry);      // NoOp
void register_unary_kernels(kernel_registry& registry);      // Neg, Square, Sqrt, Exp, Log, Relu, Sigmoid, Tanh, Abs, Sign, Floor, Ceil, Round, Sin, Cos, Log1p, Expm1, IsNan, IsInf, IsFinite
void register_binary_kernels(kernel_registry& registry);     // Add, Sub, Mul, Div, Maximum, Minimum, Pow, FloorDiv, FloorMod, SquaredDifference, comparisons, LogicalAnd/Or
void register_select_kernels(kernel_registry& registry);     // SelectV2, Where
void register_cumsum_kernels(kernel_registry& registry);     // Cumsum
void register_cast_kernels(kernel_registry& registry);       // Cast
void register_matmul_kernels(kernel_registry& registry);     // MatMul
void register_conv_kernels(kernel_registry& registry);       // Conv2D (+ backprops), MaxPool, AvgPool (+ grads)
void register_fused_matmul_kernels(kernel_registry& registry); // _FusedMatMul (graph/fusion.hpp)
void register_fused_conv_kernels(kernel_registry& registry);   // _FusedConv2D (graph/fusion.hpp)
void register_reduction_kernels(kernel_registry& registry);  // Sum, Mean, Max, Min, Prod, ProdGrad
void register_argmax_kernels(kernel_registry& registry);     // ArgMax
void register_reshape_kernels(kernel_registry& registry);    // Reshape
void register_concat_kernels(kernel_registry& registry);     // ConcatV2, SplitToShapesOf
void register_softmax_kernels(kernel_registry& registry);    // Softmax
void register_softmax_cross_entropy_kernels(kernel_registry& registry); // SoftmaxCrossEntropyWithLogits
void register_fill_kernels(kernel_registry& registry);       // Fill
void register_random_kernels(kernel_registry& registry);     // RandomUniform, RandomStandardNormal, TruncatedNormal
void register_apply_kernels(kernel_registry& registry);      // ApplyGradientDescent, ApplyMomentum, ApplyAdam, ApplyAdagrad
void register_all_reduce_kernels(kernel_registry& registry);  // AllReduce
void register_collective_reduce_kernels(kernel_registry& registry); // CollectiveReduce
void register_checkpoint_shard_kernels(kernel_registry& registry); // SaveShard, RestoreShard
void register_control_flow_kernels(kernel_registry& registry); // Switch, Merge, Enter, Exit, NextIteration, LoopCond, LogicalNot, StackPush, StackPop, Gather
void register_hash_embedding_kernels(kernel_registry& registry); // HashEmbedding*, _HashShardIds
void register_sparse_kernels(kernel_registry& registry);     // IndexedSlices, Unique, UnsortedSegmentSum(Like), _DeduplicateSlices, Scatter*, SparseApply*
void register_candidate_sampler_kernels(kernel_registry& registry); // LogUniformCandidateSampler, SigmoidCrossEntropyWithLogits, _AccidentalHitMask
void register_gradient_kernels(kernel_registry& registry);   // AddN, ReluGrad, SigmoidGrad, TanhGrad, SumToShapeOf, BroadcastToShapeOf, ReshapeLike, OnesLike, ZerosLike
void register_transpose_kernels(kernel_registry& registry);  // Transpose
void register_strided_slice_kernels(kernel_registry& registry); // StridedSlice, StridedSliceGrad
void register_shape_kernels(kernel_registry& registry);      // Shape, Size, Rank

} // namespace actorflow

#pragma once
/// The registration functions of the GPU kernel files, one per family; internal to
/// devices/cuda/. No CUDA header here.
///   kernel_registry r;
///   register_cuda_kernels(r);     // every GPU kernel, under device type "GPU"
/// register_cuda_kernels (devices/cuda/kernels/register_cuda_kernels.cpp) calls every one of
/// them; kernel_registry::global() calls it in CUDA builds.

#include "graph/status.hpp"

namespace actorflow {

class kernel_registry;

/// Every GPU kernel.
void register_cuda_kernels(kernel_registry& registry);

namespace cuda {

void register_constant_kernels(kernel_registry& registry);    // Const
void register_matmul_kernels(kernel_registry& registry);      // MatMul
void register_elementwise_kernels(kernel_registry& registry); // unary and binary math, comparisons, LogicalAnd/Not, Gather, activation gradients, AddN, OnesLike, ZerosLike, Cast, Fill, BroadcastToShapeOf
void register_reduction_kernels(kernel_registry& registry);   // Sum, Mean, Max, SumToShapeOf, ArgMax
void register_softmax_kernels(kernel_registry& registry);     // Softmax, SoftmaxCrossEntropyWithLogits
void register_variable_update_kernels(kernel_registry& registry); // Assign, AssignAdd, AssignSub, ApplyGradientDescent, ApplyMomentum, ApplyAdam
void register_concat_kernels(kernel_registry& registry);      // ConcatV2, SplitToShapesOf
void register_random_kernels(kernel_registry& registry);      // RandomUniform, RandomStandardNormal, TruncatedNormal
void register_all_reduce_kernels(kernel_registry& registry);  // AllReduce (NCCL; none without nccl.h)
void register_collective_reduce_kernels(kernel_registry& registry); // CollectiveReduce (NCCL across tasks; none without nccl.h)
void register_conv_kernels(kernel_registry& registry);        // MaxPool, MaxPoolGrad, AvgPool, AvgPoolGrad; with cuDNN also Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter
void register_transpose_kernels(kernel_registry& registry);   // Transpose, StridedSlice, StridedSliceGrad
void register_shape_kernels(kernel_registry& registry);       // Shape, Size, Rank

/// Ok when this build's kernels can run on the current CUDA device; the error (naming the
/// call) when the binary has no code for its architecture. (elementwise.cu)
status check_kernel_image();

} // namespace cuda

} // namespace actorflow

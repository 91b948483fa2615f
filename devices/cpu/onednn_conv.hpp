#pragma once
/// float32 Conv2D and its two backprops on oneDNN's convolution primitives, for the CPU conv
/// kernels (devices/cpu/kernels/conv.cpp). Tensors stay NHWC (filters HWIO) at this boundary;
/// inside, the primitives run on the blocked layouts they prefer (2-12x faster than on NHWC
/// here, docs/devices.md "Which library the CPU kernels call"), with reorders in and out.
/// Primitives are made once per shape and cached for the process. oneDNN stays out of this
/// header.
///   if (!onednn_convolution(onednn_conv_pass::forward, sizes, x, filter, nullptr, y))
///     ... im2col + GEMM ...

#include "graph/conv_geometry.hpp"

#include <string>

namespace actorflow {

/// Conv2D (forward: x, filter -> y), Conv2DBackpropInput (input: filter, dy -> dx),
/// Conv2DBackpropFilter (filter: x, dy -> dfilter).
enum class onednn_conv_pass { forward, input, filter };

/// Whether the CPU conv kernels use oneDNN: yes unless ACTORFLOW_CPU_CONV=gemm (im2col + GEMM on
/// the BLAS) is set. Read on every call: kernels ask when they are made.
bool onednn_conv_wanted();

/// Runs one pass of the convolution `s` describes on the calling thread alone (onednn_conv.cpp
/// says why), writing all of `out` (y, dx or dfilter). Unused inputs may be null. False when
/// oneDNN cannot run it, or runs it slower than im2col + GEMM (the input gradient of fewer than
/// 4 channels): nothing written, the caller falls back; the first refusal by oneDNN is said on
/// stderr under ACTORFLOW_VERBOSE=1. Thread-safe.
bool onednn_convolution(onednn_conv_pass pass, const conv_sizes& s, const float* x,
                        const float* filter, const float* dy, float* out);

/// "oneDNN 2.6.3" (the library the convolutions run on), for the verbose start-up line.
std::string onednn_version();

} // namespace actorflow

#pragma once
/// float32 Conv2D and its two backprops on oneDNN's convolution primitives, for the CPU conv
/// kernels (devices/cpu/kernels/conv.cpp), and the mixed-precision (bf16) matmul for MatMul and
/// _FusedMatMul (docs/devices.md "Mixed precision"). Tensors stay NHWC (filters HWIO) at this boundary;
/// inside, the primitives run on the blocked layouts they prefer (2-12x faster than on NHWC
/// here, docs/devices.md "Which library the CPU kernels call"), with reorders in and out.
/// Primitives are made once per shape and cached for the process. oneDNN stays out of this
/// header.
///   if (!onednn_convolution(onednn_conv_pass::forward, sizes, x, filter, nullptr, y))
///     ... im2col + GEMM ...

#include "graph/conv_geometry.hpp"

#include <cstdint>
#include <string>

namespace actorflow {

struct node;

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
/// stderr under ACTORFLOW_VERBOSE=1. Thread-safe. With `bf16` (mixed precision, only when
/// onednn_bf16_available()), the inputs are rounded to bfloat16 and the primitive accumulates
/// and writes float32: on AMX tiles where the CPU has them; a convolution of fewer than 16 input
/// channels stays float32 (slower in bf16 here).
bool onednn_convolution(onednn_conv_pass pass, const conv_sizes& s, const float* x,
                        const float* filter, const float* dy, float* out, bool bf16 = false);

/// Whether oneDNN finds bf16 instructions on this CPU (AVX-512 BF16, or AMX): decided once per
/// process, the first call saying on stderr when there are none (the mixed-precision kernels
/// then compute in float32). DNNL_MAX_CPU_ISA=AVX512_CORE forces "none". Thread-safe.
bool onednn_bf16_available();

/// Whether the kernel made for `n` computes in bf16: the mixed-precision pass marked it
/// (graph/mixed_precision.hpp) and onednn_bf16_available(). Kernels ask when they are made.
bool onednn_bf16_wanted(const node& n);

/// C[m,n] = op(A) op(B) (+ bias[n]) (then Relu), A and B rounded to bfloat16, accumulated and
/// written in float32 (row-major, C's rows n long; lda/ldb the stored row lengths), on the
/// calling thread alone. Only when onednn_bf16_available(). `bias` may be null. False when
/// oneDNN cannot run it (nothing written; said once under ACTORFLOW_VERBOSE=1): the caller
/// computes in float32. Primitives are cached per shape. Thread-safe.
bool onednn_matmul_bf16(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n,
                        std::int64_t k, const float* a, std::int64_t lda, const float* b,
                        std::int64_t ldb, const float* bias, bool relu, float* c);

/// "oneDNN 2.6.3" (the library the convolutions run on), for the verbose start-up line.
std::string onednn_version();

} // namespace actorflow

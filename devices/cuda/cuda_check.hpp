#pragma once
/// The one way actorflow calls CUDA, cuBLAS and cuDNN: through a checking macro that turns a
/// failure into an error value naming the call, its file and line, and the library's own words.
///   status reserve(void** p, std::size_t bytes) {
///     AF_CUDA_RETURN_IF_ERROR(cudaMalloc(p, bytes));
///     return {};   // on failure: "cudaMalloc(p, bytes) failed at devices/cuda/x.cpp:12: out of memory (cudaErrorMemoryAllocation)"
///   }
/// Nothing here aborts the process (ggml's CUDA_CHECK_GEN, but returning instead of aborting).
/// The macros return from the enclosing function, which returns status or result<T>. This
/// header includes no CUDA header: every library reports success as 0, and the codes travel
/// to cuda_check.cpp as int, where the libraries' headers turn them into words.

#include "graph/status.hpp"

namespace actorflow::cuda {

/// The libraries whose calls the macros check.
enum class gpu_library { runtime, cublas, cudnn };

/// The error for a call to `library` that returned `code` (never 0): the call's text, the
/// file (from devices/ on) and line, and the library's description of the code. Out of memory
/// becomes errc::resource_exhausted, a missing driver or device errc::unavailable, anything
/// else errc::internal.
status call_failed(gpu_library library, int code, const char* call, const char* file, int line);

} // namespace actorflow::cuda

/// Shared by the three macros below; not for direct use.
#define AF_GPU_RETURN_IF_FAILED_(library, expr)                                                    \
  do {                                                                                             \
    const int af_gpu_code_ = static_cast<int>(expr);                                               \
    if (af_gpu_code_ != 0)                                                                         \
      return ::actorflow::cuda::call_failed(library, af_gpu_code_, #expr, __FILE__, __LINE__);     \
  } while (false)

/// Returns an error from the enclosing function when a CUDA runtime call (cudaError_t) fails.
#define AF_CUDA_RETURN_IF_ERROR(expr)                                                              \
  AF_GPU_RETURN_IF_FAILED_(::actorflow::cuda::gpu_library::runtime, expr)
/// The same for a cuBLAS call (cublasStatus_t).
#define AF_CUBLAS_RETURN_IF_ERROR(expr)                                                            \
  AF_GPU_RETURN_IF_FAILED_(::actorflow::cuda::gpu_library::cublas, expr)
/// The same for a cuDNN call (cudnnStatus_t).
#define AF_CUDNN_RETURN_IF_ERROR(expr)                                                             \
  AF_GPU_RETURN_IF_FAILED_(::actorflow::cuda::gpu_library::cudnn, expr)

// Turns the codes the checking macros catch into error values (devices/cuda/cuda_check.hpp).
#include "devices/cuda/cuda_check.hpp"

#include "devices/cuda/cublas_library.hpp"

#include <cuda_runtime_api.h>
#if defined(ACTORFLOW_HAVE_CUDNN)
#include <cudnn.h>
#endif

#include <cstring>
#include <string>

namespace actorflow::cuda {

namespace {

/// `file` from its "devices/" on: __FILE__ is absolute, which says more about the build
/// machine than about the code.
const char* project_relative(const char* file) {
  const char* best = nullptr;
  for (const char* p = std::strstr(file, "devices/"); p != nullptr; p = std::strstr(p + 1, "devices/"))
    best = p;
  return best != nullptr ? best : file;
}

struct described {
  errc code;
  std::string words;
};

described describe_runtime(int code) {
  auto e = static_cast<cudaError_t>(code);
  errc kind = errc::internal;
  if (e == cudaErrorMemoryAllocation)
    kind = errc::resource_exhausted;
  else if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ||
           e == cudaErrorDevicesUnavailable || e == cudaErrorInvalidDevice)
    kind = errc::unavailable;
  return {kind, std::string{cudaGetErrorString(e)} + " (" + cudaGetErrorName(e) + ")"};
}

described describe_cublas(int code) {
  auto s = static_cast<cublasStatus_t>(code);
  errc kind = s == CUBLAS_STATUS_ALLOC_FAILED ? errc::resource_exhausted : errc::internal;
  // cuBLAS is loaded at run time (cublas_library.hpp); a status can only come from it once it is.
  if (auto* lib = cublas_if_loaded())
    return {kind, std::string{lib->status_string(s)} + " (" + lib->status_name(s) + ")"};
  return {kind, "cuBLAS status " + std::to_string(code)};
}

described describe_cudnn(int code) {
#if defined(ACTORFLOW_HAVE_CUDNN)
  auto s = static_cast<cudnnStatus_t>(code);
  errc kind = s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
                  s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
                ? errc::resource_exhausted
                : errc::internal;
  return {kind, cudnnGetErrorString(s)};
#else
  return {errc::internal, "cuDNN status " + std::to_string(code)};
#endif
}

} // namespace

status call_failed(gpu_library library, int code, const char* call, const char* file, int line) {
  described d;
  switch (library) {
    case gpu_library::runtime: d = describe_runtime(code); break;
    case gpu_library::cublas: d = describe_cublas(code); break;
    case gpu_library::cudnn: d = describe_cudnn(code); break;
  }
  return make_error(d.code, std::string{call} + " failed at " + project_relative(file) + ":" +
                              std::to_string(line) + ": " + d.words);
}

} // namespace actorflow::cuda

#pragma once
/// cuBLAS, loaded with dlopen when the first GPU card opens instead of linked into every
/// program: libcublas pulls in libcublasLt (540 MB), whose start-up work costs each process
/// that links it about 0.2 s and 200 MB of resident memory before main (measured with an empty
/// C program linked against it), on machines with a GPU or without. TensorFlow loads its CUDA
/// libraries the same way.
///   auto blas = cublas();                          // result<const cublas_library*>
///   if (!blas) return blas.error();                // "cannot load libcublas.so.13: ..."
///   AF_CUBLAS_RETURN_IF_ERROR((*blas)->create(&handle));
/// Internal to devices/cuda/; includes cuBLAS's header for the functions' types only.

#include "graph/status.hpp"

#include <cublas_v2.h>

namespace actorflow::cuda {

/// The cuBLAS functions actorflow calls. Valid for the life of the process once loaded.
struct cublas_library {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasDgemm_v2) dgemm = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
};

/// The process's cuBLAS (libcublas.so.<the major version this build's headers have>), loaded
/// at the first call; the error, kept for later calls, says why it cannot be. Thread-safe.
result<const cublas_library*> cublas();

/// cuBLAS if a call to cublas() has loaded it, else null (for describing errors).
const cublas_library* cublas_if_loaded();

} // namespace actorflow::cuda

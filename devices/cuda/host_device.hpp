#pragma once
/// AF_HOST_DEVICE marks index arithmetic that both the CUDA kernels and the host (plain C++
/// unit tests) run, so that what the tests check is the code the GPU executes.
///   AF_HOST_DEVICE inline std::int64_t offset_of(const plan& p, std::int64_t i);
/// Under nvcc it is __host__ __device__; under a host compiler it is nothing.

#if defined(__CUDACC__)
#define AF_HOST_DEVICE __host__ __device__
#else
#define AF_HOST_DEVICE
#endif

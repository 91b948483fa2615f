#pragma once
// Device-side helpers of the GPU kernels (included by the .cu files only): the grid-stride loop
// and float/double overloads of the math functions, so that one template serves both types.
//   AF_GRID_STRIDE_LOOP(i, n) y[i] = exp_of(x[i]);

#include <cstdint>

/// Visits i in [0, n) across the whole grid, whatever its size (blocks_for caps the grid).
#define AF_GRID_STRIDE_LOOP(i, n)                                                                  \
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;        \
       i < (n); i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

namespace actorflow::cuda {

__device__ inline float exp_of(float x) { return expf(x); }
__device__ inline double exp_of(double x) { return exp(x); }
__device__ inline float log_of(float x) { return logf(x); }
__device__ inline double log_of(double x) { return log(x); }
__device__ inline float sqrt_of(float x) { return sqrtf(x); }
__device__ inline double sqrt_of(double x) { return sqrt(x); }
__device__ inline float tanh_of(float x) { return tanhf(x); }
__device__ inline double tanh_of(double x) { return tanh(x); }

} // namespace actorflow::cuda

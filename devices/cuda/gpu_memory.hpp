#pragma once
/// How much of a GPU's memory the process's allocator takes, from what cudaMemGetInfo says and
/// the session's gpu_options (TensorFlow's GPUProcessState rules). Plain arithmetic, no CUDA,
/// so unit tests check it on any machine.
///   auto options = gpu_bfc_options(free_bytes, total_bytes, session.gpu, &space);
///   bfc_allocator memory{"/device:GPU:0", make_cuda_region_source(0), options};

#include "devices/bfc_allocator.hpp"
#include "devices/gpu_options.hpp"

#include <algorithm>
#include <cstddef>

namespace actorflow::cuda {

/// What the default limit leaves free for the CUDA context's own needs, cuBLAS's workspace,
/// cuDNN and other processes' contexts (TensorFlow 1.x kept max(300 MiB, 5%) of free memory).
inline constexpr std::size_t gpu_memory_reserve_bytes = std::size_t{300} << 20;

/// The most bytes the allocator of a card with `free_bytes` of `total_bytes` free may take:
///   0 < fraction < 1:  total * fraction (per_process_gpu_memory_fraction), but never more than
///                      is free, since taking it in one cudaMalloc would fail outright;
///   otherwise:         free minus gpu_memory_reserve_bytes, or half of what is free where that
///                      is less than twice the reserve.
inline std::size_t gpu_memory_limit(std::size_t free_bytes, std::size_t total_bytes,
                                    double fraction) {
  if (fraction > 0 && fraction < 1) {
    auto share = static_cast<std::size_t>(static_cast<double>(total_bytes) * fraction);
    return std::min(share, free_bytes);
  }
  auto reserve = std::min(gpu_memory_reserve_bytes, free_bytes / 2);
  return free_bytes - reserve;
}

/// The bfc_options of a card's allocator: the limit above; with allow_growth, regions as
/// tensors need them (starting small), else the whole limit at once. `space` names the card.
inline bfc_options gpu_bfc_options(std::size_t free_bytes, std::size_t total_bytes,
                                   const gpu_options& options, const memory_space* space) {
  bfc_options o;
  o.memory_limit = gpu_memory_limit(free_bytes, total_bytes,
                                    options.per_process_gpu_memory_fraction);
  o.allow_growth = options.allow_growth;
  o.space = space;
  return o;
}

} // namespace actorflow::cuda

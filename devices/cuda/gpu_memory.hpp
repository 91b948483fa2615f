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

/// What the default limit leaves free of `free_bytes` for the CUDA context's own needs, kernel
/// modules loaded on first use, cuBLAS's workspace, cuDNN's handle and engines, NCCL's buffers
/// and other processes' contexts: TensorFlow 1.x's rule (MinSystemMemory), 225 MiB below 2 GiB
/// free, else max(300 MiB, 5% of what is free) (7 GiB of an empty 141 GiB H200); never more
/// than half of what is free.
inline std::size_t gpu_memory_reserve(std::size_t free_bytes) {
  constexpr std::size_t mib = std::size_t{1} << 20;
  auto reserve = free_bytes < (std::size_t{2} << 30) ? 225 * mib
                                                      : std::max(300 * mib, free_bytes / 20);
  return std::min(reserve, free_bytes / 2);
}

/// The most bytes the allocator of a card with `free_bytes` of `total_bytes` free may take:
///   0 < fraction < 1:  total * fraction (per_process_gpu_memory_fraction), but never more than
///                      is free, since taking it in one cudaMalloc would fail outright;
///   otherwise:         free minus gpu_memory_reserve(free).
inline std::size_t gpu_memory_limit(std::size_t free_bytes, std::size_t total_bytes,
                                    double fraction) {
  if (fraction > 0 && fraction < 1) {
    auto share = static_cast<std::size_t>(static_cast<double>(total_bytes) * fraction);
    return std::min(share, free_bytes);
  }
  return free_bytes - gpu_memory_reserve(free_bytes);
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

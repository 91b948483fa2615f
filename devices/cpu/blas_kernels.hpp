#pragma once
/// Which of the BLAS's kernels GEMMs run on, chosen from what the CPU can execute, never from
/// its model number. Debian's OpenBLAS (built with DYNAMIC_ARCH) picks its kernels by CPU model
/// when it loads, and a model newer than its release gets the 2004 Prescott kernels (a fifth of
/// the speed on a 2023 Xeon). actorflow checks that choice before the first GEMM and, where
/// OpenBLAS chose narrower kernels than the CPU runs, switches it to the widest ones
/// (Cooperlake: AVX-512 with BF16; SkylakeX: AVX-512; Haswell: AVX2 and FMA; ...).
/// ACTORFLOW_BLAS_CORE=NAME forces a core type (one of OpenBLAS's, e.g. Haswell or Prescott);
/// one the CPU cannot run is refused, and the widest is kept.
///   const auto& k = blas_kernels();    // chosen once per process
///   log_verbose(k.summary);            // "gemm: OpenBLAS 0.3.21 SkylakeX (...)"

#include "devices/cpu/cpu_features.hpp"

#include <string>
#include <vector>

namespace actorflow {

struct blas_kernel_choice {
  std::string library_chose; // the core type OpenBLAS picked itself ("Prescott")
  std::string widest;        // the widest core type this CPU runs ("SkylakeX")
  std::string running;       // the core type GEMMs run on after the choice
  std::string forced;        // ACTORFLOW_BLAS_CORE, when set
  std::string problem;       // why a forced or wanted choice was not taken; empty when none
  /// "cpu: <features>; gemm: OpenBLAS 0.3.21 SkylakeX (OpenBLAS chose Prescott; switched to the
  /// widest kernels this CPU runs); conv: oneDNN 2.6.3".
  std::string summary;
};

/// The choice for this process, made once (thread-safe); the CPU device makes it before its
/// first kernel runs.
const blas_kernel_choice& blas_kernels();

/// OpenBLAS's core types this build offers, narrowest first, with what each needs of the CPU.
/// For tests and the comparison in docs/devices.md.
std::vector<std::string> blas_core_types();

/// The widest of blas_core_types() that `cpu` runs.
std::string widest_blas_core(const cpu_features& cpu);

/// Whether `cpu` can run core type `core` (case-insensitive); false for an unknown name.
bool cpu_runs_blas_core(const cpu_features& cpu, const std::string& core);

/// Makes the choice again, as blas_kernels() did: `forced` (empty: none) or else the widest
/// core when the BLAS's own (`gotoblas_corename`) is narrower. Not thread-safe against GEMMs
/// running meanwhile: for tests that set the library's core first, and for blas_kernels().
blas_kernel_choice choose_blas_kernels(const cpu_features& cpu, const std::string& forced);

/// The core type the BLAS runs now.
std::string running_blas_core();

/// Sets the BLAS's core type (OpenBLAS's own mechanism: OPENBLAS_CORETYPE, read again by its
/// dispatcher); false when it did not take it. Not thread-safe against GEMMs running meanwhile.
bool set_blas_core(const std::string& core);

} // namespace actorflow

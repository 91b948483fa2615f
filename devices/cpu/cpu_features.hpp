#pragma once
/// What this CPU can execute, from CPUID and the OS's saved-state mask (XGETBV): a feature
/// counts only when the OS also saves its registers (AVX-512 on a kernel that does not is off).
///   auto cpu = detect_cpu_features();
///   if (cpu.avx512_core()) ...   // F, CD, BW, DQ, VL: what OpenBLAS's SkylakeX kernels use

#include <string>

namespace actorflow {

struct cpu_features {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD", ...
  std::string brand;   // "Intel(R) Xeon(R) Processor"
  int family = 0, model = 0;
  bool sse3 = false, ssse3 = false, sse4_1 = false, sse4_2 = false;
  bool avx = false, avx2 = false, fma = false;
  bool avx512f = false, avx512cd = false, avx512bw = false, avx512dq = false, avx512vl = false;
  bool avx512_vnni = false, avx512_bf16 = false, avx512_fp16 = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;

  /// AVX-512 F, CD, BW, DQ and VL together (Skylake-SP and later, Zen 4).
  bool avx512_core() const { return avx512f && avx512cd && avx512bw && avx512dq && avx512vl; }
  /// One line for logs: "GenuineIntel family 6 model 207 (Intel(R) Xeon(R) Processor): AVX2 FMA
  /// AVX-512 (F CD BW DQ VL VNNI BF16 FP16) AMX (BF16 INT8)".
  std::string summary() const;
};

/// This CPU's features (CPUID is read once; later calls return the same).
const cpu_features& detect_cpu_features();

} // namespace actorflow

#pragma once
/// The epilogue of the fused GEMM kernels (fused_matmul.cpp, fused_conv.cpp): adds a bias to
/// each row of C and applies Relu, in one pass over rows the GEMM has just written (so they are
/// still in cache). Internal to the CPU kernels.

#include <algorithm>
#include <cstdint>
#include <string>

namespace actorflow::cpu {

/// GEMM outputs up to this many bytes go through the epilogue while still in L2: the fused
/// kernels cut larger outputs into row blocks of about this size.
inline constexpr std::int64_t epilogue_block_bytes = 256 * 1024;

/// Rows of an n-column output of T per block (at least 16 rows, so that GEMM stays efficient).
template <class T>
std::int64_t epilogue_block_rows(std::int64_t n) {
  return std::max<std::int64_t>(16, epilogue_block_bytes / static_cast<std::int64_t>(sizeof(T)) /
                                      std::max<std::int64_t>(1, n));
}

/// c[r, j] = c[r, j] + bias[j], then max(., 0) when `relu`, for rows [0, rows) of width n.
template <class T>
void bias_epilogue(T* c, std::int64_t rows, std::int64_t n, const T* bias, bool relu) {
  for (std::int64_t r = 0; r < rows; ++r) {
    T* row = c + r * n;
    if (relu)
      for (std::int64_t j = 0; j < n; ++j)
        row[j] = std::max(row[j] + bias[j], T{0});
    else
      for (std::int64_t j = 0; j < n; ++j)
        row[j] += bias[j];
  }
}

/// Whether a fused node's attr fused_ops ("BiasAdd" or "BiasAdd,Relu") ends with a Relu.
inline bool fuses_relu(const std::string& fused_ops) {
  return fused_ops.size() >= 4 && fused_ops.compare(fused_ops.size() - 4, 4, "Relu") == 0;
}

} // namespace actorflow::cpu

#pragma once
/// The bias and Relu of the fused GEMM kernels (fused_matmul.cpp, fused_conv.cpp), block by
/// block of C rows: fill_bias writes the bias into every row, the GEMM adds the product
/// (beta = 1), relu_in_place clips the rows while they are still in cache. Measured against
/// a GEMM with beta = 0 followed by one add-and-clip pass: 3-19% faster on the MLP's and CNN's
/// shapes (OpenBLAS clears C itself before a beta = 0 product, so the bias costs no extra pass);
/// only the 10-column logits were 8% slower. Internal to the CPU kernels.

#include "devices/cpu/kernels/kernel_util.hpp"

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

/// c[r, j] = bias[j] for rows [0, rows) of width n.
template <class T>
void fill_bias(T* c, std::int64_t rows, std::int64_t n, const T* bias) {
  for (std::int64_t r = 0; r < rows; ++r)
    std::copy(bias, bias + n, c + r * n);
}

/// c[r, j] += bias[j] for rows [0, rows) of width n (an output another library wrote).
template <class T>
void add_bias(T* c, std::int64_t rows, std::int64_t n, const T* bias) {
  for (std::int64_t r = 0; r < rows; ++r, c += n)
    for (std::int64_t j = 0; j < n; ++j)
      c[j] += bias[j];
}

/// c = max(c, 0) over `count` elements.
template <class T>
void relu_in_place(T* c, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i)
    c[i] = std::max(c[i], T{0});
}

/// ReluGrad on rows [0, rows) of width n in place: c = c where y > 0, else 0 (y: the forward
/// Relu's output). With `column_sums` (n of them), also adds each row of the result into them:
/// the bias gradient, while the rows are in cache.
template <class T>
void relu_grad_in_place(T* c, const T* y, std::int64_t rows, std::int64_t n, T* column_sums) {
  for (std::int64_t r = 0; r < rows; ++r, c += n, y += n) {
    // ReluGrad's own rule, through Eigen as its kernel: a multiply by the 0/1 mask vectorises
    // (a plain loop compiled to a branch per element and cost more than the kernel it replaces).
    auto row = view(c, n);
    row *= (view(y, n) > T{0}).template cast<T>();
    if (column_sums != nullptr)
      view(column_sums, n) += row;
  }
}

/// Whether a fused gradient's attr fused_ops ("ReluGrad" or "ReluGrad,BiasAddGrad") also
/// yields the bias gradient.
inline bool fuses_bias_grad(const std::string& fused_ops) {
  return fused_ops.find("BiasAddGrad") != std::string::npos;
}

/// Whether a fused node's attr fused_ops ("BiasAdd" or "BiasAdd,Relu") ends with a Relu.
inline bool fuses_relu(const std::string& fused_ops) {
  return fused_ops.size() >= 4 && fused_ops.compare(fused_ops.size() - 4, 4, "Relu") == 0;
}

} // namespace actorflow::cpu

#pragma once
/// MatMul's row-major operands as the column-major GEMM that cuBLAS computes. A row-major
/// [r, c] matrix with row length ld is, read column-major, its transpose [c, r] with the same
/// ld; so C = op(A) op(B) in row-major is C^T = op(B)^T op(A)^T in column-major, which is one
/// cuBLAS call with B first and no copy or transpose kernel.
///   auto g = column_major_gemm_for(false, true, m, n, k, a.shape().dim(1), b.shape().dim(1));
///   cublasSgemm(h, g.transpose_first ? CUBLAS_OP_T : CUBLAS_OP_N, ..., g.m, g.n, g.k,
///               &one, b_data, g.ld_first, a_data, g.ld_second, &zero, c_data, g.ld_out);
/// No CUDA here: unit tests check the mapping against a reference product on the CPU.

#include <cstdint>

namespace actorflow::cuda {

/// The arguments of a column-major GEMM out = op(first) op(second), [m, k] x [k, n], where
/// `first` is MatMul's B and `second` its A.
struct column_major_gemm {
  bool transpose_first = false;
  bool transpose_second = false;
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t ld_first = 0;
  std::int64_t ld_second = 0;
  std::int64_t ld_out = 0;
};

/// The column-major GEMM for row-major C[m, n] = op(A)[m, k] op(B)[k, n], where A's stored rows
/// have `a_row_length` elements (a.shape().dim(1)) and B's `b_row_length`.
inline column_major_gemm column_major_gemm_for(bool transpose_a, bool transpose_b, std::int64_t m,
                                               std::int64_t n, std::int64_t k,
                                               std::int64_t a_row_length,
                                               std::int64_t b_row_length) {
  column_major_gemm g;
  // Column-major, stored B is B^T; op(B)^T is that matrix itself unless B is transposed.
  g.transpose_first = transpose_b;
  g.transpose_second = transpose_a;
  g.m = n;
  g.n = m;
  g.k = k;
  g.ld_first = b_row_length;
  g.ld_second = a_row_length;
  g.ld_out = n;
  return g;
}

} // namespace actorflow::cuda

#pragma once
/// Row-major GEMM on the BLAS for the CPU kernels (MatMul, Conv2D and its gradients):
///   gemm(false, true, m, n, k, 1.f, a, lda, b, ldb, 0.f, c, ldc);   // C = A B^T
/// C[m,n] = alpha op(A) op(B) + beta C; lda/ldb/ldc are the stored row lengths. Internal to the
/// CPU kernels: it brings in cblas.h.

#include "graph/status.hpp"
#include "graph/tensor_shape.hpp"

#include <cblas.h>

#include <climits>
#include <cstdint>
#include <string>

namespace actorflow::cpu {

/// The sizes of C[m,n] = op(A[.., k]) op(B[k, ..]).
struct gemm_dims {
  std::int64_t m = 0, n = 0, k = 0;
};

/// gemm_dims of two matrices transposed as asked: an error naming both shapes when either is
/// not a matrix (`op` names the op), when the inner dimensions differ, or when one exceeds the
/// BLAS's int range.
inline result<gemm_dims> gemm_dims_of(const std::string& op, const tensor_shape& a,
                                      bool transpose_a, const tensor_shape& b, bool transpose_b) {
  if (a.rank() != 2 || b.rank() != 2)
    return make_error(errc::invalid_argument, op + " needs two matrices, got shapes " +
                                                a.to_string() + " and " + b.to_string());
  gemm_dims d;
  d.m = a.dim(transpose_a ? 1 : 0);
  d.k = a.dim(transpose_a ? 0 : 1);
  d.n = b.dim(transpose_b ? 0 : 1);
  if (d.k != b.dim(transpose_b ? 1 : 0))
    return make_error(errc::invalid_argument,
                      "Matrix size-incompatible: In[0]: " + a.to_string() +
                        (transpose_a ? " (transposed)" : "") + ", In[1]: " + b.to_string() +
                        (transpose_b ? " (transposed)" : ""));
  for (auto size : {d.m, d.n, d.k})
    if (size > INT_MAX)
      return make_error(errc::invalid_argument, "MatMul dimension " + std::to_string(size) +
                                                  " exceeds the BLAS's int range");
  return d;
}

inline void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n,
                 std::int64_t k, float alpha, const float* a, std::int64_t lda, const float* b,
                 std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
              transpose_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda),
              b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

inline void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n,
                 std::int64_t k, double alpha, const double* a, std::int64_t lda, const double* b,
                 std::int64_t ldb, double beta, double* c, std::int64_t ldc) {
  cblas_dgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
              transpose_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda),
              b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

} // namespace actorflow::cpu

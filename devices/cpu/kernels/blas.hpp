#pragma once
/// Row-major GEMM on the BLAS for the CPU kernels (MatMul, Conv2D and its gradients):
///   gemm(false, true, m, n, k, 1.f, a, lda, b, ldb, 0.f, c, ldc);   // C = A B^T
/// C[m,n] = alpha op(A) op(B) + beta C; lda/ldb/ldc are the stored row lengths. Internal to the
/// CPU kernels: it brings in cblas.h.

#include <cblas.h>

#include <cstdint>

namespace actorflow::cpu {

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

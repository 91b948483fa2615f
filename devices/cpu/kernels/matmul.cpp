// MatMul: float32/float64 through the BLAS (cblas_sgemm/dgemm), integers through Eigen.
#include "devices/cpu/kernels/blas.hpp"
#include "devices/cpu/kernels/kernel_util.hpp"
#include "devices/cpu/onednn_conv.hpp"

#include <climits>
#include <type_traits>

namespace actorflow {

namespace {

using namespace cpu;

template <class T>
using row_major_matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// C[m,n] = op(A) op(B) with row-major operands; lda/ldb are the stored row lengths.
void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* c) {
  cpu::gemm(transpose_a, transpose_b, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
}

void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
          const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double* c) {
  cpu::gemm(transpose_a, transpose_b, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, n);
}

template <class T>
void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
          const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T* c) {
  // Integer products are rare (index arithmetic); Eigen's generic product is plenty.
  using matrix_map = Eigen::Map<const row_major_matrix<T>>;
  matrix_map ma(a, transpose_a ? k : m, lda);
  matrix_map mb(b, transpose_b ? n : k, ldb);
  Eigen::Map<row_major_matrix<T>> mc(c, m, n);
  if (transpose_a && transpose_b)
    mc.noalias() = ma.transpose() * mb.transpose();
  else if (transpose_a)
    mc.noalias() = ma.transpose() * mb;
  else if (transpose_b)
    mc.noalias() = ma * mb.transpose();
  else
    mc.noalias() = ma * mb;
}

template <class T>
class matmul_kernel : public op_kernel {
public:
  bool is_expensive() const override { return true; }
  explicit matmul_kernel(const node& n)
    : op_kernel(n), transpose_a_(n.attr_or<bool>("transpose_a", false)),
      transpose_b_(n.attr_or<bool>("transpose_b", false)),
      bf16_(std::is_same_v<T, float> && onednn_bf16_wanted(n)) {}

  void compute(kernel_context& ctx) override {
    if (!check_inputs(ctx, 2, dtype_of<T>()))
      return;
    const tensor& a = ctx.input(0);
    const tensor& b = ctx.input(1);
    auto dims = gemm_dims_of("MatMul", a.shape(), transpose_a_, b.shape(), transpose_b_);
    if (!dims) {
      ctx.fail(dims.error());
      return;
    }
    auto [m, n, k] = *dims;
    tensor out = ctx.allocate_output(0, dtype_of<T>(), tensor_shape{m, n});
    if (m == 0 || n == 0)
      return;
    if (k == 0) {
      view(out.data<T>(), m * n).setZero();
      return;
    }
    if constexpr (std::is_same_v<T, float>)
      if (bf16_ && onednn_matmul_bf16(transpose_a_, transpose_b_, m, n, k, a.data<T>(),
                                      a.shape().dim(1), b.data<T>(), b.shape().dim(1), nullptr,
                                      false, out.data<T>()))
        return; // else (oneDNN declined) float32 on the BLAS
    gemm(transpose_a_, transpose_b_, m, n, k, a.data<T>(), a.shape().dim(1), b.data<T>(),
         b.shape().dim(1), out.data<T>());
  }

private:
  bool transpose_a_;
  bool transpose_b_;
  /// Mixed precision (graph/mixed_precision.hpp), decided when the kernel is made.
  bool bf16_;
};

} // namespace

void register_matmul_kernels(kernel_registry& registry) {
  add_typed_kernels<matmul_kernel, float, double, std::int32_t, std::int64_t>(registry, "MatMul");
}

} // namespace actorflow

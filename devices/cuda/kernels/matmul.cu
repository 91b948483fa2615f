// MatMul on the GPU: float32 and float64 through cuBLAS, the row-major product as the
// column-major one cuBLAS computes (devices/cuda/gemm_args.hpp). Semantics and messages are the
// CPU kernel's (devices/cpu/kernels/matmul.cpp). Integer products have no GPU kernel (nor in
// TensorFlow): placement keeps them on the CPU. The cuBLAS handle computes in plain float32
// (no TF32), see devices/cuda/cuda_device.cpp.
#include "devices/cuda/cublas_library.hpp"
#include "devices/cuda/cuda_kernel_util.hpp"
#include "devices/cuda/gemm_args.hpp"
#include "devices/cuda/kernels/cuda_kernels.hpp"

#include <climits>

namespace actorflow::cuda {

namespace {

// --- cuBLAS --------------------------------------------------------------------------------

cublasOperation_t operation(bool transpose) { return transpose ? CUBLAS_OP_T : CUBLAS_OP_N; }

status gemm(const cublas_library& blas, cublasContext* handle, const column_major_gemm& g,
            const float* first, const float* second, float* out) {
  const float one = 1.0f;
  const float zero = 0.0f;
  AF_CUBLAS_RETURN_IF_ERROR(blas.sgemm(
    handle, operation(g.transpose_first), operation(g.transpose_second), static_cast<int>(g.m),
    static_cast<int>(g.n), static_cast<int>(g.k), &one, first, static_cast<int>(g.ld_first),
    second, static_cast<int>(g.ld_second), &zero, out, static_cast<int>(g.ld_out)));
  return {};
}

status gemm(const cublas_library& blas, cublasContext* handle, const column_major_gemm& g,
            const double* first, const double* second, double* out) {
  const double one = 1.0;
  const double zero = 0.0;
  AF_CUBLAS_RETURN_IF_ERROR(blas.dgemm(
    handle, operation(g.transpose_first), operation(g.transpose_second), static_cast<int>(g.m),
    static_cast<int>(g.n), static_cast<int>(g.k), &one, first, static_cast<int>(g.ld_first),
    second, static_cast<int>(g.ld_second), &zero, out, static_cast<int>(g.ld_out)));
  return {};
}

// --- entry point ---------------------------------------------------------------------------

template <class T>
class matmul_kernel final : public cuda_kernel {
public:
  explicit matmul_kernel(const node& n)
    : cuda_kernel(n), transpose_a_(n.attr_or<bool>("transpose_a", false)),
      transpose_b_(n.attr_or<bool>("transpose_b", false)) {}

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_inputs(ctx, 2, dtype_of<T>()));
    const tensor& a = ctx.input(0);
    const tensor& b = ctx.input(1);
    if (a.shape().rank() != 2 || b.shape().rank() != 2)
      return make_error(errc::invalid_argument, "MatMul needs two matrices, got shapes " +
                                                  a.shape().to_string() + " and " +
                                                  b.shape().to_string());
    auto m = a.shape().dim(transpose_a_ ? 1 : 0);
    auto k = a.shape().dim(transpose_a_ ? 0 : 1);
    auto k_b = b.shape().dim(transpose_b_ ? 1 : 0);
    auto n = b.shape().dim(transpose_b_ ? 0 : 1);
    if (k != k_b)
      return make_error(errc::invalid_argument,
                        "Matrix size-incompatible: In[0]: " + a.shape().to_string() +
                          (transpose_a_ ? " (transposed)" : "") + ", In[1]: " +
                          b.shape().to_string() + (transpose_b_ ? " (transposed)" : ""));
    for (auto d : {m, n, k, a.shape().dim(1), b.shape().dim(1)})
      if (d > INT_MAX)
        return make_error(errc::invalid_argument, "MatMul dimension " + std::to_string(d) +
                                                    " exceeds cuBLAS's int range");
    tensor out = ctx.allocate_output(0, dtype_of<T>(), tensor_shape{m, n});
    if (m == 0 || n == 0)
      return {};
    if (k == 0) {
      AF_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.raw_data(), 0, out.bytes(), stream));
      return {};
    }
    // The handle is bound to `stream` (the device's compute stream).
    auto g = column_major_gemm_for(transpose_a_, transpose_b_, m, n, k, a.shape().dim(1),
                                   b.shape().dim(1));
    return with_cublas(ctx, [&](const cublas_library& blas, cublasContext* handle) {
      return gemm(blas, handle, g, b.data<T>(), a.data<T>(), out.data<T>());
    });
  }

private:
  bool transpose_a_;
  bool transpose_b_;
};

} // namespace

void register_matmul_kernels(kernel_registry& registry) {
  registry.add({"MatMul", "GPU", dtype::float32}, &make_kernel<matmul_kernel<float>>);
  registry.add({"MatMul", "GPU", dtype::float64}, &make_kernel<matmul_kernel<double>>);
}

} // namespace actorflow::cuda

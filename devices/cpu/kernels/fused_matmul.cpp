// _FusedMatMul (graph/fusion.hpp): MatMul + BiasAdd (+ Relu) as one GEMM onto C filled with
// the bias, then Relu over each block of C while in cache; float32 and float64 through the BLAS. Inputs: a, b, bias; attrs
// transpose_a, transpose_b, fused_ops.
// _FusedMatMulReluGrad: the backward GEMM of a layer's input gradient + ReluGrad (+ the bias
// gradient below it), block by block of C rows: the GEMM writes the block, one pass while it
// is in cache zeroes it where the forward Relu's output y is not positive and, with
// BiasAddGrad, adds its rows into the column sums (output 1). Inputs: a, b, y.
#include "devices/cpu/kernels/bias_epilogue.hpp"
#include "devices/cpu/kernels/blas.hpp"
#include "devices/cpu/kernels/kernel_util.hpp"
#include "devices/cpu/onednn_conv.hpp"

#include <climits>
#include <type_traits>

namespace actorflow {

namespace {

using namespace cpu;

template <class T>
class fused_matmul_kernel : public op_kernel {
public:
  bool is_expensive() const override { return true; }
  explicit fused_matmul_kernel(const node& n)
    : op_kernel(n), transpose_a_(n.attr_or<bool>("transpose_a", false)),
      transpose_b_(n.attr_or<bool>("transpose_b", false)),
      relu_(fuses_relu(n.attr_or<std::string>("fused_ops", ""))),
      bf16_(std::is_same_v<T, float> && onednn_bf16_wanted(n)) {}

  void compute(kernel_context& ctx) override {
    if (!check_inputs(ctx, 3, dtype_of<T>()))
      return;
    const tensor& a = ctx.input(0);
    const tensor& b = ctx.input(1);
    const tensor& bias = ctx.input(2);
    if (bias.shape().rank() != 1) {
      ctx.fail(make_error(errc::invalid_argument,
                          "_FusedMatMul's bias must be a vector, got shape " + bias.shape().to_string()));
      return;
    }
    auto dims = gemm_dims_of("_FusedMatMul", a.shape(), transpose_a_, b.shape(), transpose_b_);
    if (!dims) {
      ctx.fail(dims.error());
      return;
    }
    auto [m, n, k] = *dims;
    if (bias.shape().dim(0) != n) {
      ctx.fail(make_error(errc::invalid_argument,
                          "the bias " + bias.shape().to_string() + " does not match the " +
                            std::to_string(n) + " columns of the product"));
      return;
    }
    tensor out = ctx.allocate_output(0, dtype_of<T>(), tensor_shape{m, n});
    if (m == 0 || n == 0)
      return;
    T* c = out.data<T>();
    const T* bias_data = bias.data<T>();
    if (k == 0) {
      fill_bias(c, m, n, bias_data);
      if (relu_)
        relu_in_place(c, m * n);
      return;
    }
    auto lda = a.shape().dim(1);
    // Mixed precision: bias and Relu are the primitive's post-ops.
    if constexpr (std::is_same_v<T, float>)
      if (bf16_ && onednn_matmul_bf16(transpose_a_, transpose_b_, m, n, k, a.data<T>(), lda,
                                      b.data<T>(), b.shape().dim(1), bias_data, relu_, c))
        return;
    // Row blocks of C small enough to stay in L2 between the GEMM and the epilogue.
    auto block = epilogue_block_rows<T>(n);
    for (std::int64_t first = 0; first < m; first += block) {
      auto rows = std::min(block, m - first);
      // Row `first` of op(A): a row of A, or a column when A is transposed.
      const T* a_block = a.data<T>() + (transpose_a_ ? first : first * lda);
      fill_bias(c + first * n, rows, n, bias_data);
      gemm(transpose_a_, transpose_b_, rows, n, k, T{1}, a_block, lda, b.data<T>(),
           b.shape().dim(1), T{1}, c + first * n, n);
      if (relu_)
        relu_in_place(c + first * n, rows * n);
    }
  }

private:
  bool transpose_a_;
  bool transpose_b_;
  bool relu_;
  bool bf16_; // mixed precision (graph/mixed_precision.hpp)
};

template <class T>
class fused_matmul_relu_grad_kernel : public op_kernel {
public:
  bool is_expensive() const override { return true; }
  explicit fused_matmul_relu_grad_kernel(const node& n)
    : op_kernel(n), transpose_a_(n.attr_or<bool>("transpose_a", false)),
      transpose_b_(n.attr_or<bool>("transpose_b", false)),
      bias_grad_(fuses_bias_grad(n.attr_or<std::string>("fused_ops", ""))) {}

  void compute(kernel_context& ctx) override {
    if (!check_inputs(ctx, 3, dtype_of<T>()))
      return;
    const tensor& a = ctx.input(0);
    const tensor& b = ctx.input(1);
    const tensor& y = ctx.input(2);
    auto dims = gemm_dims_of("_FusedMatMulReluGrad", a.shape(), transpose_a_, b.shape(), transpose_b_);
    if (!dims) {
      ctx.fail(dims.error());
      return;
    }
    auto [m, n, k] = *dims;
    if (y.shape() != tensor_shape{m, n}) {
      ctx.fail(make_error(errc::invalid_argument,
                          "the Relu output " + y.shape().to_string() +
                            " does not match the product's shape " +
                            tensor_shape{m, n}.to_string()));
      return;
    }
    tensor out = ctx.allocate_output(0, dtype_of<T>(), tensor_shape{m, n});
    T* sums = nullptr;
    if (bias_grad_) {
      tensor bias = ctx.allocate_output(1, dtype_of<T>(), tensor_shape{n});
      sums = bias.data<T>();
      std::fill(sums, sums + n, T{0});
    }
    if (m == 0 || n == 0)
      return;
    T* c = out.data<T>();
    const T* mask = y.data<T>();
    if (k == 0) {
      std::fill(c, c + m * n, T{0});
      return;
    }
    auto lda = a.shape().dim(1);
    // Row blocks of C small enough to stay in L2 between the GEMM and the epilogue.
    auto block = epilogue_block_rows<T>(n);
    for (std::int64_t first = 0; first < m; first += block) {
      auto rows = std::min(block, m - first);
      const T* a_block = a.data<T>() + (transpose_a_ ? first : first * lda);
      T* c_block = c + first * n;
      gemm(transpose_a_, transpose_b_, rows, n, k, T{1}, a_block, lda, b.data<T>(),
           b.shape().dim(1), T{0}, c_block, n);
      relu_grad_in_place(c_block, mask + first * n, rows, n, sums);
    }
  }

private:
  bool transpose_a_;
  bool transpose_b_;
  bool bias_grad_;
};

} // namespace

void register_fused_matmul_kernels(kernel_registry& registry) {
  add_typed_kernels<fused_matmul_kernel, float, double>(registry, "_FusedMatMul");
  add_typed_kernels<fused_matmul_relu_grad_kernel, float, double>(registry,
                                                                  "_FusedMatMulReluGrad");
}

} // namespace actorflow

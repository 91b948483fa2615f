// _FusedConv2D (graph/fusion.hpp): Conv2D + BiasAdd (+ Relu). float32 runs the convolution on
// oneDNN as Conv2D does (devices/cpu/onednn_conv.hpp, 2-5x im2col + GEMM on the CNN's shapes),
// then adds the bias and applies Relu over the output (bias_epilogue.hpp); otherwise conv.cpp's im2col +
// GEMM onto output rows filled with the bias, Relu applied to each block right after its GEMM. Inputs: x (NHWC), filter
// (HWIO), bias; attrs strides, padding, fused_ops. Kept apart from conv.cpp on purpose: that
// file may move to another library's convolutions.
#include "devices/cpu/kernels/bias_epilogue.hpp"
#include "devices/cpu/kernels/blas.hpp"
#include "devices/cpu/kernels/im2col.hpp"
#include "devices/cpu/kernels/kernel_util.hpp"
#include "devices/cpu/onednn_conv.hpp"

#include <algorithm>
#include <type_traits>
#include <vector>

namespace actorflow {

namespace {

using namespace cpu;

template <class T>
class fused_conv2d_kernel : public op_kernel {
public:
  bool is_expensive() const override { return true; }
  explicit fused_conv2d_kernel(const node& n)
    : op_kernel(n), relu_(fuses_relu(n.attr_or<std::string>("fused_ops", ""))),
      use_onednn_(std::is_same_v<T, float> && onednn_conv_wanted()),
      bf16_(std::is_same_v<T, float> && onednn_bf16_wanted(n)) {}

  void compute(kernel_context& ctx) override {
    if (!check_inputs(ctx, 3, dtype_of<T>()))
      return;
    const tensor& x = ctx.input(0);
    const tensor& filter = ctx.input(1);
    const tensor& bias = ctx.input(2);
    auto s = make_conv_sizes(ctx.def(), x.shape(), filter.shape());
    if (!s) {
      ctx.fail(s.error());
      return;
    }
    if (bias.shape().rank() != 1 || bias.shape().dim(0) != s->filters) {
      ctx.fail(make_error(errc::invalid_argument,
                          "the bias " + bias.shape().to_string() + " does not match the " +
                            std::to_string(s->filters) + " filters"));
      return;
    }
    tensor out = ctx.allocate_output(0, dtype_of<T>(), s->output_shape());
    if (s->batch == 0 || s->positions() == 0 || s->filters == 0)
      return;
    T* y = out.data<T>();
    const T* bias_data = bias.data<T>();
    auto per_image_out = s->positions() * s->filters;
    if (s->row() == 0) {
      fill_bias(y, s->batch * s->positions(), s->filters, bias_data);
      if (relu_)
        relu_in_place(y, out.num_elements());
      return;
    }
    if constexpr (std::is_same_v<T, float>) {
      if (use_onednn_ && onednn_convolution(onednn_conv_pass::forward, *s, x.data<T>(),
                                            filter.data<T>(), nullptr, y, bf16_)) {
        add_bias(y, s->batch * s->positions(), s->filters, bias_data);
        if (relu_)
          relu_in_place(y, out.num_elements());
        return;
      }
    }
    auto chunk = conv_images_per_chunk(*s);
    // As conv.cpp: the scratch lives with the thread, so steps do not fault in fresh pages.
    thread_local std::vector<T> col;
    col.resize(static_cast<std::size_t>(std::min(chunk, s->batch) * s->positions() * s->row()));
    auto block = epilogue_block_rows<T>(s->filters);
    for (std::int64_t first = 0; first < s->batch; first += chunk) {
      auto count = std::min(chunk, s->batch - first);
      auto rows = count * s->positions();
      unroll_windows(*s, x.data<T>(), first, count, col.data());
      // out[rows, filters] = col[rows, row] * filter[row, filters], in row blocks that the
      // epilogue finds in cache.
      for (std::int64_t r = 0; r < rows; r += block) {
        auto n_rows = std::min(block, rows - r);
        T* c = y + first * per_image_out + r * s->filters;
        fill_bias(c, n_rows, s->filters, bias_data);
        gemm(false, false, n_rows, s->filters, s->row(), T{1}, col.data() + r * s->row(),
             s->row(), filter.data<T>(), s->filters, T{1}, c, s->filters);
        if (relu_)
          relu_in_place(c, n_rows * s->filters);
      }
    }
  }

private:
  bool relu_;
  bool use_onednn_;
  bool bf16_; // mixed precision (graph/mixed_precision.hpp)
};

} // namespace

void register_fused_conv_kernels(kernel_registry& registry) {
  add_typed_kernels<fused_conv2d_kernel, float, double>(registry, "_FusedConv2D");
}

} // namespace actorflow

// StridedSlice and StridedSliceGrad (graph/strided_slice.hpp) for every dtype. The copy is
// planned on the fewest dimensions that describe it (devices/strided_layout.hpp): a subscript
// that takes everything in order (x[:], x[..., tf.newaxis]) shares the input's buffer, rows of
// a contiguous run copy as blocks, and other strides element by element.
#include "devices/cpu/kernels/kernel_util.hpp"
#include "devices/cpu/kernels/strided_walk.hpp"
#include "devices/strided_layout.hpp"
#include "graph/strided_slice.hpp"

#include <cstring>

namespace actorflow {

namespace {

using namespace cpu;

class strided_slice_kernel : public op_kernel {
public:
  explicit strided_slice_kernel(const node& n) : op_kernel(n), spec_(strided_slice_spec::of(n)) {}

  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, ctx.def().kernel_type))
      return;
    const tensor& x = ctx.input(0);
    auto layout = make_strided_slice_layout(x.shape(), spec_, ctx.def().name);
    if (!layout) {
      ctx.fail(layout.error());
      return;
    }
    if (layout->moves_nothing()) {
      forward_reshaped(ctx, x, layout->out_shape);
      return;
    }
    tensor out = ctx.allocate_output(0, x.type(), layout->out_shape);
    with_element_bits(x.type(), [&](auto element) {
      using U = decltype(element);
      auto* from = static_cast<const U*>(x.raw_data());
      auto* to = static_cast<U*>(out.raw_data());
      for_blocks(ctx, out.num_elements(), [&](std::int64_t begin, std::int64_t end) {
        gather_strided(from, to, *layout, begin, end);
      });
    });
  }

private:
  strided_slice_spec spec_;
};

class strided_slice_grad_kernel : public op_kernel {
public:
  explicit strided_slice_grad_kernel(const node& n)
    : op_kernel(n), spec_(strided_slice_spec::of(n)) {}

  void compute(kernel_context& ctx) override {
    // Input 0 (x) gives only its shape.
    if (!check_input(ctx, 1, ctx.def().kernel_type))
      return;
    const tensor& x = ctx.input(0);
    const tensor& dy = ctx.input(1);
    auto layout = make_strided_slice_grad_layout(x.shape(), dy.shape(), spec_, ctx.def().name);
    if (!layout) {
      ctx.fail(layout.error());
      return;
    }
    if (layout->moves_nothing()) {
      forward_reshaped(ctx, dy, x.shape());
      return;
    }
    tensor dx = ctx.allocate_output(0, dy.type(), x.shape());
    // All-zero bytes are zero in every dtype.
    std::memset(dx.raw_data(), 0, dx.bytes());
    with_element_bits(dy.type(), [&](auto element) {
      using U = decltype(element);
      auto* from = static_cast<const U*>(dy.raw_data());
      auto* into = static_cast<U*>(dx.raw_data());
      for_blocks(ctx, dy.num_elements(), [&](std::int64_t begin, std::int64_t end) {
        scatter_strided(from, into, *layout, begin, end);
      });
    });
  }

private:
  strided_slice_spec spec_;
};

} // namespace

void register_strided_slice_kernels(kernel_registry& registry) {
  registry.add("StridedSlice", "CPU", all_dtypes(), &make_kernel<strided_slice_kernel>);
  registry.add("StridedSliceGrad", "CPU", all_dtypes(), &make_kernel<strided_slice_grad_kernel>);
}

} // namespace actorflow

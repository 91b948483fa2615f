// Softmax over the last axis, shifted by each row's maximum so exp never overflows.
#include "devices/cpu/kernels/kernel_util.hpp"

namespace actorflow {

namespace {

using namespace cpu;

template <class T>
class softmax_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;

  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, dtype_of<T>()))
      return;
    const tensor& x = ctx.input(0);
    if (x.shape().rank() < 1) {
      ctx.fail(make_error(errc::invalid_argument, "Softmax needs a tensor of rank 1 or more, got " +
                                                    x.shape().to_string()));
      return;
    }
    tensor out = ctx.allocate_output(0, dtype_of<T>(), x.shape());
    auto cols = x.shape().dim(x.shape().rank() - 1);
    if (cols == 0)
      return;
    auto rows = x.num_elements() / cols;
    const T* px = x.data<T>();
    T* po = out.data<T>();
    for_blocks(
      ctx, rows,
      [&](std::int64_t begin, std::int64_t end) {
        for (auto r = begin; r < end; ++r) {
          auto in = view(px + r * cols, cols);
          auto o = view(po + r * cols, cols);
          o = (in - in.maxCoeff()).exp();
          o /= o.sum();
        }
      },
      cols * 4);
  }
};

} // namespace

void register_softmax_kernels(kernel_registry& registry) {
  add_typed_kernels<softmax_kernel, float, double>(registry, "Softmax");
}

} // namespace actorflow

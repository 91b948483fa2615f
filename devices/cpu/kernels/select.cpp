// SelectV2(condition, t, e): condition ? t : e, the three broadcast together numpy-style.
// Registered under the condition's dtype (bool), which keys the node's kernel; the branches'
// dtype (any of the five) is dispatched here with visit_dtype. Where(condition): the
// coordinates of its true elements, int64 [count, rank], in row-major order.
#include "devices/cpu/kernels/kernel_util.hpp"
#include "devices/elementwise_math.hpp"

namespace actorflow {

namespace {

using namespace cpu;

class select_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;

  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, dtype::boolean))
      return;
    auto type = ctx.num_inputs() > 1 ? ctx.input(1).type() : dtype::float32;
    if (!check_input(ctx, 1, type) || !check_input(ctx, 2, type))
      return;
    visit_dtype(type, [&](auto zero) { run<decltype(zero)>(ctx); });
  }

private:
  template <class T>
  static void run(kernel_context& ctx) {
    const tensor& c = ctx.input(0);
    const tensor& t = ctx.input(1);
    const tensor& e = ctx.input(2);
    auto shape = select_shape(c.shape(), t.shape(), e.shape(), ctx.def().name);
    if (!shape) {
      ctx.fail(shape.error());
      return;
    }
    tensor out = ctx.allocate_output(0, dtype_of<T>(), *shape);
    auto n = out.num_elements();
    const bool* pc = c.data<bool>();
    const T* pt = t.data<T>();
    const T* pe = e.data<T>();
    T* po = out.data<T>();
    if (c.shape() == *shape && t.shape() == *shape && e.shape() == *shape) {
      for_blocks(ctx, n, [&](std::int64_t begin, std::int64_t end) {
        for (auto i = begin; i < end; ++i)
          po[i] = pc[i] ? pt[i] : pe[i];
      });
      return;
    }
    // The general case: an odometer over the output, each operand at its own strides.
    auto rank = shape->rank();
    auto sc = aligned_strides(c.shape(), rank);
    auto st = aligned_strides(t.shape(), rank);
    auto se = aligned_strides(e.shape(), rank);
    std::vector<std::int64_t> index(static_cast<std::size_t>(rank), 0);
    std::int64_t ic = 0, it = 0, ie = 0;
    for (std::int64_t o = 0; o < n; ++o) {
      po[o] = pc[ic] ? pt[it] : pe[ie];
      for (int d = rank - 1; d >= 0; --d) {
        auto u = static_cast<std::size_t>(d);
        ic += sc[u];
        it += st[u];
        ie += se[u];
        if (++index[u] < shape->dim(d))
          break;
        ic -= index[u] * sc[u];
        it -= index[u] * st[u];
        ie -= index[u] * se[u];
        index[u] = 0;
      }
    }
  }
};

class where_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;

  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, dtype::boolean))
      return;
    const tensor& c = ctx.input(0);
    const bool* pc = c.data<bool>();
    const auto n = c.num_elements();
    const auto rank = c.shape().rank();
    std::int64_t count = 0;
    for (std::int64_t i = 0; i < n; ++i)
      count += pc[i] ? 1 : 0;
    tensor out = ctx.allocate_output(0, dtype::int64, tensor_shape{count, rank});
    auto* po = out.data<std::int64_t>();
    // Coordinates by an odometer over the shape, written for the true elements only.
    std::vector<std::int64_t> index(static_cast<std::size_t>(rank), 0);
    for (std::int64_t i = 0; i < n; ++i) {
      if (pc[i]) {
        std::copy(index.begin(), index.end(), po);
        po += rank;
      }
      for (int d = rank - 1; d >= 0; --d) {
        auto u = static_cast<std::size_t>(d);
        if (++index[u] < c.shape().dim(d))
          break;
        index[u] = 0;
      }
    }
  }
};

} // namespace

void register_select_kernels(kernel_registry& registry) {
  registry.add(kernel_key{"SelectV2", "CPU", dtype::boolean}, &make_kernel<select_kernel>);
  registry.add(kernel_key{"Where", "CPU", dtype::boolean}, &make_kernel<where_kernel>);
}

} // namespace actorflow

// SelectV2(condition, t, e): condition ? t : e, the three broadcast together numpy-style.
// Registered under the condition's dtype (bool), which keys the node's kernel; the branches'
// dtype (float32, float64, int32, int64, bool) is dispatched here.
#include "devices/cpu/kernels/kernel_util.hpp"

namespace actorflow {

namespace {

using namespace cpu;

/// Element strides of `s` aligned to the trailing dimensions of a rank-`rank` output: 0 where
/// it broadcasts.
std::vector<std::int64_t> aligned_strides(const tensor_shape& s, int rank) {
  std::vector<std::int64_t> strides(static_cast<std::size_t>(rank), 0);
  std::int64_t stride = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    strides[static_cast<std::size_t>(rank - s.rank() + i)] = s.dim(i) == 1 ? 0 : stride;
    stride *= s.dim(i);
  }
  return strides;
}

class select_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;

  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, dtype::boolean))
      return;
    auto type = ctx.num_inputs() > 1 ? ctx.input(1).type() : dtype::float32;
    if (!check_input(ctx, 1, type) || !check_input(ctx, 2, type))
      return;
    switch (type) {
    case dtype::float32: return run<float>(ctx);
    case dtype::float64: return run<double>(ctx);
    case dtype::int32: return run<std::int32_t>(ctx);
    case dtype::int64: return run<std::int64_t>(ctx);
    case dtype::boolean: return run<bool>(ctx);
    default:
      ctx.fail(make_error(errc::unimplemented, "SelectV2 '" + ctx.def().name +
                                                 "' has no CPU kernel for branches of " +
                                                 to_string(type)));
    }
  }

private:
  template <class T>
  static void run(kernel_context& ctx) {
    const tensor& c = ctx.input(0);
    const tensor& t = ctx.input(1);
    const tensor& e = ctx.input(2);
    auto branches = broadcast_shapes(t.shape(), e.shape());
    auto shape = branches ? broadcast_shapes(c.shape(), *branches) : branches;
    if (!shape) {
      ctx.fail(make_error(errc::invalid_argument,
                          "SelectV2 '" + ctx.def().name + "': condition " + c.shape().to_string() +
                            ", then " + t.shape().to_string() + " and else " +
                            e.shape().to_string() + " do not broadcast together"));
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

} // namespace

void register_select_kernels(kernel_registry& registry) {
  registry.add(kernel_key{"SelectV2", "CPU", dtype::boolean}, &make_kernel<select_kernel>);
}

} // namespace actorflow

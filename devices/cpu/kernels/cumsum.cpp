// Cumsum: running sums along attr "axis" (TF's tf.cumsum): attr "exclusive" leaves each element
// out of its own sum, "reverse" runs from the end. Each (outer, inner) line is summed in order;
// lines are spread over the intra-op pool.
#include "devices/cpu/kernels/kernel_util.hpp"

namespace actorflow {

namespace {

using namespace cpu;

template <class T>
class cumsum_kernel : public op_kernel {
public:
  explicit cumsum_kernel(const node& n)
    : op_kernel(n), axis_(n.attr_or<std::int64_t>("axis", 0)),
      exclusive_(n.attr_or<bool>("exclusive", false)), reverse_(n.attr_or<bool>("reverse", false)) {}

  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, dtype_of<T>()))
      return;
    const tensor& x = ctx.input(0);
    const auto& shape = x.shape();
    auto axis = normalize_axis(axis_, shape.rank(), "Cumsum axis");
    if (!axis) {
      ctx.fail(axis.error());
      return;
    }
    tensor out = ctx.allocate_output(0, dtype_of<T>(), shape);
    std::int64_t outer = 1, inner = 1;
    for (int i = 0; i < shape.rank(); ++i) {
      if (i < *axis)
        outer *= shape.dim(i);
      else if (i > *axis)
        inner *= shape.dim(i);
    }
    const auto len = shape.dim(*axis);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    for_blocks(
      ctx, outer * inner,
      [&](std::int64_t begin, std::int64_t end) {
        for (auto line = begin; line < end; ++line) {
          auto base = (line / inner) * len * inner + line % inner;
          T sum{0};
          for (std::int64_t k = 0; k < len; ++k) {
            auto at = base + (reverse_ ? len - 1 - k : k) * inner;
            if (exclusive_) {
              po[at] = sum;
              sum += px[at];
            } else {
              sum += px[at];
              po[at] = sum;
            }
          }
        }
      },
      len);
  }

private:
  std::int64_t axis_;
  bool exclusive_, reverse_;
};

} // namespace

void register_cumsum_kernels(kernel_registry& registry) {
  add_typed_kernels<cumsum_kernel, float, double, std::int32_t, std::int64_t>(registry, "Cumsum");
}

} // namespace actorflow

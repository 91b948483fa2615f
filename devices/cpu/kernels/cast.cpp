// Cast: every pair of the five dtypes. Registered under the source dtype (the node's kernel
// type is its input's); the destination comes from attr "dtype".
#include "devices/cpu/kernels/kernel_util.hpp"

namespace actorflow {

namespace {

using namespace cpu;

template <class From>
class cast_kernel : public op_kernel {
public:
  explicit cast_kernel(const node& n)
    : op_kernel(n),
      to_(n.attr_or<dtype>("dtype", n.output_types.empty() ? dtype_of<From>() : n.output_types[0])) {}

  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, dtype_of<From>()))
      return;
    const tensor& x = ctx.input(0);
    if (to_ == dtype_of<From>()) {
      // Nothing to convert: share the buffer like Identity.
      ctx.set_output(0, x);
      return;
    }
    tensor out = ctx.allocate_output(0, to_, x.shape());
    const From* px = x.data<From>();
    visit_dtype(to_, [&](auto zero) {
      using To = decltype(zero);
      To* po = out.data<To>();
      for_blocks(ctx, x.num_elements(), [&](std::int64_t begin, std::int64_t end) {
        // static_cast semantics: float to int truncates, nonzero to bool is true.
        view(po + begin, end - begin) = view(px + begin, end - begin).template cast<To>();
      });
      return 0;
    });
  }

private:
  dtype to_;
};

} // namespace

void register_cast_kernels(kernel_registry& registry) {
  add_typed_kernels<cast_kernel, float, double, std::int32_t, std::int64_t, bool>(registry, "Cast");
}

} // namespace actorflow

// Identity (and StopGradient, LoopCond): forwards its input, sharing the buffer.
#include "devices/cpu/kernels/cpu_kernels.hpp"
#include "devices/kernel.hpp"

namespace actorflow {

namespace {

class identity_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;

  void compute(kernel_context& ctx) override {
    if (ctx.num_inputs() < 1) {
      ctx.fail(make_error(errc::invalid_argument, "Identity expects one input"));
      return;
    }
    ctx.set_output(0, ctx.input(0));
  }
};

} // namespace

void register_identity_kernels(kernel_registry& registry) {
  registry.add("Identity", "CPU", all_dtypes(), make_kernel<identity_kernel>);
  registry.add("StopGradient", "CPU", all_dtypes(), make_kernel<identity_kernel>);
  // A while loop's LoopCond forwards its predicate.
  registry.add({"LoopCond", "CPU", dtype::boolean}, make_kernel<identity_kernel>);
}

} // namespace actorflow

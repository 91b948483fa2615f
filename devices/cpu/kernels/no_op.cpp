// NoOp: nothing to compute; a node that exists for its control dependencies.
#include "devices/cpu/kernels/cpu_kernels.hpp"
#include "devices/kernel.hpp"

namespace actorflow {

namespace {

class no_op_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;
  void compute(kernel_context&) override {}
};

} // namespace

void register_no_op_kernels(kernel_registry& registry) {
  // A NoOp has no inputs or outputs, so its kernel type is the default; accept any.
  registry.add("NoOp", "CPU", all_dtypes(), make_kernel<no_op_kernel>);
}

} // namespace actorflow

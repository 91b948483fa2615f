// Fill: a tensor of attr "shape" with every element equal to the scalar input.
#include "devices/cpu/kernels/kernel_util.hpp"

namespace actorflow {

namespace {

using namespace cpu;

template <class T>
class fill_kernel : public op_kernel {
public:
  bool is_expensive() const override { return true; }
  fill_kernel(const node& n, tensor_shape shape) : op_kernel(n), shape_(std::move(shape)) {}

  static result<std::unique_ptr<op_kernel>> make(const node& n) {
    auto shape = concrete_shape_attr(n, "shape");
    if (!shape)
      return shape.error();
    return std::unique_ptr<op_kernel>{std::make_unique<fill_kernel>(n, std::move(*shape))};
  }

  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, dtype_of<T>()))
      return;
    const tensor& value = ctx.input(0);
    if (value.num_elements() != 1) {
      ctx.fail(make_error(errc::invalid_argument,
                          "Fill: value must be a scalar, got shape " + value.shape().to_string()));
      return;
    }
    tensor out = ctx.allocate_output(0, dtype_of<T>(), shape_);
    T v = *value.data<T>();
    T* po = out.data<T>();
    for_blocks(ctx, out.num_elements(), [&](std::int64_t begin, std::int64_t end) {
      view(po + begin, end - begin).setConstant(v);
    });
  }

private:
  tensor_shape shape_;
};

template <class T>
result<std::unique_ptr<op_kernel>> make_fill(const node& n) {
  return fill_kernel<T>::make(n);
}

} // namespace

void register_fill_kernels(kernel_registry& registry) {
  registry.add({"Fill", "CPU", dtype::float32}, &make_fill<float>);
  registry.add({"Fill", "CPU", dtype::float64}, &make_fill<double>);
  registry.add({"Fill", "CPU", dtype::int32}, &make_fill<std::int32_t>);
  registry.add({"Fill", "CPU", dtype::int64}, &make_fill<std::int64_t>);
}

} // namespace actorflow

// SoftmaxCrossEntropyWithLogits: per-example loss sum_j labels_j (logsumexp(x) - x_j) and its
// gradient softmax(x) - labels, both from the max-shifted logits for numerical stability.
#include "devices/cpu/kernels/kernel_util.hpp"

#include <cmath>

namespace actorflow {

namespace {

using namespace cpu;

template <class T>
class softmax_cross_entropy_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;

  void compute(kernel_context& ctx) override {
    if (!check_inputs(ctx, 2, dtype_of<T>()))
      return;
    const tensor& logits = ctx.input(0);
    const tensor& labels = ctx.input(1);
    if (logits.shape().rank() != 2 || logits.shape() != labels.shape()) {
      ctx.fail(make_error(errc::invalid_argument,
                          "logits and labels must be matrices of the same shape: logits " +
                            logits.shape().to_string() + ", labels " + labels.shape().to_string()));
      return;
    }
    auto batch = logits.shape().dim(0);
    auto classes = logits.shape().dim(1);
    tensor loss = ctx.allocate_output(0, dtype_of<T>(), tensor_shape{batch});
    tensor backprop = ctx.allocate_output(1, dtype_of<T>(), logits.shape());
    const T* px = logits.data<T>();
    const T* py = labels.data<T>();
    T* pl = loss.data<T>();
    T* pb = backprop.data<T>();
    if (classes == 0) {
      view(pl, batch).setZero();
      return;
    }
    for_blocks(
      ctx, batch,
      [&](std::int64_t begin, std::int64_t end) {
        for (auto r = begin; r < end; ++r) {
          auto x = view(px + r * classes, classes);
          auto y = view(py + r * classes, classes);
          auto b = view(pb + r * classes, classes);
          // b holds the shifted logits first, then their exponentials.
          b = x - x.maxCoeff();
          T shifted_dot_labels = (b * y).sum();
          b = b.exp();
          T sum_exp = b.sum();
          T log_sum_exp = std::log(sum_exp);
          pl[r] = log_sum_exp * y.sum() - shifted_dot_labels;
          b = b / sum_exp - y;
        }
      },
      classes * 4);
  }
};

} // namespace

void register_softmax_cross_entropy_kernels(kernel_registry& registry) {
  add_typed_kernels<softmax_cross_entropy_kernel, float, double>(registry,
                                                                 "SoftmaxCrossEntropyWithLogits");
}

} // namespace actorflow

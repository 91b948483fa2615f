// ArgMax and ArgMin: the index of the largest (smallest) element along attr "axis" (int64
// output; the first index wins ties, like TensorFlow).
#include "devices/cpu/kernels/kernel_util.hpp"

#include <functional>

namespace actorflow {

namespace {

using namespace cpu;

/// `Better` orders two elements: std::greater for ArgMax, std::less for ArgMin; strict, so the
/// first of equal extremes stays.
template <class T, class Better>
class arg_extremum_kernel : public op_kernel {
public:
  explicit arg_extremum_kernel(const node& n) : op_kernel(n), axis_(n.attr_or<std::int64_t>("axis", 0)) {}

  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, dtype_of<T>()))
      return;
    const tensor& x = ctx.input(0);
    const auto& shape = x.shape();
    const auto what = op() + " axis";
    auto axis = normalize_axis(axis_, shape.rank(), what.c_str());
    if (!axis) {
      ctx.fail(axis.error());
      return;
    }
    auto len = shape.dim(*axis);
    std::int64_t outer = 1;
    std::int64_t inner = 1;
    std::vector<std::int64_t> out_dims;
    for (int i = 0; i < shape.rank(); ++i) {
      if (i < *axis)
        outer *= shape.dim(i);
      else if (i > *axis)
        inner *= shape.dim(i);
      if (i != *axis)
        out_dims.push_back(shape.dim(i));
    }
    if (len == 0 && outer * inner > 0) {
      ctx.fail(make_error(errc::invalid_argument, op() + " over an empty axis " +
                                                    std::to_string(*axis) + " of shape " +
                                                    shape.to_string()));
      return;
    }
    tensor out = ctx.allocate_output(0, dtype::int64, tensor_shape{out_dims});
    const T* px = x.data<T>();
    auto* po = out.data<std::int64_t>();
    for_blocks(
      ctx, outer,
      [&](std::int64_t begin, std::int64_t end) {
        for (auto o = begin; o < end; ++o) {
          const T* slice = px + o * len * inner;
          auto* result = po + o * inner;
          if (inner == 1) {
            std::int64_t best = 0;
            for (std::int64_t i = 1; i < len; ++i)
              if (better(slice[i], slice[best]))
                best = i;
            *result = best;
            continue;
          }
          // Walk the axis row by row so every access is contiguous.
          std::fill(result, result + inner, std::int64_t{0});
          for (std::int64_t i = 1; i < len; ++i) {
            const T* row = slice + i * inner;
            for (std::int64_t j = 0; j < inner; ++j)
              if (better(row[j], slice[result[j] * inner + j]))
                result[j] = i;
          }
        }
      },
      len * inner);
  }

private:
  std::int64_t axis_;
  Better better;
};

template <class T>
using argmax_kernel = arg_extremum_kernel<T, std::greater<T>>;
template <class T>
using argmin_kernel = arg_extremum_kernel<T, std::less<T>>;

} // namespace

void register_argmax_kernels(kernel_registry& registry) {
  add_typed_kernels<argmax_kernel, float, double, std::int32_t, std::int64_t>(registry, "ArgMax");
  add_typed_kernels<argmin_kernel, float, double, std::int32_t, std::int64_t>(registry, "ArgMin");
}

} // namespace actorflow

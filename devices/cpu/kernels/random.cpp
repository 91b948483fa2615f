// RandomUniform ([0, 1)), RandomStandardNormal, TruncatedNormal (|x| < 2): attrs shape, dtype,
// seed, seed2. With either seed set the sequence is reproducible; with both 0 it comes from
// std::random_device. The generator lives in the kernel, so each run continues the sequence
// and draws new numbers; the kernel keeps_state(), so every run signature of a session shares
// it (a new signature does not replay the sequence); a mutex guards it because steps may run
// the kernel concurrently.
//
// The distributions are written out here (bits to [0,1), Box-Muller) rather than taken from
// <random>, whose distributions differ between standard libraries: a seed then means the same
// numbers everywhere.
#include "devices/cpu/kernels/kernel_util.hpp"
#include "devices/cpu/kernels/random_generator.hpp"

#include <cmath>
#include <random>

namespace actorflow {

namespace {

using namespace cpu;

enum class distribution { uniform, normal, truncated_normal };


template <class T, distribution kind>
class random_kernel : public op_kernel {
public:
  bool is_expensive() const override { return true; }
  bool keeps_state() const override { return true; }
  random_kernel(const node& n, tensor_shape shape)
    : op_kernel(n), shape_(std::move(shape)),
      generator_(make_generator(n.attr_or<std::int64_t>("seed", 0),
                                n.attr_or<std::int64_t>("seed2", 0))) {}

  static result<std::unique_ptr<op_kernel>> make(const node& n) {
    auto shape = concrete_shape_attr(n, "shape");
    if (!shape)
      return shape.error();
    return std::unique_ptr<op_kernel>{std::make_unique<random_kernel>(n, std::move(*shape))};
  }

  void compute(kernel_context& ctx) override {
    tensor out = ctx.allocate_output(0, dtype_of<T>(), shape_);
    T* p = out.data<T>();
    auto n = out.num_elements();
    std::lock_guard<std::mutex> guard{mutex_};
    for (std::int64_t i = 0; i < n; ++i) {
      if constexpr (kind == distribution::uniform) {
        p[i] = generator_.uniform<T>();
      } else if constexpr (kind == distribution::normal) {
        p[i] = static_cast<T>(generator_.normal());
      } else {
        // Values two or more standard deviations out are drawn again, as in TensorFlow.
        // The test is on the rounded value so that float results stay strictly inside too.
        T v;
        do
          v = static_cast<T>(generator_.normal());
        while (std::abs(v) >= T(2));
        p[i] = v;
      }
    }
  }

private:
  tensor_shape shape_;
  std::mutex mutex_;
  generator generator_;
};

template <class T>
result<std::unique_ptr<op_kernel>> make_uniform(const node& n) {
  return random_kernel<T, distribution::uniform>::make(n);
}
template <class T>
result<std::unique_ptr<op_kernel>> make_normal(const node& n) {
  return random_kernel<T, distribution::normal>::make(n);
}
template <class T>
result<std::unique_ptr<op_kernel>> make_truncated_normal(const node& n) {
  return random_kernel<T, distribution::truncated_normal>::make(n);
}

} // namespace

void register_random_kernels(kernel_registry& registry) {
  registry.add({"RandomUniform", "CPU", dtype::float32}, &make_uniform<float>);
  registry.add({"RandomUniform", "CPU", dtype::float64}, &make_uniform<double>);
  registry.add({"RandomStandardNormal", "CPU", dtype::float32}, &make_normal<float>);
  registry.add({"RandomStandardNormal", "CPU", dtype::float64}, &make_normal<double>);
  registry.add({"TruncatedNormal", "CPU", dtype::float32}, &make_truncated_normal<float>);
  registry.add({"TruncatedNormal", "CPU", dtype::float64}, &make_truncated_normal<double>);
}

} // namespace actorflow

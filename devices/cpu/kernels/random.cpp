// RandomUniform ([0, 1)), RandomStandardNormal, TruncatedNormal (|x| < 2): attrs shape, dtype,
// seed, seed2. With either seed set the sequence is reproducible; with both 0 it comes from
// std::random_device. The generator lives in the kernel, so each run continues the sequence
// and draws new numbers; a mutex guards it because steps may run the kernel concurrently.
//
// The distributions are written out here (bits to [0,1), Box-Muller) rather than taken from
// <random>, whose distributions differ between standard libraries: a seed then means the same
// numbers everywhere.
#include "devices/cpu/kernels/kernel_util.hpp"

#include <cmath>
#include <random>

namespace actorflow {

namespace {

using namespace cpu;

enum class distribution { uniform, normal, truncated_normal };

constexpr double two_pi = 6.283185307179586476925286766559;

class generator {
public:
  explicit generator(std::uint64_t seed) : engine_(seed) {}
  generator(std::int64_t seed, std::int64_t seed2) : engine_(make_seed(seed, seed2)) {}

  /// Uniform in [0, 1) with T's full mantissa.
  template <class T>
  T uniform() {
    if constexpr (std::is_same_v<T, float>)
      return static_cast<float>(engine_() >> 40) * 0x1.0p-24f;
    else
      return static_cast<double>(engine_() >> 11) * 0x1.0p-53;
  }

  /// A standard normal value (Box-Muller; the second value of each pair is kept for the next).
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    // 1 - u lies in (0, 1], so the logarithm is finite.
    double u1 = 1.0 - uniform<double>();
    double u2 = uniform<double>();
    double radius = std::sqrt(-2.0 * std::log(u1));
    spare_ = radius * std::sin(two_pi * u2);
    has_spare_ = true;
    return radius * std::cos(two_pi * u2);
  }

private:
  static std::seed_seq::result_type low(std::int64_t v) {
    return static_cast<std::seed_seq::result_type>(static_cast<std::uint64_t>(v) & 0xffffffffu);
  }
  static std::seed_seq::result_type high(std::int64_t v) {
    return static_cast<std::seed_seq::result_type>(static_cast<std::uint64_t>(v) >> 32);
  }
  static std::mt19937_64 make_seed(std::int64_t seed, std::int64_t seed2) {
    std::seed_seq sequence{low(seed), high(seed), low(seed2), high(seed2)};
    return std::mt19937_64{sequence};
  }

  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

generator make_generator(std::int64_t seed, std::int64_t seed2) {
  if (seed == 0 && seed2 == 0) {
    std::random_device device;
    auto bits = (static_cast<std::uint64_t>(device()) << 32) ^ device();
    return generator{bits};
  }
  return generator{seed, seed2};
}

template <class T, distribution kind>
class random_kernel : public op_kernel {
public:
  bool is_expensive() const override { return true; }
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

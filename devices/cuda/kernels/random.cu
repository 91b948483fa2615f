// RandomUniform ([0, 1)), RandomStandardNormal and TruncatedNormal (|x| < 2) on the GPU: attrs
// shape, dtype, seed, seed2, as the CPU kernels (devices/cpu/kernels/random.cpp). Counter-based
// Philox-4x32-10: element i of the draw that starts at sample `offset` is a pure function of
// (key, offset + i), so threads need no shared state; the kernel keeps the offset and moves it
// on by every draw, so each run draws new numbers and a seed gives the same sequence on every
// GPU. The numbers are NOT the CPU's: the CPU uses a Mersenne Twister stream.
#include "devices/cuda/cuda_kernel_util.hpp"
#include "devices/cuda/kernels/cuda_kernels.hpp"
#include "devices/kernel_attrs.hpp"

#include <atomic>
#include <random>

namespace actorflow::cuda {

namespace {

struct philox_key {
  unsigned int k0, k1;
};

/// Philox-4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
__device__ inline uint4 philox(uint4 counter, philox_key key) {
  constexpr unsigned int m0 = 0xD2511F53u, m1 = 0xCD9E8D57u;
  constexpr unsigned int w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    unsigned int hi0 = __umulhi(m0, counter.x), lo0 = m0 * counter.x;
    unsigned int hi1 = __umulhi(m1, counter.z), lo1 = m1 * counter.z;
    counter = make_uint4(hi1 ^ counter.y ^ key.k0, lo1, hi0 ^ counter.w ^ key.k1, lo0);
    key.k0 += w0;
    key.k1 += w1;
  }
  return counter;
}

/// Four fresh words for sample `index`, attempt `attempt` (truncated normal redraws).
__device__ inline uint4 draw(unsigned long long index, unsigned int attempt, philox_key key) {
  return philox(make_uint4(static_cast<unsigned int>(index), static_cast<unsigned int>(index >> 32),
                           attempt, 0x61666c77u),
                key);
}

__device__ inline double unit_double(unsigned int high, unsigned int low) {
  auto bits = (static_cast<unsigned long long>(high) << 32 | low) >> 11;
  return static_cast<double>(bits) * 0x1.0p-53;
}

/// A standard normal value from four words (Box-Muller; 1 - u lies in (0, 1]).
__device__ inline double normal_of(uint4 words) {
  double u1 = 1.0 - unit_double(words.x, words.y);
  double u2 = unit_double(words.z, words.w);
  return sqrt(-2.0 * log(u1)) * cospi(2.0 * u2);
}

enum class distribution { uniform, normal, truncated_normal };

template <class T, distribution kind>
__global__ void fill_random(T* out, long long n, unsigned long long offset, philox_key key) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    auto index = offset + static_cast<unsigned long long>(i);
    if constexpr (kind == distribution::uniform) {
      auto words = draw(index, 0, key);
      if constexpr (sizeof(T) == 4)
        out[i] = static_cast<T>(words.x >> 8) * 0x1.0p-24f;
      else
        out[i] = static_cast<T>(unit_double(words.x, words.y));
    } else if constexpr (kind == distribution::normal) {
      out[i] = static_cast<T>(normal_of(draw(index, 0, key)));
    } else {
      // Values two or more standard deviations out are drawn again (TensorFlow's rule); each
      // draw keeps ~95%, so 64 attempts fail with probability ~1e-86.
      T v = T(0);
      for (unsigned int attempt = 0; attempt < 64; ++attempt) {
        v = static_cast<T>(normal_of(draw(index, attempt, key)));
        if (fabs(static_cast<double>(v)) < 2.0)
          break;
      }
      out[i] = v;
    }
  }
}

philox_key make_key(std::int64_t seed, std::int64_t seed2) {
  std::uint64_t mixed;
  if (seed == 0 && seed2 == 0) {
    std::random_device device;
    mixed = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  } else {
    // splitmix64 of both seeds, so nearby seeds give unrelated keys.
    mixed = static_cast<std::uint64_t>(seed) * 0x9E3779B97F4A7C15ull ^ static_cast<std::uint64_t>(seed2);
    mixed = (mixed ^ (mixed >> 30)) * 0xBF58476D1CE4E5B9ull;
    mixed = (mixed ^ (mixed >> 27)) * 0x94D049BB133111EBull;
    mixed ^= mixed >> 31;
  }
  return {static_cast<unsigned int>(mixed), static_cast<unsigned int>(mixed >> 32)};
}

template <class T, distribution kind>
class random_kernel final : public cuda_kernel {
public:
  random_kernel(const node& n, tensor_shape shape)
    : cuda_kernel(n), shape_(std::move(shape)),
      key_(make_key(n.attr_or<std::int64_t>("seed", 0), n.attr_or<std::int64_t>("seed2", 0))) {}

  bool is_expensive() const override { return true; }
  bool keeps_state() const override { return true; }

  static result<std::unique_ptr<op_kernel>> make(const node& n) {
    auto shape = concrete_shape_attr(n, "shape");
    if (!shape)
      return shape.error();
    return std::unique_ptr<op_kernel>{std::make_unique<random_kernel>(n, std::move(*shape))};
  }

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    tensor out = ctx.allocate_output(0, dtype_of<T>(), shape_);
    auto n = out.num_elements();
    if (n == 0)
      return {};
    // Concurrent steps take disjoint ranges of samples.
    auto offset = next_sample_.fetch_add(static_cast<unsigned long long>(n));
    return launch_over(n, stream, fill_random<T, kind>, out.data<T>(), n, offset, key_);
  }

private:
  tensor_shape shape_;
  philox_key key_;
  std::atomic<unsigned long long> next_sample_{0};
};

} // namespace

void register_random_kernels(kernel_registry& registry) {
  registry.add({"RandomUniform", "GPU", dtype::float32}, &random_kernel<float, distribution::uniform>::make);
  registry.add({"RandomUniform", "GPU", dtype::float64}, &random_kernel<double, distribution::uniform>::make);
  registry.add({"RandomStandardNormal", "GPU", dtype::float32},
               &random_kernel<float, distribution::normal>::make);
  registry.add({"RandomStandardNormal", "GPU", dtype::float64},
               &random_kernel<double, distribution::normal>::make);
  registry.add({"TruncatedNormal", "GPU", dtype::float32},
               &random_kernel<float, distribution::truncated_normal>::make);
  registry.add({"TruncatedNormal", "GPU", dtype::float64},
               &random_kernel<double, distribution::truncated_normal>::make);
}

} // namespace actorflow::cuda

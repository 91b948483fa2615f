#pragma once
/// The CPU kernels' random numbers (internal to devices/cpu/kernels/): a seeded mt19937_64 with
/// the distributions written out (bits to [0, 1), Box-Muller) rather than taken from <random>,
/// whose distributions differ between standard libraries, so that a seed means the same numbers
/// everywhere. Seeds (seed, seed2) as the random ops' attrs: both 0 draws from random_device.
///   auto g = make_generator(seed, seed2);
///   double u = g.uniform<double>();

#include <cmath>
#include <cstdint>
#include <random>
#include <type_traits>

namespace actorflow::cpu {

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

inline generator make_generator(std::int64_t seed, std::int64_t seed2) {
  if (seed == 0 && seed2 == 0) {
    std::random_device device;
    auto bits = (static_cast<std::uint64_t>(device()) << 32) ^ device();
    return generator{bits};
  }
  return generator{seed, seed2};
}


} // namespace actorflow::cpu

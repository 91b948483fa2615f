#pragma once
/// What Sum, Max, Min and Prod accumulate in and start from, on every device (the CPU reducers in
/// devices/cpu/kernels/reduction.cpp and the GPU's in devices/cuda/kernels/reduction.cu add
/// how they combine): one definition, so that both give the same numbers.

#include <limits>
#include <type_traits>

namespace actorflow {

struct sum_traits {
  /// float32 sums accumulate in float64: a float accumulator stops growing once it is 2^24
  /// times its addends (2^29 ones summed to 4.03e8), and loses digits well before.
  template <class T>
  using accumulator = std::conditional_t<std::is_same_v<T, float>, double, T>;
  template <class A>
  static A identity() { return A(0); }
};

struct max_traits {
  template <class T>
  using accumulator = T;
  template <class A>
  static A identity() {
    return std::numeric_limits<A>::has_infinity ? -std::numeric_limits<A>::infinity()
                                                : std::numeric_limits<A>::lowest();
  }
};

struct min_traits {
  template <class T>
  using accumulator = T;
  template <class A>
  static A identity() {
    return std::numeric_limits<A>::has_infinity ? std::numeric_limits<A>::infinity()
                                                : std::numeric_limits<A>::max();
  }
};

/// float32 products accumulate in float64, as sums do (a float product under- or overflows
/// long before its factors are exhausted).
struct prod_traits {
  template <class T>
  using accumulator = std::conditional_t<std::is_same_v<T, float>, double, T>;
  template <class A>
  static A identity() { return A(1); }
};

} // namespace actorflow

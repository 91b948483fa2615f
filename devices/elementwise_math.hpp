#pragma once
/// The scalar rules of the elementwise ops whose result is more than one Eigen or CUDA
/// expression: Maximum, Minimum, Pow, FloorDiv, FloorMod. One definition, run by the CPU
/// kernels (devices/cpu/kernels/binary_ops.cpp, per element through Eigen) and by the GPU's
/// (devices/cuda/kernels/elementwise.cu), so both give the same numbers.
///   floor_div_rule<std::int32_t>{}(-7, 2)    // -4, as Python's -7 // 2
///   floor_mod_rule<float>{}(-7.f, 2.f)       // 1, with the divisor's sign
///   floor_div_rule<std::int32_t>::refuse(0)  // "integer division by zero": the kernel fails
/// refuse(y) is each rule's check of a right operand the CPU kernels make before computing
/// (host only; the GPU kernels do not check, as TensorFlow's do not).
/// select_shape is the output shape both SelectV2 kernels compute, with their error.
/// No Eigen, no CUDA headers.

#include "devices/cuda/host_device.hpp"
#include "graph/status.hpp"
#include "graph/tensor_shape.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

namespace actorflow {

// The C library's math: CUDA's float and double functions in a GPU kernel, std:: elsewhere.
namespace math_detail {
#if defined(__CUDA_ARCH__)
__device__ inline float pow_of(float a, float b) { return ::powf(a, b); }
__device__ inline double pow_of(double a, double b) { return ::pow(a, b); }
__device__ inline float fmod_of(float a, float b) { return ::fmodf(a, b); }
__device__ inline double fmod_of(double a, double b) { return ::fmod(a, b); }
__device__ inline float floor_of(float a) { return ::floorf(a); }
__device__ inline double floor_of(double a) { return ::floor(a); }
#else
template <class T>
T pow_of(T a, T b) { return std::pow(a, b); }
template <class T>
T fmod_of(T a, T b) { return std::fmod(a, b); }
template <class T>
T floor_of(T a) { return std::floor(a); }
#endif
} // namespace math_detail

/// max(a, b) (`larger`) or min(a, b); a NaN operand gives NaN, as TensorFlow's Maximum and
/// Minimum do.
template <class T, bool larger>
struct extremum_rule {
  AF_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a)
        return a;
      if (b != b)
        return b;
    }
    return (larger ? a < b : b < a) ? b : a;
  }
  static const char* refuse(T) { return nullptr; }
};
template <class T>
using maximum_rule = extremum_rule<T, true>;
template <class T>
using minimum_rule = extremum_rule<T, false>;

/// FloorDiv's and FloorMod's check of an integer divisor.
template <class T>
const char* refuse_integer_zero(T b) {
  if constexpr (!std::is_floating_point_v<T>)
    if (b == 0)
      return "integer division by zero";
  return nullptr;
}

/// a^b: the C library's pow for floats; exact repeated squaring for integers (wrapping on
/// overflow as unsigned arithmetic does, with no undefined behaviour), which needs b >= 0.
template <class T>
struct pow_rule {
  AF_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return math_detail::pow_of(a, b);
    } else {
      using U = std::make_unsigned_t<T>;
      U result = 1;
      U base = static_cast<U>(a);
      for (auto e = b; e > 0; e >>= 1) {
        if (e & 1)
          result *= base;
        base *= base;
      }
      return static_cast<T>(result);
    }
  }
  static const char* refuse(T b) {
    if constexpr (!std::is_floating_point_v<T>)
      if (b < 0)
        return "integers to negative integer powers are not allowed";
    return nullptr;
  }
};

/// a // b: the quotient rounded toward minus infinity.
template <class T>
struct floor_div_rule {
  AF_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return math_detail::floor_of(a / b);
    } else {
      if (b == 0)
        return 0;
      T q = a / b;
      if (a % b != 0 && ((a < 0) != (b < 0)))
        --q;
      return q;
    }
  }
  static const char* refuse(T b) { return refuse_integer_zero(b); }
};

/// a % b with the divisor's sign: a - (a // b) b.
template <class T>
struct floor_mod_rule {
  AF_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      T r = math_detail::fmod_of(a, b);
      return r != T(0) && ((b < T(0)) != (r < T(0))) ? r + b : r;
    } else {
      if (b == 0)
        return 0;
      T r = a % b;
      return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
    }
  }
  static const char* refuse(T b) { return refuse_integer_zero(b); }
};

/// SelectV2's output: condition, then and else broadcast together; an error naming the node
/// and the three shapes when they do not.
inline result<tensor_shape> select_shape(const tensor_shape& condition, const tensor_shape& then,
                                         const tensor_shape& otherwise,
                                         const std::string& node_name) {
  auto branches = broadcast_shapes(then, otherwise);
  auto shape = branches ? broadcast_shapes(condition, *branches) : branches;
  if (!shape)
    return make_error(errc::invalid_argument,
                      "SelectV2 '" + node_name + "': condition " + condition.to_string() +
                        ", then " + then.to_string() + " and else " + otherwise.to_string() +
                        " do not broadcast together");
  return shape;
}

} // namespace actorflow

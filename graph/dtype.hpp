#pragma once
/// Element types of tensors.
///   dtype t = dtype_of<float>();            // dtype::float32
///   std::size_t n = size_of(dtype::int64);  // 8

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace actorflow {

enum class dtype : std::uint8_t { float32 = 0, float64, int32, int64, boolean };

/// Every dtype, for ops whose kernels take them all (Const, Identity, ConcatV2, ...).
inline const std::vector<dtype>& all_dtypes() {
  static const std::vector<dtype> types{dtype::float32, dtype::float64, dtype::int32,
                                        dtype::int64, dtype::boolean};
  return types;
}

/// Bytes per element.
std::size_t size_of(dtype t);

/// "float32", "float64", "int32", "int64", "bool".
const char* to_string(dtype t);

/// The inverse of to_string; nullopt for an unknown name.
std::optional<dtype> parse_dtype(std::string_view name);

bool is_floating(dtype t);
bool is_integer(dtype t);

template <class T> constexpr dtype dtype_of();
template <> constexpr dtype dtype_of<float>() { return dtype::float32; }
template <> constexpr dtype dtype_of<double>() { return dtype::float64; }
template <> constexpr dtype dtype_of<std::int32_t>() { return dtype::int32; }
template <> constexpr dtype dtype_of<std::int64_t>() { return dtype::int64; }
template <> constexpr dtype dtype_of<bool>() { return dtype::boolean; }

/// Calls `f(T{})` with the C++ type of `t`; the usual way kernels switch on dtype.
template <class F>
decltype(auto) visit_dtype(dtype t, F&& f) {
  switch (t) {
    case dtype::float32: return f(float{});
    case dtype::float64: return f(double{});
    case dtype::int32: return f(std::int32_t{});
    case dtype::int64: return f(std::int64_t{});
    case dtype::boolean: break;
  }
  return f(bool{});
}

} // namespace actorflow

#pragma once
/// Tensor shapes, possibly partial (a dimension of -1 is unknown, an unknown rank is
/// `tensor_shape::unknown()`), and numpy-style broadcasting.
///   tensor_shape s{3, 4};                       // [3,4]
///   auto b = broadcast_shapes({3, 1}, {1, 4});  // [3,4]

#include "graph/status.hpp"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace actorflow {

class tensor_shape {
public:
  /// A scalar: rank 0.
  tensor_shape() = default;
  tensor_shape(std::initializer_list<std::int64_t> dims) : dims_(dims) {}
  explicit tensor_shape(std::vector<std::int64_t> dims) : dims_(std::move(dims)) {}

  /// A shape of unknown rank (placeholders without a shape).
  static tensor_shape unknown();

  bool rank_known() const { return rank_known_; }
  /// Rank; only meaningful when rank_known().
  int rank() const { return static_cast<int>(dims_.size()); }
  std::int64_t dim(int i) const { return dims_[static_cast<std::size_t>(i)]; }
  const std::vector<std::int64_t>& dims() const { return dims_; }
  void set_dim(int i, std::int64_t d) { dims_[static_cast<std::size_t>(i)] = d; }

  /// Known rank and no unknown dimension.
  bool fully_defined() const;
  /// Product of the dimensions (1 for a scalar); -1 when not fully defined.
  std::int64_t num_elements() const;

  /// Whether a concrete shape `other` is an instance of this (partial) shape.
  bool is_compatible_with(const tensor_shape& other) const;

  /// "[3,4]", "[?,784]", "[]" for a scalar, "<unknown>" for unknown rank.
  std::string to_string() const;

  friend bool operator==(const tensor_shape& a, const tensor_shape& b) {
    return a.rank_known_ == b.rank_known_ && a.dims_ == b.dims_;
  }
  friend bool operator!=(const tensor_shape& a, const tensor_shape& b) { return !(a == b); }

private:
  std::vector<std::int64_t> dims_;
  bool rank_known_ = true;
};

/// The numpy broadcast of two shapes; an error naming both shapes when they do not match.
result<tensor_shape> broadcast_shapes(const tensor_shape& a, const tensor_shape& b);

} // namespace actorflow

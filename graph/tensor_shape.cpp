#include "graph/tensor_shape.hpp"

#include <algorithm>

namespace actorflow {

tensor_shape tensor_shape::unknown() {
  tensor_shape s;
  s.rank_known_ = false;
  return s;
}

bool tensor_shape::fully_defined() const {
  return rank_known_ && std::none_of(dims_.begin(), dims_.end(), [](auto d) { return d < 0; });
}

std::int64_t tensor_shape::num_elements() const {
  if (!fully_defined())
    return -1;
  std::int64_t n = 1;
  for (auto d : dims_)
    n *= d;
  return n;
}

bool tensor_shape::is_compatible_with(const tensor_shape& other) const {
  if (!rank_known_ || !other.rank_known_)
    return true;
  if (dims_.size() != other.dims_.size())
    return false;
  for (std::size_t i = 0; i < dims_.size(); ++i)
    if (dims_[i] >= 0 && other.dims_[i] >= 0 && dims_[i] != other.dims_[i])
      return false;
  return true;
}

std::string tensor_shape::to_string() const {
  if (!rank_known_)
    return "<unknown>";
  std::string out = "[";
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (i > 0)
      out += ',';
    out += dims_[i] < 0 ? std::string{"?"} : std::to_string(dims_[i]);
  }
  return out + "]";
}

result<tensor_shape> broadcast_shapes(const tensor_shape& a, const tensor_shape& b) {
  if (!a.rank_known() || !b.rank_known())
    return tensor_shape::unknown();
  auto rank = std::max(a.rank(), b.rank());
  std::vector<std::int64_t> dims(static_cast<std::size_t>(rank));
  for (int i = 0; i < rank; ++i) {
    auto ai = a.rank() - 1 - i;
    auto bi = b.rank() - 1 - i;
    std::int64_t da = ai >= 0 ? a.dim(ai) : 1;
    std::int64_t db = bi >= 0 ? b.dim(bi) : 1;
    std::int64_t d;
    if (da == db)
      d = da;
    else if (da == 1)
      d = db;
    else if (db == 1)
      d = da;
    else if (da < 0 || db < 0)
      d = da < 0 ? db : da; // unknown against known: the known one must win at run time
    else
      return make_error(errc::invalid_argument, "incompatible shapes for broadcasting: " +
                                                  a.to_string() + " and " + b.to_string());
    dims[static_cast<std::size_t>(rank - 1 - i)] = d;
  }
  return tensor_shape{std::move(dims)};
}

} // namespace actorflow

#include "actors/tensor_header.hpp"

#include "actors/protocols/wire.hpp"

#include <limits>
#include <string>

namespace actorflow::tensor_header {

result<dtype> dtype_of_code(std::uint64_t code) {
  if (code > static_cast<std::uint64_t>(dtype::boolean))
    return make_error(errc::data_loss, "tensor with unknown dtype " + std::to_string(code));
  return static_cast<dtype>(code);
}

status check_rank(std::uint64_t rank) {
  if (rank > max_tensor_rank)
    return make_error(errc::data_loss, "tensor of rank " + std::to_string(rank) +
                                         " exceeds the limit of " + std::to_string(max_tensor_rank));
  return {};
}

result<std::pair<tensor_shape, std::uint64_t>> sized_shape(std::vector<std::int64_t> dims,
                                                           dtype type) {
  std::uint64_t elements = 1;
  bool overflow = false;
  for (auto dim : dims) {
    if (dim < 0)
      return make_error(errc::data_loss, "tensor with negative dimension " + std::to_string(dim));
    auto d = static_cast<std::uint64_t>(dim);
    if (d != 0 && elements > std::numeric_limits<std::uint64_t>::max() / d)
      overflow = true; // keep checking the other dimensions for negatives
    else
      elements *= d;
  }
  tensor_shape shape{std::move(dims)};
  auto element_size = size_of(type);
  if (overflow || elements > std::numeric_limits<std::uint64_t>::max() / element_size)
    return make_error(errc::data_loss, "tensor of shape " + shape.to_string() +
                                         " has more elements than fit in 64 bits");
  return std::make_pair(std::move(shape), elements * element_size);
}

status check_booleans(const void* data, std::uint64_t size, std::uint64_t first_index) {
  const auto* bytes = static_cast<const std::uint8_t*>(data);
  for (std::uint64_t i = 0; i < size; ++i)
    if (bytes[i] > 1)
      return make_error(errc::data_loss, "boolean tensor with byte value " +
                                           std::to_string(bytes[i]) + " at element " +
                                           std::to_string(first_index + i));
  return {};
}

} // namespace actorflow::tensor_header

#pragma once
/// The checks every tensor from another process passes before anything is allocated for it,
/// shared by the CAF wire format (actors/wire.cpp) and the bulk frames (actors/bulk_channel.cpp):
///   auto type = tensor_header::dtype_of_code(code);                 // unknown codes refused
///   AF_RETURN_IF_ERROR(tensor_header::check_rank(rank));            // rank <= max_tensor_rank
///   auto sized = tensor_header::sized_shape(std::move(dims), *type);// no negative dim, no overflow
///   AF_RETURN_IF_ERROR(tensor_header::check_booleans(data, n, 0));  // bool bytes are 0 or 1
/// Errors are data_loss and name what is wrong; callers add where it came from.

#include "graph/dtype.hpp"
#include "graph/status.hpp"
#include "graph/tensor_shape.hpp"

#include <cstdint>
#include <utility>
#include <vector>

namespace actorflow::tensor_header {

/// The dtype a wire code stands for.
result<dtype> dtype_of_code(std::uint64_t code);

/// Refuses a rank over max_tensor_rank (protocols/wire.hpp).
status check_rank(std::uint64_t rank);

/// The shape of `dims` and the bytes a `type` tensor of it holds; refuses negative dimensions
/// and shapes whose byte count does not fit in 64 bits.
result<std::pair<tensor_shape, std::uint64_t>> sized_shape(std::vector<std::int64_t> dims, dtype type);

/// Refuses boolean bytes other than 0 and 1; `first_index` is the first byte's element.
status check_booleans(const void* data, std::uint64_t size, std::uint64_t first_index);

} // namespace actorflow::tensor_header

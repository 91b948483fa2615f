// libFuzzer: the tensor header checks shared by CAF's wire format and the bulk frames
// (actors/tensor_header.hpp), in the order both decoders apply them. Any bytes give a checked
// shape or an error, never a crash, an overflow or a read past the input; a shape that passes
// has the byte count its dimensions say.
#include "actors/tensor_header.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace actorflow;
  if (size < 2)
    return 0;
  auto type = tensor_header::dtype_of_code(data[0]);
  if (!type || !tensor_header::check_rank(data[1]).ok())
    return 0;
  std::vector<std::int64_t> dims(data[1]);
  std::size_t offset = 2;
  for (auto& d : dims) {
    if (offset + sizeof d > size)
      return 0;
    std::memcpy(&d, data + offset, sizeof d);
    offset += sizeof d;
  }
  auto sized = tensor_header::sized_shape(dims, *type);
  if (sized) {
    unsigned __int128 bytes = size_of(*type);
    for (auto d : dims)
      bytes *= static_cast<std::uint64_t>(d);
    if (bytes != sized->second)
      std::abort();
  }
  static_cast<void>(tensor_header::check_booleans(data + offset, size - offset, 0));
  return 0;
}

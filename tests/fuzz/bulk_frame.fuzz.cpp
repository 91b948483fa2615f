// libFuzzer: the bulk frame header decoder (actors/bulk_channel.hpp), as the endpoint runs it:
// the fixed part sizes the whole header, which is then decoded. Any bytes give a header within
// the limits or an error, never a crash or a read past the input.
#include "actors/bulk_channel.hpp"
#include "actors/protocols/wire.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace actorflow;
  if (size < bulk_fixed_header_bytes)
    return 0;
  auto whole = bulk_frame_header_size(data, bulk_fixed_header_bytes);
  if (!whole || *whole > size)
    return 0;
  auto header = decode_bulk_frame_header(data, *whole);
  if (header && (header->byte_count > max_tensor_bytes() || header->key.size() > max_bulk_key_bytes))
    std::abort();
  return 0;
}

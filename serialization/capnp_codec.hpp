#pragma once
/// Building blocks for Cap'n Proto codecs inside serialization/ (graphs now; checkpoints and
/// wire messages later). Unlike graph_io.hpp this header includes capnp: only code in
/// serialization/ (and its tests) should include it.
///   auto bytes = message_bytes(builder);
///   status s = read_message<schema::Tensor>(data, size, "tensor", [&](auto root) { ... });
///   result<tensor> t = decode_tensor(root);   // every field checked, no giant allocation

#include "graph/dtype.hpp"
#include "graph/status.hpp"
#include "graph/tensor.hpp"
#include "graph/tensor_shape.hpp"
#include "serialization/graph.capnp.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/array.h>
#include <kj/exception.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

namespace actorflow::serialization {

/// The largest Data blob Cap'n Proto can hold (a list has at most 2^29 - 1 elements).
inline constexpr std::size_t max_blob_bytes = (std::size_t{1} << 29) - 1;

/// Nesting limit for readers: the graph schema nests about 8 levels deep.
inline constexpr int max_nesting_depth = 32;

schema::DType encode_dtype(dtype t);
/// The dtype for a wire value; data_loss naming the raw value when it is unknown.
result<dtype> decode_dtype(schema::DType t);

void encode_shape(const tensor_shape& shape, schema::Shape::Builder out);
/// Checks a shape read from the wire: dims >= -1 (or >= 0 when `fully_defined` is required),
/// no dims with unknown rank, and a product of known dims that fits in int64.
result<tensor_shape> decode_shape(schema::Shape::Reader in, bool fully_defined);

/// Writes a tensor's dtype, shape and bytes (one memcpy on little-endian hosts). Fails with
/// invalid_argument when the bytes exceed max_blob_bytes.
status encode_tensor(const tensor& t, schema::Tensor::Builder out);
/// The same, but a large tensor's bytes are not copied: the message refers to the tensor's
/// buffer (`orphanage`'s message writes them from there), where that writes the same bytes
/// (a little-endian host, a size that is a multiple of 8). The tensor must outlive the
/// message. What a checkpoint shard of gigabytes needs: it is written from the variables.
status encode_tensor_in_place(const tensor& t, schema::Tensor::Builder out,
                              capnp::Orphanage orphanage);
/// Whether encode_tensor_in_place refers to `t` rather than copying it.
bool encodes_in_place(const tensor& t);
/// Reads a tensor into a fresh buffer from the default host allocator, after checking that
/// the data size equals num_elements * size_of(dtype) (so nothing is allocated for a shape the
/// bytes do not back) and that booleans are 0 or 1. Errors are data_loss without context.
result<tensor> decode_tensor(schema::Tensor::Reader in);

/// A message as bytes (the standard unpacked framing with a segment table).
std::vector<std::uint8_t> message_bytes(capnp::MessageBuilder& builder);

/// Reader options for `words` words of input: a traversal limit proportional to the input (so
/// amplification through shared or zero-sized pointers is bounded) and max_nesting_depth.
capnp::ReaderOptions reader_options(std::size_t words);

/// Checks the framing of `size` bytes at `data` (any alignment; copied into an aligned buffer
/// when needed), opens the message and calls `f(root)` with its `Root::Reader`, which returns a
/// status, which is returned prefixed with "<what> (<size> bytes)". Any kj::Exception thrown while reading (truncation, bad pointers, limits) becomes
/// data_loss: "<what> (<size> bytes) is corrupt: ...". Trailing bytes after the message are an
/// error too. `what` names the input ("graph", "tensor").
template <class Root, class F>
status read_message(const std::uint8_t* data, std::size_t size, const std::string& what, F&& f) {
  constexpr std::size_t word_bytes = sizeof(capnp::word);
  auto describe = [&] { return what + " (" + std::to_string(size) + " bytes)"; };
  if (size == 0 || data == nullptr)
    return make_error(errc::data_loss, describe() + " is empty");
  if (size % word_bytes != 0)
    return make_error(errc::data_loss, describe() + " is not a whole number of " +
                                         std::to_string(word_bytes) + "-byte words: truncated?");
  auto words = size / word_bytes;
  try {
    kj::Array<capnp::word> aligned;
    kj::ArrayPtr<const capnp::word> view;
    if (reinterpret_cast<std::uintptr_t>(data) % alignof(capnp::word) == 0) {
      view = kj::arrayPtr(reinterpret_cast<const capnp::word*>(data), words);
    } else {
      aligned = kj::heapArray<capnp::word>(words);
      std::memcpy(aligned.begin(), data, size);
      view = aligned.asPtr();
    }
    capnp::FlatArrayMessageReader reader{view, reader_options(words)};
    if (reader.getEnd() != view.end()) {
      auto used = static_cast<std::size_t>(reader.getEnd() - view.begin()) * word_bytes;
      return make_error(errc::data_loss, describe() + " has " + std::to_string(size - used) +
                                           " trailing bytes after a message of " +
                                           std::to_string(used) + " bytes");
    }
    return status{f(reader.getRoot<Root>())}.with_context(describe());
  } catch (const kj::Exception& e) {
    return make_error(errc::data_loss, describe() + " is corrupt: " +
                                         std::string{e.getDescription().cStr()});
  } catch (const std::bad_alloc&) {
    return make_error(errc::resource_exhausted, describe() + ": out of memory while decoding");
  } catch (const std::exception& e) {
    return make_error(errc::internal, describe() + ": unexpected exception while decoding: " +
                                        e.what());
  }
}

} // namespace actorflow::serialization

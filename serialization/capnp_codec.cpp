#include "serialization/capnp_codec.hpp"

#include <kj/io.h>

#include <algorithm>
#include <limits>

namespace actorflow::serialization {

namespace {

constexpr bool host_is_little_endian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

/// Copies `bytes` bytes of elements of `element_size` bytes, converting between host order
/// and little-endian (the same operation both ways). One memcpy on little-endian hosts.
void copy_little_endian(void* dst, const void* src, std::size_t bytes, std::size_t element_size) {
  if (bytes == 0)
    return;
  if constexpr (host_is_little_endian) {
    std::memcpy(dst, src, bytes);
  } else {
    auto* d = static_cast<unsigned char*>(dst);
    auto* s = static_cast<const unsigned char*>(src);
    for (std::size_t i = 0; i < bytes; i += element_size)
      std::reverse_copy(s + i, s + i + element_size, d + i);
  }
}

status corrupt(std::string message) { return make_error(errc::data_loss, std::move(message)); }

} // namespace

schema::DType encode_dtype(dtype t) {
  switch (t) {
    case dtype::float32: return schema::DType::FLOAT32;
    case dtype::float64: return schema::DType::FLOAT64;
    case dtype::int32: return schema::DType::INT32;
    case dtype::int64: return schema::DType::INT64;
    case dtype::boolean: return schema::DType::BOOLEAN;
  }
  return schema::DType::FLOAT32;
}

result<dtype> decode_dtype(schema::DType t) {
  switch (t) {
    case schema::DType::FLOAT32: return dtype::float32;
    case schema::DType::FLOAT64: return dtype::float64;
    case schema::DType::INT32: return dtype::int32;
    case schema::DType::INT64: return dtype::int64;
    case schema::DType::BOOLEAN: return dtype::boolean;
  }
  return corrupt("unknown dtype value " + std::to_string(static_cast<std::uint16_t>(t)));
}

void encode_shape(const tensor_shape& shape, schema::Shape::Builder out) {
  out.setRankKnown(shape.rank_known());
  if (!shape.rank_known())
    return;
  auto dims = out.initDims(static_cast<unsigned>(shape.dims().size()));
  for (unsigned i = 0; i < dims.size(); ++i)
    dims.set(i, shape.dims()[i]);
}

result<tensor_shape> decode_shape(schema::Shape::Reader in, bool fully_defined) {
  auto rank_known = in.getRankKnown();
  auto dims = in.getDims();
  if (!rank_known) {
    if (fully_defined)
      return corrupt("shape has unknown rank where a fully defined shape is needed");
    if (dims.size() != 0)
      return corrupt("shape of unknown rank lists " + std::to_string(dims.size()) + " dimensions");
    return tensor_shape::unknown();
  }
  std::vector<std::int64_t> values;
  values.reserve(dims.size());
  // The product of the known dimensions, in order, must fit in int64: tensor_shape multiplies
  // them the same way and would overflow otherwise.
  std::int64_t product = 1;
  for (unsigned i = 0; i < dims.size(); ++i) {
    std::int64_t d = dims[i];
    if (d < (fully_defined ? 0 : -1))
      return corrupt("dimension " + std::to_string(i) + " is " + std::to_string(d) +
                     (fully_defined ? " (must be >= 0)" : " (must be >= -1)"));
    if (d >= 0) {
      if (d != 0 && product > std::numeric_limits<std::int64_t>::max() / d)
        return corrupt("dimensions overflow int64 at dimension " + std::to_string(i) + " (" +
                       std::to_string(d) + ")");
      product *= d;
    }
    values.push_back(d);
  }
  return tensor_shape{std::move(values)};
}

status encode_tensor(const tensor& t, schema::Tensor::Builder out) {
  out.setDtype(encode_dtype(t.type()));
  encode_shape(t.shape(), out.initShape());
  if (!t.is_initialized()) {
    out.setEmpty(true);
    return {};
  }
  if (auto st = t.check_on_host("encoding a tensor for Cap'n Proto"); !st.ok())
    return st;
  if (!t.shape().fully_defined())
    return make_error(errc::invalid_argument,
                      "tensor with a buffer has a partial shape " + t.shape().to_string());
  auto bytes = t.bytes();
  if (bytes > max_blob_bytes)
    return make_error(errc::invalid_argument,
                      "tensor " + std::string{to_string(t.type())} + t.shape().to_string() +
                        " has " + std::to_string(bytes) +
                        " bytes, more than one Cap'n Proto blob holds (" +
                        std::to_string(max_blob_bytes) + ")");
  auto data = out.initData(static_cast<unsigned>(bytes));
  copy_little_endian(data.begin(), t.raw_data(), bytes, size_of(t.type()));
  return {};
}

bool encodes_in_place(const tensor& t) {
  // Small ones are copied: the message stays one segment, written in one block.
  return host_is_little_endian && t.is_initialized() && t.on_host() && t.shape().fully_defined() &&
         t.bytes() >= (std::size_t{1} << 20) && t.bytes() % 8 == 0 && t.bytes() <= max_blob_bytes;
}

status encode_tensor_in_place(const tensor& t, schema::Tensor::Builder out,
                              capnp::Orphanage orphanage) {
  if (!encodes_in_place(t))
    return encode_tensor(t, out);
  out.setDtype(encode_dtype(t.type()));
  encode_shape(t.shape(), out.initShape());
  // Buffers are 64-byte aligned, as Cap'n Proto requires of external data.
  out.adoptData(orphanage.referenceExternalData(
    capnp::Data::Reader{static_cast<const kj::byte*>(t.raw_data()), t.bytes()}));
  return {};
}

result<tensor> decode_tensor(schema::Tensor::Reader in) {
  auto type = decode_dtype(in.getDtype());
  if (!type)
    return type.error();
  auto empty = in.getEmpty();
  auto shape = decode_shape(in.getShape(), !empty);
  if (!shape)
    return shape.error();
  auto data = in.getData();
  if (empty) {
    if (data.size() != 0)
      return corrupt("tensor marked empty carries " + std::to_string(data.size()) + " bytes");
    return tensor{*type, std::move(*shape), std::shared_ptr<buffer>{}};
  }
  // decode_shape checked that the product fits in int64. Compare element counts, not bytes,
  // so that nothing can overflow and nothing is allocated that the data does not back.
  auto elements = static_cast<std::uint64_t>(shape->num_elements());
  auto element_size = size_of(*type);
  if (data.size() % element_size != 0 || elements != data.size() / element_size)
    return corrupt("tensor " + std::string{to_string(*type)} + shape->to_string() + " needs " +
                   std::to_string(elements) + " elements of " + std::to_string(element_size) +
                   " bytes, but its data holds " + std::to_string(data.size()) + " bytes");
  if (*type == dtype::boolean) {
    for (std::size_t i = 0; i < data.size(); ++i)
      if (data[i] > 1)
        return corrupt("bool tensor element " + std::to_string(i) + " has byte value " +
                       std::to_string(data[i]) + " (must be 0 or 1)");
  }
  tensor t{*type, std::move(*shape)};
  copy_little_endian(t.raw_data(), data.begin(), data.size(), element_size);
  return t;
}

namespace {

/// Appends to a byte vector reserved to the final size, so a message is copied exactly once.
class vector_output_stream final : public kj::OutputStream {
public:
  explicit vector_output_stream(std::vector<std::uint8_t>& out) : out_(out) {}
  void write(const void* buffer, size_t size) override {
    auto* p = static_cast<const std::uint8_t*>(buffer);
    out_.insert(out_.end(), p, p + size);
  }

private:
  std::vector<std::uint8_t>& out_;
};

} // namespace

std::vector<std::uint8_t> message_bytes(capnp::MessageBuilder& builder) {
  auto segments = builder.getSegmentsForOutput();
  std::vector<std::uint8_t> out;
  out.reserve(capnp::computeSerializedSizeInWords(segments) * sizeof(capnp::word));
  vector_output_stream stream{out};
  capnp::writeMessage(stream, segments);
  return out;
}

capnp::ReaderOptions reader_options(std::size_t words) {
  capnp::ReaderOptions options;
  // A well-formed message is traversed about once; twice its size plus slack leaves room for
  // readers that look at a field twice, while an amplification attack (many pointers to one
  // object, long lists of zero-sized elements) runs into the limit after a bounded amount of
  // work and memory.
  options.traversalLimitInWords = static_cast<std::uint64_t>(words) * 2 + 1024;
  options.nestingLimit = max_nesting_depth;
  return options;
}

} // namespace actorflow::serialization

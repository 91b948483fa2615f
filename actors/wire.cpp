#include "actors/protocols/wire.hpp"

#include "actors/device_actor.hpp"
#include "actors/protocols/device.hpp"
#include "actors/protocols/task.hpp"
#include "serialization/graph_io.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/deserializer.hpp>
#include <caf/message.hpp>
#include <caf/serializer.hpp>

#include <cstring>
#include <limits>
#include <new>
#include <utility>
#include <vector>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "actorflow's wire format sends tensor bytes in host order and assumes a little-endian host"
#endif

namespace actorflow {
namespace {

constexpr caf::atom_value error_category = caf::atom("actorflow");

/// The bytes a binary deserializer has left; the maximum when the source cannot tell (then
/// only the caps bound an allocation).
std::size_t bytes_left(caf::deserializer& source) {
  if (auto* binary = dynamic_cast<caf::binary_deserializer*>(&source))
    return binary->remaining();
  return std::numeric_limits<std::size_t>::max();
}

/// Checks a claimed block size against `cap` and the input left, before anything is allocated.
caf::error check_block(caf::deserializer& source, std::uint64_t claimed, std::size_t cap,
                       const std::string& what) {
  if (claimed > cap)
    return make_wire_error(errc::resource_exhausted,
                           what + " of " + std::to_string(claimed) +
                             " bytes exceeds the per-message limit of " + std::to_string(cap) +
                             " bytes");
  if (claimed > bytes_left(source))
    return make_wire_error(errc::data_loss, what + " claims " + std::to_string(claimed) +
                                              " bytes but only " +
                                              std::to_string(bytes_left(source)) +
                                              " remain in the message: truncated?");
  return caf::none;
}

} // namespace

caf::error make_wire_error(errc code, std::string message) {
  return caf::error{static_cast<std::uint8_t>(code), error_category,
                    caf::make_message(std::move(message))};
}

status status_from_error(const caf::error& err) {
  if (!err)
    return status{};
  if (err.category() == error_category) {
    auto code = err.code() <= static_cast<std::uint8_t>(errc::internal)
                  ? static_cast<errc>(err.code())
                  : errc::internal;
    std::string message;
    if (err.context().match_elements<std::string>())
      message = err.context().get_as<std::string>(0);
    return status{code, std::move(message)};
  }
  auto code = err.category() == caf::atom("system") ? errc::data_loss : errc::unavailable;
  return status{code, caf::to_string(err)};
}

namespace wire {

caf::error save(caf::serializer& sink, const status& x) {
  auto code = static_cast<std::uint8_t>(x.code());
  auto message = x.message();
  return sink(code, message);
}

caf::error load(caf::deserializer& source, status& x) {
  std::uint8_t code = 0;
  std::string message;
  if (auto err = source(code, message))
    return err;
  if (code > static_cast<std::uint8_t>(errc::internal))
    return make_wire_error(errc::data_loss,
                           "status with unknown error code " + std::to_string(code));
  x = status{static_cast<errc>(code), std::move(message)};
  return caf::none;
}

caf::error save(caf::serializer& sink, const tensor& x) {
  auto type = static_cast<std::uint8_t>(x.type());
  bool initialized = x.is_initialized();
  if (auto err = sink(type, initialized))
    return err;
  if (!initialized)
    return caf::none;
  const auto& shape = x.shape();
  bool rank_known = shape.rank_known();
  auto rank = static_cast<std::uint32_t>(shape.dims().size());
  if (auto err = sink(rank_known, rank))
    return err;
  for (auto dim : shape.dims())
    if (auto err = sink(dim))
      return err;
  std::uint64_t byte_count = x.bytes();
  if (byte_count > max_tensor_message_bytes)
    return make_wire_error(errc::resource_exhausted,
                           std::string{"tensor "} + to_string(x.type()) + x.shape().to_string() + " of " + std::to_string(byte_count) +
                             " bytes exceeds the per-message limit of " +
                             std::to_string(max_tensor_message_bytes) +
                             " bytes (chunked transfers are not implemented yet)");
  if (auto err = sink(byte_count))
    return err;
  if (byte_count == 0)
    return caf::none;
  return sink.apply_raw(static_cast<std::size_t>(byte_count), x.raw_data());
}

caf::error load(caf::deserializer& source, tensor& x) {
  std::uint8_t type_raw = 0;
  bool initialized = false;
  if (auto err = source(type_raw, initialized))
    return err;
  if (type_raw > static_cast<std::uint8_t>(dtype::boolean))
    return make_wire_error(errc::data_loss,
                           "tensor with unknown dtype " + std::to_string(type_raw));
  auto type = static_cast<dtype>(type_raw);
  if (!initialized) {
    x = tensor{};
    return caf::none;
  }
  bool rank_known = false;
  std::uint32_t rank = 0;
  if (auto err = source(rank_known, rank))
    return err;
  if (!rank_known)
    return make_wire_error(errc::data_loss, "tensor with data but a shape of unknown rank");
  if (rank > max_tensor_rank)
    return make_wire_error(errc::data_loss, "tensor of rank " + std::to_string(rank) +
                                              " exceeds the limit of " +
                                              std::to_string(max_tensor_rank));
  std::vector<std::int64_t> dims(rank);
  std::uint64_t elements = 1;
  bool overflow = false;
  for (auto& dim : dims) {
    if (auto err = source(dim))
      return err;
    if (dim < 0)
      return make_wire_error(errc::data_loss,
                             "tensor with negative dimension " + std::to_string(dim));
    auto d = static_cast<std::uint64_t>(dim);
    if (d != 0 && elements > std::numeric_limits<std::uint64_t>::max() / d)
      overflow = true;
    else
      elements *= d;
  }
  tensor_shape shape{std::move(dims)};
  auto element_size = size_of(type);
  if (overflow || elements > std::numeric_limits<std::uint64_t>::max() / element_size)
    return make_wire_error(errc::data_loss, "tensor of shape " + shape.to_string() +
                                              " has more elements than fit in 64 bits");
  std::uint64_t expected = elements * element_size;
  std::uint64_t byte_count = 0;
  if (auto err = source(byte_count))
    return err;
  if (byte_count != expected)
    return make_wire_error(errc::data_loss,
                           std::string{"tensor "} + to_string(type) + shape.to_string() +
                             " needs " + std::to_string(expected) + " bytes but carries " +
                             std::to_string(byte_count));
  if (auto err = check_block(source, byte_count, max_tensor_message_bytes,
                             std::string{"tensor "} + to_string(type) + shape.to_string()))
    return err;
  try {
    tensor result{type, std::move(shape)};
    if (byte_count > 0) {
      if (auto err = source.apply_raw(static_cast<std::size_t>(byte_count), result.raw_data()))
        return err;
    }
    if (type == dtype::boolean) {
      const auto* bytes = static_cast<const std::uint8_t*>(result.raw_data());
      for (std::uint64_t i = 0; i < byte_count; ++i)
        if (bytes[i] > 1)
          return make_wire_error(errc::data_loss, "boolean tensor with byte value " +
                                                    std::to_string(bytes[i]) + " at element " +
                                                    std::to_string(i));
    }
    x = std::move(result);
  } catch (const std::bad_alloc&) {
    return make_wire_error(errc::resource_exhausted,
                           "out of memory allocating a tensor of " + std::to_string(byte_count) +
                             " bytes");
  }
  return caf::none;
}

caf::error save(caf::serializer& sink, const std::shared_ptr<const graph>& x) {
  bool present = x != nullptr;
  if (auto err = sink(present))
    return err;
  if (!present)
    return caf::none;
  auto bytes = serialize_graph(*x);
  if (!bytes)
    return make_wire_error(bytes.error().code(),
                           "cannot encode partition graph: " + bytes.error().message());
  std::uint64_t size = bytes->size();
  if (size > max_graph_message_bytes)
    return make_wire_error(errc::resource_exhausted,
                           "partition graph of " + std::to_string(size) +
                             " bytes exceeds the per-message limit of " +
                             std::to_string(max_graph_message_bytes) + " bytes");
  if (auto err = sink(size))
    return err;
  if (size == 0)
    return caf::none;
  return sink.apply_raw(bytes->size(), bytes->data());
}

caf::error load(caf::deserializer& source, std::shared_ptr<const graph>& x) {
  bool present = false;
  if (auto err = source(present))
    return err;
  if (!present) {
    x.reset();
    return caf::none;
  }
  std::uint64_t size = 0;
  if (auto err = source(size))
    return err;
  if (auto err = check_block(source, size, max_graph_message_bytes, "partition graph"))
    return err;
  try {
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
    if (size > 0)
      if (auto err = source.apply_raw(bytes.size(), bytes.data()))
        return err;
    auto decoded = std::make_shared<graph>();
    auto s = deserialize_graph(bytes.data(), bytes.size(), *decoded);
    if (!s.ok())
      return make_wire_error(s.code(), "partition graph: " + s.message());
    x = std::move(decoded);
  } catch (const std::bad_alloc&) {
    return make_wire_error(errc::resource_exhausted,
                           "out of memory decoding a partition graph of " +
                             std::to_string(size) + " bytes");
  }
  return caf::none;
}

} // namespace wire

void add_actorflow_message_types(caf::actor_system_config& cfg) {
  using namespace protocol;
  cfg.add_message_type<status>("actorflow::status");
  cfg.add_message_type<tensor>("actorflow::tensor");
  cfg.add_message_type<partition_registration>("actorflow::partition_registration");
  cfg.add_message_type<peer_table>("actorflow::peer_table");
  cfg.add_message_type<run_request>("actorflow::run_request");
  cfg.add_message_type<step_result>("actorflow::step_result");
  cfg.add_message_type<tensor_transfer>("actorflow::tensor_transfer");
  cfg.add_message_type<step_plan>("actorflow::step_plan");
  cfg.add_message_type<step_outcome>("actorflow::step_outcome");
  cfg.add_message_type<device_list>("actorflow::device_list");
  add_master_message_types(cfg);
  cfg.add_error_category(error_category, [](std::uint8_t code, caf::atom_value,
                                            const caf::message& context) {
    std::string result = "actorflow ";
    result += code <= static_cast<std::uint8_t>(errc::internal)
                ? to_string(static_cast<errc>(code))
                : "unknown error " + std::to_string(code);
    if (context.match_elements<std::string>()) {
      result += ": ";
      result += context.get_as<std::string>(0);
    }
    return result;
  });
}

} // namespace actorflow

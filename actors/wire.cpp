#include "actors/protocols/wire.hpp"
#include "actors/tensor_header.hpp"

#include "actors/device_actor.hpp"
#include "actors/protocols/collective.hpp"
#include "actors/protocols/device.hpp"
#include "actors/protocols/task.hpp"
#include "serialization/graph_io.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/deserializer.hpp>
#include <caf/message.hpp>
#include <caf/serializer.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
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

/// Reads a dtype code, refusing unknown ones.
caf::error load_dtype(caf::deserializer& source, dtype& type) {
  std::uint8_t raw = 0;
  if (auto err = source(raw))
    return err;
  auto checked = tensor_header::dtype_of_code(raw);
  if (!checked)
    return make_wire_error(checked.error());
  type = *checked;
  return caf::none;
}

/// Reads uint32 rank and the dimensions of a tensor of `type`; `bytes` becomes the byte count
/// the shape needs (tensor_header's checks: rank, negative dimensions, 64-bit overflow).
caf::error load_dims(caf::deserializer& source, dtype type, tensor_shape& shape,
                     std::uint64_t& bytes) {
  std::uint32_t rank = 0;
  if (auto err = source(rank))
    return err;
  if (auto st = tensor_header::check_rank(rank); !st.ok())
    return make_wire_error(st);
  std::vector<std::int64_t> dims(rank);
  for (auto& dim : dims)
    if (auto err = source(dim))
      return err;
  auto sized = tensor_header::sized_shape(std::move(dims), type);
  if (!sized)
    return make_wire_error(sized.error());
  shape = std::move(sized->first);
  bytes = sized->second;
  return caf::none;
}

/// Refuses boolean bytes other than 0 and 1; `first_index` names the first byte's element.
caf::error check_booleans(const void* data, std::uint64_t size, std::uint64_t first_index) {
  return make_wire_error(tensor_header::check_booleans(data, size, first_index));
}

} // namespace

caf::error make_wire_error(errc code, std::string message) {
  return caf::error{static_cast<std::uint8_t>(code), error_category,
                    caf::make_message(std::move(message))};
}

caf::error make_wire_error(const status& s) {
  if (s.ok())
    return caf::error{};
  if (!s.origin())
    return make_wire_error(s.code(), s.message());
  auto& from = *s.origin();
  return caf::error{static_cast<std::uint8_t>(s.code()), error_category,
                    caf::make_message(s.message(), from.job, std::int32_t{from.task},
                                      from.incarnation)};
}

status status_from_error(const caf::error& err) {
  if (!err)
    return status{};
  if (err.category() == error_category) {
    auto code = err.code() <= static_cast<std::uint8_t>(last_errc)
                  ? static_cast<errc>(err.code())
                  : errc::internal;
    auto& context = err.context();
    if (context.match_elements<std::string, std::string, std::int32_t, std::uint64_t>())
      return status{code, context.get_as<std::string>(0)}.with_origin(
        {context.get_as<std::string>(1), context.get_as<std::int32_t>(2),
         context.get_as<std::uint64_t>(3)});
    std::string message;
    if (context.match_elements<std::string>())
      message = context.get_as<std::string>(0);
    return status{code, std::move(message)};
  }
  auto code = err.category() == caf::atom("system") ? errc::data_loss : errc::unavailable;
  return status{code, caf::to_string(err)};
}

namespace wire {

caf::error save(caf::serializer& sink, const status& x) {
  auto code = static_cast<std::uint8_t>(x.code());
  auto message = x.message();
  bool has_origin = x.origin().has_value();
  if (auto err = sink(code, message, has_origin))
    return err;
  if (!has_origin)
    return caf::none;
  auto job = x.origin()->job;
  auto task = std::int32_t{x.origin()->task};
  auto incarnation = x.origin()->incarnation;
  return sink(job, task, incarnation);
}

caf::error load(caf::deserializer& source, status& x) {
  std::uint8_t code = 0;
  std::string message;
  bool has_origin = false;
  if (auto err = source(code, message, has_origin))
    return err;
  if (code > static_cast<std::uint8_t>(last_errc))
    return make_wire_error(errc::data_loss,
                           "status with unknown error code " + std::to_string(code));
  status loaded{static_cast<errc>(code), std::move(message)};
  if (has_origin) {
    std::string job;
    std::int32_t task = 0;
    std::uint64_t incarnation = 0;
    if (auto err = source(job, task, incarnation))
      return err;
    loaded = loaded.with_origin({std::move(job), task, incarnation});
  }
  x = std::move(loaded);
  return caf::none;
}

caf::error save(caf::serializer& sink, const tensor& x) {
  auto type = static_cast<std::uint8_t>(x.type());
  bool initialized = x.is_initialized();
  if (auto err = sink(type, initialized))
    return err;
  if (!initialized)
    return caf::none;
  if (auto st = x.check_on_host("encoding a tensor for a CAF message"); !st.ok())
    return make_wire_error(st.code(), st.message());
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
                             " bytes (only transfers between device actors are chunked)");
  if (auto err = sink(byte_count))
    return err;
  if (byte_count == 0)
    return caf::none;
  return sink.apply_raw(static_cast<std::size_t>(byte_count), x.raw_data());
}

caf::error load(caf::deserializer& source, tensor& x) {
  dtype type = dtype::float32;
  if (auto err = load_dtype(source, type))
    return err;
  bool initialized = false;
  if (auto err = source(initialized))
    return err;
  if (!initialized) {
    x = tensor{};
    return caf::none;
  }
  bool rank_known = false;
  if (auto err = source(rank_known))
    return err;
  if (!rank_known)
    return make_wire_error(errc::data_loss, "tensor with data but a shape of unknown rank");
  tensor_shape shape;
  std::uint64_t expected = 0;
  if (auto err = load_dims(source, type, shape, expected))
    return err;
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
    if (type == dtype::boolean)
      if (auto err = check_booleans(result.raw_data(), byte_count, 0))
        return err;
    x = std::move(result);
  } catch (const std::bad_alloc&) {
    return make_wire_error(errc::resource_exhausted,
                           "out of memory allocating a tensor of " + std::to_string(byte_count) +
                             " bytes");
  }
  return caf::none;
}

caf::error save(caf::serializer& sink, const protocol::tensor_chunk& x) {
  auto what = [&] {
    return "tensor chunk of '" + x.key + "' (bytes " + std::to_string(x.offset) + " to " +
           std::to_string(x.offset + x.size) + " of " + std::to_string(x.total_bytes) + ")";
  };
  // A sender's own mistakes, caught before anything is written.
  if (x.size == 0 || x.data == nullptr || x.offset > x.total_bytes ||
      x.size > x.total_bytes - x.offset)
    return make_wire_error(errc::internal, "malformed " + what());
  if (x.size > max_tensor_message_bytes)
    return make_wire_error(errc::resource_exhausted,
                           what() + " exceeds the per-message limit of " +
                             std::to_string(max_tensor_message_bytes) + " bytes");
  auto step_id = x.step_id;
  auto key = x.key;
  auto type = static_cast<std::uint8_t>(x.type);
  auto rank = static_cast<std::uint32_t>(x.shape.dims().size());
  if (auto err = sink(step_id, key, type, rank))
    return err;
  for (auto dim : x.shape.dims())
    if (auto err = sink(dim))
      return err;
  auto total = x.total_bytes;
  auto offset = x.offset;
  auto size = x.size;
  if (auto err = sink(total, offset, size))
    return err;
  return sink.apply_raw(static_cast<std::size_t>(size), const_cast<void*>(x.data));
}

caf::error load(caf::deserializer& source, protocol::tensor_chunk& x) {
  std::int64_t step_id = 0;
  std::string key;
  if (auto err = source(step_id, key))
    return err;
  dtype type = dtype::float32;
  if (auto err = load_dtype(source, type))
    return err;
  tensor_shape shape;
  std::uint64_t expected = 0;
  if (auto err = load_dims(source, type, shape, expected))
    return err;
  std::uint64_t total = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  if (auto err = source(total, offset, size))
    return err;
  auto what = "tensor chunk of '" + key + "' (" + to_string(type) + shape.to_string() + ")";
  if (total != expected)
    return make_wire_error(errc::data_loss, what + " declares " + std::to_string(total) +
                                              " bytes but its shape needs " +
                                              std::to_string(expected));
  if (total > max_tensor_bytes())
    return make_wire_error(errc::resource_exhausted,
                           what + " declares a tensor of " + std::to_string(total) +
                             " bytes, over the limit of " + std::to_string(max_tensor_bytes()) +
                             " bytes for one tensor");
  if (size == 0)
    return make_wire_error(errc::data_loss, what + " carries no bytes");
  if (offset > total || size > total - offset)
    return make_wire_error(errc::data_loss,
                           what + " with bytes " + std::to_string(offset) + " to " +
                             std::to_string(offset) + "+" + std::to_string(size) +
                             " does not fit the tensor's " + std::to_string(total) + " bytes");
  if (auto err = check_block(source, size, max_tensor_message_bytes, what))
    return err;
  try {
    auto storage = std::make_shared<buffer>(default_host_allocator(), static_cast<std::size_t>(size));
    if (auto err = source.apply_raw(static_cast<std::size_t>(size), storage->data()))
      return err;
    if (type == dtype::boolean)
      if (auto err = check_booleans(storage->data(), size, offset))
        return err;
    x.step_id = step_id;
    x.key = std::move(key);
    x.type = type;
    x.shape = std::move(shape);
    x.total_bytes = total;
    x.offset = offset;
    x.size = size;
    x.data = storage->data();
    x.storage = std::move(storage);
  } catch (const std::bad_alloc&) {
    return make_wire_error(errc::resource_exhausted,
                           "out of memory allocating a tensor chunk of " + std::to_string(size) +
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

namespace protocol {

std::vector<tensor_chunk> make_tensor_chunks(std::int64_t step_id, const std::string& key,
                                             const tensor& value, std::size_t chunk_bytes) {
  std::vector<tensor_chunk> chunks;
  const std::uint64_t total = value.is_initialized() ? value.bytes() : 0;
  const std::uint64_t step = std::max<std::size_t>(chunk_bytes, 1);
  const auto* base = static_cast<const char*>(value.raw_data());
  chunks.reserve(static_cast<std::size_t>((total + step - 1) / step));
  for (std::uint64_t offset = 0; offset < total; offset += step) {
    tensor_chunk chunk;
    chunk.step_id = step_id;
    chunk.key = key;
    chunk.type = value.type();
    chunk.shape = value.shape();
    chunk.total_bytes = total;
    chunk.offset = offset;
    chunk.size = std::min(step, total - offset);
    chunk.storage = value.buffer_ref();
    chunk.data = base + offset;
    chunks.push_back(std::move(chunk));
  }
  return chunks;
}

} // namespace protocol

void add_actorflow_message_types(caf::actor_system_config& cfg) {
  using namespace protocol;
  cfg.add_message_type<status>("actorflow::status");
  cfg.add_message_type<tensor>("actorflow::tensor");
  cfg.add_message_type<partition_registration>("actorflow::partition_registration");
  cfg.add_message_type<peer_table>("actorflow::peer_table");
  cfg.add_message_type<run_request>("actorflow::run_request");
  cfg.add_message_type<step_result>("actorflow::step_result");
  cfg.add_message_type<tensor_transfer>("actorflow::tensor_transfer");
  cfg.add_message_type<tensor_chunk>("actorflow::tensor_chunk");
  cfg.add_message_type<step_plan>("actorflow::step_plan");
  cfg.add_message_type<step_outcome>("actorflow::step_outcome");
  cfg.add_message_type<device_list>("actorflow::device_list");
  cfg.add_message_type<shard_value>("actorflow::shard_value");
  // A handle that is a whole answer (shard_atom) is a message element of its own.
  cfg.add_message_type<shard_actor>("actorflow::shard_actor");
  cfg.add_message_type<sync_gradient>("actorflow::sync_gradient");
  cfg.add_message_type<bulk_tensor>("actorflow::bulk_tensor");
  cfg.add_message_type<sync_outcome>("actorflow::sync_outcome");
  cfg.add_message_type<task_presence>("actorflow::task_presence");
  cfg.add_message_type<task_manifest>("actorflow::task_manifest");
  cfg.add_message_type<collective_member_info>("actorflow::collective_member_info");
  cfg.add_message_type<collective_group>("actorflow::collective_group");
  cfg.add_message_type<collective_request>("actorflow::collective_request");
  cfg.add_message_type<collective_piece_message>("actorflow::collective_piece_message");
  cfg.add_message_type<collective_abort>("actorflow::collective_abort");
  add_master_message_types(cfg);
  cfg.add_error_category(error_category, [](std::uint8_t code, caf::atom_value,
                                            const caf::message& context) {
    std::string result = "actorflow ";
    result += code <= static_cast<std::uint8_t>(last_errc)
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

// The bulk channel's frames (actors/bulk_channel.hpp): the header codec and its checks, and the
// size from which tensors take the channel.
#include "actors/bulk_channel.hpp"

#include "actors/protocols/wire.hpp"
#include "actors/tensor_header.hpp"

#include <cstdlib>
#include <cstring>
#include <limits>

namespace actorflow {

namespace {

std::atomic<std::size_t> min_bytes_override{0};

std::size_t min_bytes_from_environment() {
  return size_from_environment("ACTORFLOW_BULK_MIN_BYTES", default_bulk_min_bytes);
}

template <class T>
void put(std::vector<std::uint8_t>& out, T value) {
  auto at = out.size();
  out.resize(at + sizeof value);
  std::memcpy(out.data() + at, &value, sizeof value);
}

template <class T>
T get(const std::uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

/// The fixed header's fields, at their offsets.
struct fixed_header {
  std::uint32_t magic = 0;      // 0
  std::uint16_t version = 0;    // 4
  std::uint8_t type = 0;        // 6
  std::uint8_t reserved = 0;    // 7
  std::int64_t step_id = 0;     // 8
  std::uint32_t key_length = 0; // 16
  std::uint32_t rank = 0;       // 20
  std::uint64_t byte_count = 0; // 24
};

result<fixed_header> check_fixed(const void* data, std::size_t size) {
  if (data == nullptr || size < bulk_fixed_header_bytes)
    return make_error(errc::data_loss, "bulk frame header truncated: " + std::to_string(size) +
                                         " of " + std::to_string(bulk_fixed_header_bytes) +
                                         " bytes");
  const auto* p = static_cast<const std::uint8_t*>(data);
  fixed_header h;
  h.magic = get<std::uint32_t>(p);
  h.version = get<std::uint16_t>(p + 4);
  h.type = p[6];
  h.reserved = p[7];
  h.step_id = get<std::int64_t>(p + 8);
  h.key_length = get<std::uint32_t>(p + 16);
  h.rank = get<std::uint32_t>(p + 20);
  h.byte_count = get<std::uint64_t>(p + 24);
  if (h.magic != bulk_frame_magic)
    return make_error(errc::data_loss, "not a bulk frame (bad magic)");
  if (h.version != bulk_frame_version)
    return make_error(errc::data_loss, "bulk frame of unknown version " + std::to_string(h.version));
  if (auto type = tensor_header::dtype_of_code(h.type); !type)
    return type.error().with_context("bulk frame");
  if (h.reserved != 0)
    return make_error(errc::data_loss, "bulk frame with a non-zero reserved byte");
  if (h.key_length == 0 || h.key_length > max_bulk_key_bytes)
    return make_error(errc::data_loss, "bulk frame with a key of " + std::to_string(h.key_length) +
                                         " bytes (limit " + std::to_string(max_bulk_key_bytes) + ")");
  if (auto st = tensor_header::check_rank(h.rank); !st.ok())
    return st.with_context("bulk frame");
  if (h.byte_count > max_tensor_bytes())
    return make_error(errc::resource_exhausted,
                      "bulk frame of " + std::to_string(h.byte_count) +
                        " bytes exceeds this process's tensor limit of " +
                        std::to_string(max_tensor_bytes()) + " bytes");
  return h;
}

} // namespace

std::size_t bulk_min_bytes() {
  if (auto bytes = min_bytes_override.load(std::memory_order_relaxed))
    return bytes;
  static const std::size_t from_environment = min_bytes_from_environment();
  return from_environment;
}

void set_bulk_min_bytes(std::size_t bytes) {
  min_bytes_override.store(bytes, std::memory_order_relaxed);
}

result<std::vector<std::uint8_t>> encode_bulk_frame_header(std::int64_t step_id,
                                                           const std::string& key,
                                                           const tensor& value) {
  if (key.empty() || key.size() > max_bulk_key_bytes)
    return make_error(errc::invalid_argument, "bulk frame key of " + std::to_string(key.size()) +
                                                " bytes (limit " +
                                                std::to_string(max_bulk_key_bytes) + ")");
  if (auto st = value.check_on_host("a bulk frame for '" + key + "'"); !st.ok())
    return st;
  const auto& dims = value.shape().dims();
  if (!value.is_initialized() || !value.shape().rank_known() || dims.size() > max_tensor_rank)
    return make_error(errc::invalid_argument, "bulk frame for tensor " + value.debug_string() +
                                                ": uninitialized or rank over the limit");
  std::vector<std::uint8_t> out;
  out.reserve(bulk_fixed_header_bytes + key.size() + 8 * dims.size());
  put(out, bulk_frame_magic);
  put(out, bulk_frame_version);
  put(out, static_cast<std::uint8_t>(value.type()));
  put(out, std::uint8_t{0});
  put(out, step_id);
  put(out, static_cast<std::uint32_t>(key.size()));
  put(out, static_cast<std::uint32_t>(dims.size()));
  put(out, static_cast<std::uint64_t>(value.bytes()));
  out.insert(out.end(), key.begin(), key.end());
  for (auto dim : dims)
    put(out, static_cast<std::int64_t>(dim));
  return out;
}

result<std::size_t> bulk_frame_header_size(const void* data, std::size_t size) {
  auto h = check_fixed(data, size);
  if (!h)
    return h.error();
  return bulk_fixed_header_bytes + std::size_t{h->key_length} + 8 * std::size_t{h->rank};
}

result<bulk_frame_header> decode_bulk_frame_header(const void* data, std::size_t size) {
  auto h = check_fixed(data, size);
  if (!h)
    return h.error();
  auto whole = bulk_fixed_header_bytes + std::size_t{h->key_length} + 8 * std::size_t{h->rank};
  if (size < whole)
    return make_error(errc::data_loss, "bulk frame header truncated: " + std::to_string(size) +
                                         " of " + std::to_string(whole) + " bytes");
  const auto* p = static_cast<const std::uint8_t*>(data) + bulk_fixed_header_bytes;
  bulk_frame_header out;
  out.step_id = h->step_id;
  out.type = static_cast<dtype>(h->type);
  out.key.assign(reinterpret_cast<const char*>(p), h->key_length);
  p += h->key_length;
  std::vector<std::int64_t> dims(h->rank);
  for (auto& dim : dims) {
    dim = get<std::int64_t>(p);
    p += 8;
  }
  auto sized = tensor_header::sized_shape(std::move(dims), out.type);
  if (!sized)
    return sized.error().with_context("bulk frame");
  out.shape = std::move(sized->first);
  if (sized->second != h->byte_count)
    return make_error(errc::data_loss, std::string{"bulk frame: tensor "} + to_string(out.type) +
                                         out.shape.to_string() + " needs " +
                                         std::to_string(sized->second) +
                                         " bytes but the frame carries " +
                                         std::to_string(h->byte_count));
  out.byte_count = h->byte_count;
  return out;
}

} // namespace actorflow

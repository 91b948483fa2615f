#include "actors/protocols/collective.hpp"
#include "graph/device_name.hpp"

#include <algorithm>
#include <string_view>
#include <tuple>

namespace actorflow::protocol {

std::string collective_member_info::name() const {
  return task_name(job, task) + "/device:" + device;
}

collective_group make_collective_group(std::int64_t key,
                                       std::vector<collective_member_info> members) {
  std::stable_sort(members.begin(), members.end(), [](const auto& a, const auto& b) {
    return std::tie(a.job, a.task, a.device) < std::tie(b.job, b.task, b.device);
  });
  return {key, std::move(members)};
}

std::string collective_frame_key(std::int64_t group_key, std::int64_t instance_key,
                                 std::int32_t from, std::int64_t tag) {
  return std::string{collective_bulk_prefix} + std::to_string(group_key) + ";" +
         std::to_string(instance_key) + ";" + std::to_string(from) + ";" + std::to_string(tag);
}

std::optional<collective_piece_message> parse_collective_frame_key(const std::string& key) {
  std::string_view prefix{collective_bulk_prefix};
  if (key.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  std::int64_t fields[4];
  std::size_t at = prefix.size();
  for (int i = 0; i < 4; ++i) {
    auto end = i < 3 ? key.find(';', at) : key.size();
    if (end == std::string::npos || end == at)
      return std::nullopt;
    std::int64_t value = 0;
    bool negative = key[at] == '-';
    for (auto c = at + (negative ? 1 : 0); c < end; ++c) {
      if (key[c] < '0' || key[c] > '9' || value > (std::int64_t{1} << 58))
        return std::nullopt;
      value = value * 10 + (key[c] - '0');
    }
    fields[i] = negative ? -value : value;
    at = end + 1;
  }
  collective_piece_message piece;
  piece.group_key = fields[0];
  piece.instance_key = fields[1];
  piece.from = static_cast<std::int32_t>(fields[2]);
  piece.tag = fields[3];
  return piece;
}

collective_tuning collective_request::tuning() const {
  collective_tuning t;
  t.algorithm = static_cast<collective_algorithm>(algorithm);
  if (ring_min_bytes > 0)
    t.ring_min_bytes = static_cast<std::size_t>(ring_min_bytes);
  if (chunk_bytes > 0)
    t.chunk_bytes = static_cast<std::size_t>(chunk_bytes);
  return t;
}

collective_request make_all_reduce(std::int64_t group_key, std::int64_t instance_key,
                                   tensor value, reduction op, collective_tuning tuning,
                                   std::int64_t timeout_ms) {
  collective_request r;
  r.group_key = group_key;
  r.instance_key = instance_key;
  r.kind = collective_kind::all_reduce;
  r.op = op;
  r.algorithm = static_cast<std::uint8_t>(tuning.algorithm);
  r.ring_min_bytes = tuning.ring_min_bytes;
  r.chunk_bytes = tuning.chunk_bytes;
  r.value = std::move(value);
  r.timeout_ms = timeout_ms;
  return r;
}

collective_request make_broadcast(std::int64_t group_key, std::int64_t instance_key,
                                  std::int32_t root, tensor value, std::int64_t timeout_ms) {
  auto r = make_all_reduce(group_key, instance_key, std::move(value), reduction::sum, {},
                           timeout_ms);
  r.kind = collective_kind::broadcast;
  r.root = root;
  return r;
}

collective_request make_all_gather(std::int64_t group_key, std::int64_t instance_key,
                                   tensor value, std::int64_t timeout_ms) {
  auto r = make_all_reduce(group_key, instance_key, std::move(value), reduction::sum, {},
                           timeout_ms);
  r.kind = collective_kind::all_gather;
  return r;
}

} // namespace actorflow::protocol

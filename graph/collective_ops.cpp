#include "graph/collective_ops.hpp"

#include "graph/ops.hpp"

#include <algorithm>

namespace actorflow::ops {

namespace {

/// The instance keys a graph's collectives may have: below 2^12, less the last, which the
/// groups keep for their device communicators' set-up (devices/task_collective.hpp keeps the
/// same bound; graph/ has no access to it).
constexpr std::int64_t max_instance = (std::int64_t{1} << 12) - 2;

} // namespace

output collective_reduce(output x, const std::string& group, std::int64_t instance_key,
                         const std::string& reduction, const std::string& name) {
  auto& g = *x.owner;
  if (group.empty() || instance_key < 1 || instance_key > max_instance ||
      (reduction != "sum" && reduction != "mean" && reduction != "max" && reduction != "min")) {
    g.record_error(make_error(
      errc::invalid_argument,
      "collective_reduce '" + name + "': " +
        (group.empty() ? std::string{"needs a group name"}
         : instance_key < 1 || instance_key > max_instance
           ? "instance key " + std::to_string(instance_key) + " is not in 1.." +
               std::to_string(max_instance)
           : "reduction '" + reduction + "' is none of sum, mean, max, min")));
    return {};
  }
  auto beside = g.colocate_with(x);
  return make(g, "CollectiveReduce", name, {x},
              {{"collective_group", group}, {"instance_key", instance_key}, {"reduction", reduction}});
}

std::vector<output> all_reduce_in_buckets(const std::vector<output>& values,
                                          const std::string& group, const bucket_options& options,
                                          int* buckets, const std::string& name) {
  std::vector<output> reduced(values.size());
  if (buckets != nullptr)
    *buckets = 0;
  if (values.empty())
    return reduced;
  auto& g = *values.front().owner;
  // Walk from the last value back; a bucket is [begin, end) of that walk's positions.
  std::vector<std::size_t> order(values.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = values.size() - 1 - i;
  auto bytes_of = [&](const output& v) -> std::uint64_t {
    auto n = v.shape().num_elements();
    // Unknown sizes fill a bucket of their own.
    return n < 0 ? options.bytes : static_cast<std::uint64_t>(n) * size_of(v.type());
  };
  int made = 0;
  std::size_t begin = 0;
  while (begin < order.size()) {
    auto cap = made == 0 ? std::min(options.first_bytes, options.bytes) : options.bytes;
    auto type = values[order[begin]].type();
    std::uint64_t filled = bytes_of(values[order[begin]]);
    auto end = begin + 1;
    while (end < order.size() && values[order[end]].type() == type &&
           filled + bytes_of(values[order[end]]) <= cap)
      filled += bytes_of(values[order[end++]]);
    auto scope = g.name_scope(name + "_" + std::to_string(made));
    std::vector<output> flat;
    for (auto at = begin; at < end; ++at)
      flat.push_back(reshape(values[order[at]], {-1}, "flatten"));
    auto packed = flat.size() == 1 ? flat.front() : concat(flat, 0, "pack");
    auto sum = collective_reduce(packed, group, options.first_instance + made, options.reduction);
    if (!sum.valid())
      return reduced;
    if (flat.size() == 1) {
      reduced[order[begin]] = make(g, "ReshapeLike", "unpack", {sum, values[order[begin]]});
    } else {
      std::vector<output> inputs{sum};
      inputs.insert(inputs.end(), flat.begin(), flat.end());
      auto pieces = make(g, "SplitToShapesOf", "split", std::move(inputs), {{"axis", std::int64_t{0}}});
      for (auto at = begin; at < end; ++at)
        reduced[order[at]] =
          make(g, "ReshapeLike", "unpack",
               {g.output_of(pieces.node_id, static_cast<int>(at - begin)), values[order[at]]});
    }
    ++made;
    begin = end;
  }
  if (buckets != nullptr)
    *buckets = made;
  return reduced;
}

} // namespace actorflow::ops

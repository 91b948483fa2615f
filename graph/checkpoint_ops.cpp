#include "graph/checkpoint_ops.hpp"

#include "graph/op_registry.hpp"
#include "graph/ops.hpp"

#include <sstream>

namespace actorflow {

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (auto& n : names)
    out += (out.empty() ? "" : "\n") + n;
  return out;
}

status infer_save_shard(shape_context& c) {
  auto names = shard_entry_names(c.n);
  if (c.input_types.empty() || c.input_types[0] != dtype::int64)
    return make_error(errc::invalid_argument, "SaveShard takes the step (int64) first");
  if (names.size() + 1 != c.input_types.size())
    return make_error(errc::invalid_argument, "SaveShard names " + std::to_string(names.size()) +
                                                " entries for " +
                                                std::to_string(c.input_types.size() - 1) + " values");
  c.set_output(0, dtype::int64, tensor_shape{});
  return {};
}

status infer_restore_shard(shape_context& c) {
  if (c.input_types.size() != 2 || c.input_types[0] != dtype::int64 || c.input_types[1] != dtype::int64)
    return make_error(errc::invalid_argument, "RestoreShard takes the step and the shard's checksum (int64)");
  auto outputs = restore_shard_outputs(c.n);
  if (outputs.size() != shard_entry_names(c.n).size())
    return make_error(errc::invalid_argument, "RestoreShard's names and dtypes disagree");
  for (std::size_t i = 0; i < outputs.size(); ++i)
    c.set_output(static_cast<int>(i), outputs[i].first, outputs[i].second);
  return {};
}

} // namespace

void register_checkpoint_ops(op_registry& r) {
  // Stateful: they touch files, so none is merged with another or pruned as a duplicate.
  r.add(op_def{"SaveShard", -1, true, false, infer_save_shard});
  r.add(op_def{"RestoreShard", 2, true, false, infer_restore_shard});
}

std::vector<std::string> shard_entry_names(const node& n) {
  std::vector<std::string> names;
  std::istringstream lines{n.attr_or<std::string>("names", "")};
  for (std::string line; std::getline(lines, line);)
    names.push_back(line);
  return names;
}

std::vector<std::pair<dtype, tensor_shape>> restore_shard_outputs(const node& n) {
  std::vector<std::pair<dtype, tensor_shape>> out;
  auto types = n.attr_or<std::vector<std::int64_t>>("dtypes", {});
  auto shapes = n.attr_or<std::vector<std::int64_t>>("shapes", {});
  // shapes: per output its rank (-1: unknown) and that many dimensions.
  std::size_t at = 0;
  for (auto t : types) {
    tensor_shape shape = tensor_shape::unknown();
    if (at < shapes.size()) {
      auto rank = shapes[at++];
      if (rank >= 0 && at + static_cast<std::size_t>(rank) <= shapes.size()) {
        std::vector<std::int64_t> dims(shapes.begin() + static_cast<std::ptrdiff_t>(at),
                                       shapes.begin() + static_cast<std::ptrdiff_t>(at) + rank);
        shape = tensor_shape{dims};
        at += static_cast<std::size_t>(rank);
      }
    }
    out.emplace_back(static_cast<dtype>(t), shape);
  }
  return out;
}

namespace ops {

output save_shard(output step, const std::vector<output>& values,
                  const std::vector<std::string>& names, const std::string& directory, int shard,
                  const std::string& name) {
  auto& g = *step.owner;
  std::vector<output> inputs{step};
  inputs.insert(inputs.end(), values.begin(), values.end());
  std::optional<scope_guard> beside;
  if (!values.empty())
    beside.emplace(g.colocate_with(values.front()));
  return make(g, "SaveShard", name, std::move(inputs),
              {{"directory", directory}, {"names", joined(names)}, {"shard", std::int64_t{shard}}});
}

std::vector<output> restore_shard(output step, output expected_crc,
                                  const std::vector<std::string>& names,
                                  const std::vector<output>& like, const std::string& directory,
                                  int shard, const std::string& name) {
  auto& g = *step.owner;
  std::vector<std::int64_t> types, shapes;
  for (auto& l : like) {
    types.push_back(static_cast<std::int64_t>(l.type()));
    auto& shape = l.shape();
    if (!shape.rank_known()) {
      shapes.push_back(-1);
      continue;
    }
    shapes.push_back(shape.rank());
    shapes.insert(shapes.end(), shape.dims().begin(), shape.dims().end());
  }
  std::optional<scope_guard> beside;
  if (!like.empty())
    beside.emplace(g.colocate_with(like.front()));
  auto first = make(g, "RestoreShard", name, {step, expected_crc},
                    {{"directory", directory},
                     {"names", joined(names)},
                     {"shard", std::int64_t{shard}},
                     {"dtypes", types},
                     {"shapes", shapes}});
  std::vector<output> out;
  if (!first.valid())
    return out;
  for (std::size_t i = 0; i < like.size(); ++i)
    out.push_back(g.output_of(first.node_id, static_cast<int>(i)));
  return out;
}

} // namespace ops

} // namespace actorflow

// SaveShard and RestoreShard (graph/checkpoint_ops.hpp): the device that holds variables writes
// and reads its own shard of a checkpoint, so their values never leave its process.
#include "devices/cpu/kernels/cpu_kernels.hpp"
#include "devices/kernel.hpp"
#include "graph/checkpoint_ops.hpp"
#include "serialization/checkpoint.hpp"

namespace actorflow {

namespace {

std::string describe(dtype type, const tensor_shape& shape) {
  return std::string{to_string(type)} + shape.to_string();
}

class save_shard_kernel final : public op_kernel {
public:
  explicit save_shard_kernel(const node& n)
    : op_kernel(n), directory_(n.attr_or<std::string>("directory", "")),
      names_(shard_entry_names(n)), shard_(static_cast<int>(n.attr_or<std::int64_t>("shard", 0))) {}

  // Writes a file of any size: never inline on an actor's thread.
  bool is_expensive() const override { return true; }

  void compute(kernel_context& ctx) override {
    if (ctx.num_inputs() != static_cast<int>(names_.size()) + 1) {
      ctx.fail(make_error(errc::invalid_argument, "SaveShard names " + std::to_string(names_.size()) +
                                                    " entries for " + std::to_string(ctx.num_inputs() - 1) +
                                                    " values"));
      return;
    }
    auto step = ctx.input(0).scalar_value<std::int64_t>();
    checkpoint_entries entries;
    for (std::size_t i = 0; i < names_.size(); ++i) {
      auto& value = ctx.input(static_cast<int>(i) + 1);
      if (!value.is_initialized()) {
        ctx.fail(make_error(errc::failed_precondition,
                            "cannot save shard " + std::to_string(shard_) + ": variable '" +
                              names_[i] + "' is uninitialised"));
        return;
      }
      entries.emplace(names_[i], value);
    }
    auto crc = write_checkpoint_shard(directory_, step, shard_, entries);
    if (!crc) {
      ctx.fail(crc.error());
      return;
    }
    auto out = ctx.allocate_output(0, dtype::int64, tensor_shape{});
    out.data<std::int64_t>()[0] = static_cast<std::int64_t>(*crc);
  }

private:
  std::string directory_;
  std::vector<std::string> names_;
  int shard_;
};

class restore_shard_kernel final : public op_kernel {
public:
  explicit restore_shard_kernel(const node& n)
    : op_kernel(n), directory_(n.attr_or<std::string>("directory", "")),
      names_(shard_entry_names(n)), outputs_(restore_shard_outputs(n)),
      shard_(static_cast<int>(n.attr_or<std::int64_t>("shard", 0))) {}

  bool is_expensive() const override { return true; }

  void compute(kernel_context& ctx) override {
    auto step = ctx.input(0).scalar_value<std::int64_t>();
    auto crc = static_cast<std::uint32_t>(ctx.input(1).scalar_value<std::int64_t>());
    auto data = read_checkpoint_shard(directory_, step, shard_, crc);
    if (!data) {
      ctx.fail(data.error());
      return;
    }
    auto source = "checkpoint shard '" + checkpoint_shard_path(directory_, step, shard_) + "'";
    // Every entry checked before any output is set: the step fails whole, and with
    // all_or_nothing no variable anywhere changes.
    std::vector<const tensor*> found;
    for (std::size_t i = 0; i < names_.size() && i < outputs_.size(); ++i) {
      auto entry = data->entries.find(names_[i]);
      if (entry == data->entries.end()) {
        ctx.fail(make_error(errc::not_found, "cannot restore from " + source + ": it has no value for '" +
                                               names_[i] + "'"));
        return;
      }
      auto& [type, shape] = outputs_[i];
      auto& value = entry->second;
      if (value.type() != type || !shape.is_compatible_with(value.shape())) {
        ctx.fail(make_error(errc::invalid_argument,
                            "cannot restore from " + source + ": '" + names_[i] + "' is " +
                              describe(type, shape) + " but the shard holds " +
                              describe(value.type(), value.shape())));
        return;
      }
      found.push_back(&value);
    }
    for (std::size_t i = 0; i < found.size(); ++i)
      ctx.set_output(static_cast<int>(i), *found[i]);
  }

private:
  std::string directory_;
  std::vector<std::string> names_;
  std::vector<std::pair<dtype, tensor_shape>> outputs_;
  int shard_;
};

} // namespace

void register_checkpoint_shard_kernels(kernel_registry& registry) {
  registry.add("SaveShard", "CPU", {dtype::int64}, make_kernel<save_shard_kernel>);
  registry.add("RestoreShard", "CPU", {dtype::int64}, make_kernel<restore_shard_kernel>);
}

} // namespace actorflow

#include "actors/saver.hpp"

#include "graph/checkpoint_ops.hpp"
#include "graph/hash_embedding.hpp"
#include "graph/ops.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

namespace actorflow {

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

/// `directory` made absolute, without a trailing '/'.
std::string absolute_directory(const std::string& directory) {
  auto path = std::filesystem::absolute(directory).lexically_normal().string();
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  return path;
}

std::string describe(dtype type, const tensor_shape& shape) {
  return std::string{to_string(type)} + shape.to_string();
}

/// The checkpoint entries of a hash table shard, in export order.
const char* const table_parts[] = {"-keys", "-rows", "-last_steps", "-candidates", "-counts"};
const dtype table_part_types[] = {dtype::int64, dtype::float32, dtype::int64, dtype::int64, dtype::int64};

/// Floats per row of a table node's export: its dim for the value and for each slot it lists.
std::int64_t table_width(const node& table) {
  auto dim = table.attr_or<std::int64_t>("dim", 1);
  auto slots = table.attr_or<std::string>("slots", "");
  auto count = slots.empty() ? 0 : 1 + static_cast<std::int64_t>(std::count(slots.begin(), slots.end(), ','));
  return dim * (1 + count);
}

} // namespace

saver::saver(graph& g, std::vector<variable> vars) {
  if (vars.empty()) {
    vars_ = g.global_variables();
    for (int id = 0; id < static_cast<int>(g.size()); ++id)
      if (g.at(id).op == "HashEmbeddingTable")
        tables_.push_back(g.output_of(id));
  } else {
    for (auto& v : vars)
      if (is_hash_table(v))
        tables_.push_back(v.ref);
      else
        vars_.push_back(v);
  }
  std::set<std::string> seen;
  for (auto& t : tables_)
    if (!seen.insert(t.name()).second) {
      status_ = make_error(errc::invalid_argument, "saver: hash table " + quoted(t.name()) + " is listed twice");
      return;
    }
  for (std::size_t i = 0; i < vars_.size(); ++i) {
    auto& v = vars_[i];
    if (!v.ref.valid() || v.ref.owner != &g) {
      status_ = make_error(errc::invalid_argument,
                           "saver: variable " + std::to_string(i) + " is not a node of this graph");
      return;
    }
    if (!seen.insert(v.name()).second) {
      status_ = make_error(errc::invalid_argument,
                           "saver: variable " + quoted(v.name()) + " is listed twice");
      return;
    }
  }
  auto scope = g.name_scope("save");
  std::vector<output> assigns;
  for (auto& v : vars_) {
    auto value = ops::placeholder(g, v.ref.type(), v.ref.shape(), "restore_value");
    restore_values_.push_back(value);
    assigns.push_back(ops::assign(v, value, "restore"));
  }
  for (auto& t : tables_) {
    table_exports_.push_back(ops::hash_embedding_export(t, "export"));
    std::vector<output> values;
    for (std::size_t k = 0; k < 5; ++k)
      values.push_back(ops::placeholder(g, table_part_types[k], tensor_shape::unknown(), "restore_table"));
    table_restore_values_.push_back(values);
    assigns.push_back(ops::hash_embedding_import(t, values, "restore"));
  }
  restore_all_ = ops::group(g, assigns, "restore_all");
}

saver::saver(graph& g, std::vector<variable> vars, std::string shard_directory)
  : saver(g, std::move(vars)) {
  // Absolute: the tasks that write and read the shards have working directories of their own.
  if (!shard_directory.empty())
    shard_directory_ = absolute_directory(shard_directory);
  if (status_.ok() && !shard_directory_.empty())
    add_shards(g);
}

void saver::add_shards(graph& g) {
  // What each shard holds, by the device its variables and tables ask for: the values to save,
  // their names, and (restoring) how each restored value is put back.
  struct shard {
    std::vector<output> values;
    std::vector<std::string> names;
    std::vector<variable> vars;
    std::vector<output> tables;
  };
  std::map<std::string, shard> shards;
  for (auto& v : vars_) {
    auto& s = shards[v.ref.producer().requested_device];
    s.values.push_back(v.ref);
    s.names.push_back(v.name());
    s.vars.push_back(v);
  }
  for (std::size_t t = 0; t < tables_.size(); ++t) {
    auto& s = shards[tables_[t].producer().requested_device];
    for (std::size_t k = 0; k < 5; ++k) {
      s.values.push_back(table_exports_[t][k]);
      s.names.push_back(tables_[t].name() + table_parts[k]);
    }
    s.tables.push_back(tables_[t]);
  }
  auto scope = g.name_scope("save_shards");
  shard_step_ = ops::placeholder(g, dtype::int64, tensor_shape{}, "step");
  std::vector<output> assigns;
  int index = 0;
  for (auto& [device, s] : shards) {
    shard_checksums_.push_back(ops::save_shard(shard_step_, s.values, s.names, shard_directory_, index));
    shard_expected_checksums_.push_back(
      ops::placeholder(g, dtype::int64, tensor_shape{}, "checksum"));
    auto restored = ops::restore_shard(shard_step_, shard_expected_checksums_.back(), s.names,
                                       s.values, shard_directory_, index);
    if (restored.size() != s.names.size())
      return; // the graph recorded why
    std::size_t at = 0;
    for (auto& v : s.vars)
      assigns.push_back(ops::assign(v, restored[at++], "restore"));
    for (auto& table : s.tables) {
      std::vector<output> parts(restored.begin() + static_cast<std::ptrdiff_t>(at),
                                restored.begin() + static_cast<std::ptrdiff_t>(at + 5));
      at += 5;
      assigns.push_back(ops::hash_embedding_import(table, parts, "restore"));
    }
    ++index;
  }
  restore_shards_ = ops::group(g, assigns, "restore_shards");
}

result<checkpoint_entries> saver::values(session& s, std::int64_t step) const {
  if (!status_.ok())
    return status_;
  if (sharded()) {
    checkpoint_entries entries;
    auto written = s.run(shard_checksums_,
                         {{shard_step_, tensor::from_vector<std::int64_t>({step}, tensor_shape{})}});
    if (!written)
      return written.error().with_context("saver: cannot write the shards of step " +
                                          std::to_string(step));
    tensor checksums{dtype::int64, tensor_shape{static_cast<std::int64_t>(written->size())}};
    for (std::size_t k = 0; k < written->size(); ++k)
      checksums.data<std::int64_t>()[k] = written->at(k).scalar_value<std::int64_t>();
    entries.emplace(checkpoint_shards_entry, std::move(checksums));
    return entries;
  }
  std::vector<output> fetches;
  fetches.reserve(vars_.size());
  for (auto& v : vars_)
    fetches.push_back(v.ref);
  for (auto& exported : table_exports_)
    fetches.insert(fetches.end(), exported.begin(), exported.end());
  checkpoint_entries entries;
  if (fetches.empty())
    return entries;
  auto values = s.run(fetches);
  if (!values)
    return values.error().with_context("saver: cannot read the variables");
  for (std::size_t i = 0; i < vars_.size(); ++i) {
    // Fetching a variable node itself hands back an empty tensor while it is uninitialised.
    if (!values->at(i).is_initialized())
      return make_error(errc::failed_precondition,
                        "saver: cannot read the variables: variable " + quoted(vars_[i].name()) +
                          " is uninitialised");
    entries.emplace(vars_[i].name(), std::move(values->at(i)));
  }
  for (std::size_t t = 0; t < tables_.size(); ++t)
    for (std::size_t k = 0; k < 5; ++k)
      entries.emplace(tables_[t].name() + table_parts[k], std::move(values->at(vars_.size() + 5 * t + k)));
  return entries;
}

status saver::save(session& s, checkpoint_manager& m, std::int64_t step) {
  if (sharded() && absolute_directory(m.directory()) != shard_directory_)
    return make_error(errc::invalid_argument, "saver: its shards go to '" + shard_directory_ +
                                                "', not to the checkpoint directory '" +
                                                m.directory() + "'");
  auto entries = values(s, step);
  if (!entries)
    return entries.error();
  auto path = m.save(step, *entries);
  if (!path)
    return path.error().with_context("saver: step " + std::to_string(step));
  return {};
}

status saver::restore(session& s, const std::string& path) {
  if (!status_.ok())
    return status_;
  auto data = read_checkpoint(path);
  if (!data)
    return data.error().with_context("saver: cannot restore");
  return restore(s, *data, "checkpoint '" + path + "'");
}

status saver::restore(session& s, const checkpoint_data& data, const std::string& source) {
  if (!status_.ok())
    return status_;
  if (data.entries.count(checkpoint_shards_entry) > 0)
    return restore_shards(s, data, source);
  // Check every variable before anything runs, so that a mismatch changes nothing.
  feed_list feeds;
  feeds.reserve(vars_.size());
  for (std::size_t i = 0; i < vars_.size(); ++i) {
    auto& v = vars_[i];
    auto entry = data.entries.find(v.name());
    if (entry == data.entries.end())
      return make_error(errc::not_found, "saver: cannot restore from " + source +
                                           ": it has no value for variable " + quoted(v.name()));
    auto& value = entry->second;
    auto type = v.ref.type();
    auto& shape = v.ref.shape();
    if (!value.is_initialized() || value.type() != type || !shape.is_compatible_with(value.shape()))
      return make_error(errc::invalid_argument,
                        "saver: cannot restore from " + source + ": variable " + quoted(v.name()) +
                          " is " + describe(type, shape) + " but the checkpoint holds " +
                          (value.is_initialized() ? describe(value.type(), value.shape())
                                                  : std::string{"no value"}));
    feeds.emplace_back(restore_values_[i], value);
  }
  for (std::size_t t = 0; t < tables_.size(); ++t) {
    auto& table = tables_[t];
    std::vector<const tensor*> parts;
    for (std::size_t k = 0; k < 5; ++k) {
      auto entry = data.entries.find(table.name() + table_parts[k]);
      if (entry == data.entries.end())
        return make_error(errc::not_found, "saver: cannot restore from " + source +
                                             ": it has no " + table_parts[k] + " of hash table " +
                                             quoted(table.name()));
      auto& value = entry->second;
      auto rank = k == 1 ? 2 : 1;
      if (!value.is_initialized() || value.type() != table_part_types[k] || value.shape().rank() != rank)
        return make_error(errc::invalid_argument,
                          "saver: cannot restore from " + source + ": the " + table_parts[k] +
                            " of hash table " + quoted(table.name()) + " should be a " +
                            to_string(table_part_types[k]) + " tensor of rank " + std::to_string(rank) +
                            ", got " + (value.is_initialized() ? describe(value.type(), value.shape())
                                                               : std::string{"no value"}));
      parts.push_back(&value);
    }
    auto width = table_width(table.producer());
    auto n = parts[0]->shape().dim(0);
    if (parts[1]->shape().dim(0) != n || parts[1]->shape().dim(1) != width ||
        parts[2]->shape().dim(0) != n || parts[3]->shape().dim(0) != parts[4]->shape().dim(0))
      return make_error(errc::invalid_argument,
                        "saver: cannot restore from " + source + ": hash table " + quoted(table.name()) +
                          " takes " + std::to_string(width) + " floats a row (its dim and slots), the "
                          "checkpoint holds " + std::to_string(n) + " keys with rows " +
                          parts[1]->shape().to_string() + ", last steps " + parts[2]->shape().to_string() +
                          " and " + parts[3]->shape().to_string() + " candidates with counts " +
                          parts[4]->shape().to_string());
    for (std::size_t k = 0; k < 5; ++k)
      feeds.emplace_back(table_restore_values_[t][k], *parts[k]);
  }
  if (feeds.empty())
    return {};
  return s.run_targets({restore_all_}, feeds).with_context("saver: restoring from " + source);
}

status saver::restore_shards(session& s, const checkpoint_data& data, const std::string& source) {
  if (!sharded())
    return make_error(errc::invalid_argument,
                      "saver: " + source + " is sharded (its values are in the files of the devices "
                      "that saved them): restore it with a sharded saver");
  auto& checksums = data.entries.at(checkpoint_shards_entry);
  if (checksums.type() != dtype::int64 ||
      checksums.num_elements() != static_cast<std::int64_t>(shard_expected_checksums_.size()))
    return make_error(errc::invalid_argument,
                      "saver: cannot restore from " + source + ": it has " +
                        std::to_string(checksums.num_elements()) + " shards, this saver " +
                        std::to_string(shard_expected_checksums_.size()) +
                        " (another model, or another placement)");
  feed_list feeds{{shard_step_, tensor::from_vector<std::int64_t>({data.step}, tensor_shape{})}};
  for (std::size_t k = 0; k < shard_expected_checksums_.size(); ++k)
    feeds.emplace_back(shard_expected_checksums_[k],
                       tensor::from_vector<std::int64_t>({checksums.data<std::int64_t>()[k]},
                                                         tensor_shape{}));
  // All or nothing: every device's restored values are held until every shard was read and
  // checked, so a bad shard anywhere changes no variable anywhere.
  run_options all_or_nothing;
  all_or_nothing.all_or_nothing = true;
  auto restored = s.run_with(all_or_nothing, {}, feeds, {restore_shards_});
  if (!restored)
    return restored.error().with_context("saver: restoring from " + source);
  return {};
}

background_saver::background_saver(saver& from, checkpoint_manager& to)
  : from_(from), to_(to), writer_([this] { write_loop(); }) {}

background_saver::~background_saver() {
  static_cast<void>(wait());
  {
    std::lock_guard<std::mutex> guard{mutex_};
    stopping_ = true;
  }
  changed_.notify_all();
  writer_.join();
}

status background_saver::save(session& s, std::int64_t step) {
  AF_RETURN_IF_ERROR(wait());
  auto entries = from_.values(s, step);
  if (!entries)
    return entries.error();
  {
    std::lock_guard<std::mutex> guard{mutex_};
    pending_.emplace(step, std::move(*entries));
    writing_ = true;
  }
  changed_.notify_all();
  return {};
}

status background_saver::wait() {
  std::unique_lock<std::mutex> lock{mutex_};
  changed_.wait(lock, [this] { return !writing_; });
  auto outcome = std::move(last_write_);
  last_write_ = {};
  return outcome;
}

void background_saver::write_loop() {
  std::unique_lock<std::mutex> lock{mutex_};
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || pending_.has_value(); });
    if (!pending_)
      return;
    auto [step, entries] = std::move(*pending_);
    pending_.reset();
    lock.unlock();
    if (before_write_)
      before_write_();
    auto path = to_.save(step, entries);
    lock.lock();
    last_write_ = path ? status{} : path.error().with_context("saver: step " + std::to_string(step));
    writing_ = false;
    changed_.notify_all();
  }
}

} // namespace actorflow

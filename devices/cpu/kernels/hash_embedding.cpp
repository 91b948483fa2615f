// The hash embedding ops' kernels (graph/hash_embedding.cpp defines the ops). The table lives in
// the device's resources as a variable_state whose `table` is set (devices/hash_embedding_table
// .hpp); every kernel uses it under the state's mutex. All but HashEmbeddingTable and
// _HashShardIds take the table as a ref, so a served table's shard actor runs them in its
// mailbox order (devices/kernel.cpp wraps them), lookups included: a lookup makes rows.
#include "devices/cpu/kernels/kernel_util.hpp"
#include "devices/device.hpp"
#include "devices/ftrl.hpp"
#include "devices/hash_embedding_table.hpp"

#include <cmath>
#include <cstring>

namespace actorflow {

namespace {

using namespace cpu;

/// The slots a table node lists ("name=initial,..."), in column order.
std::vector<std::pair<std::string, float>> parse_slots(const std::string& list) {
  std::vector<std::pair<std::string, float>> slots;
  std::size_t at = 0;
  while (at < list.size()) {
    auto end = list.find(',', at);
    if (end == std::string::npos)
      end = list.size();
    auto item = list.substr(at, end - at);
    auto eq = item.find('=');
    if (!item.empty())
      slots.emplace_back(item.substr(0, eq),
                         eq == std::string::npos ? 0.0f : std::stof(item.substr(eq + 1)));
    at = end + 1;
  }
  return slots;
}

/// Makes the table on first run (announcing it, so that a task serves it with a shard actor);
/// outputs a token and its size.
class hash_table_kernel : public op_kernel {
public:
  explicit hash_table_kernel(const node& n) : op_kernel(n) {
    config_.dim = n.attr_or<std::int64_t>("dim", 1);
    config_.initializer = hash_initializer{n.attr_or<std::string>("initializer", "zeros"),
                                           n.attr_or<double>("init_a", 0), n.attr_or<double>("init_b", 0)};
    config_.admit_after = n.attr_or<std::int64_t>("admit_after", 0);
    config_.evict_after = n.attr_or<std::int64_t>("evict_after", 0);
    config_.seed = static_cast<std::uint64_t>(n.attr_or<std::int64_t>("seed", 0));
    config_.slots = parse_slots(n.attr_or<std::string>("slots", ""));
  }
  void compute(kernel_context& ctx) override {
    auto state = ctx.resources().variable(name());
    std::int64_t size = 0;
    {
      std::lock_guard<std::mutex> guard{state->mutex};
      if (!state->table)
        state->table = std::make_shared<hash_embedding_table>(config_);
      size = state->table->size();
    }
    ctx.set_output(0, tensor::scalar<float>(0.0f));
    ctx.set_output(1, tensor::scalar<std::int64_t>(size));
  }

private:
  hash_embedding_table::config config_;
};

/// The common part of the kernels on a table: find it, lock it, run `use` on it.
class on_table_kernel : public op_kernel {
public:
  explicit on_table_kernel(const node& n)
    : op_kernel(n), table_(n.attr_or<std::string>("variable", "")) {}

protected:
  template <class Use>
  void with_table(kernel_context& ctx, Use&& use) {
    auto state = ctx.resources().find_variable(table_);
    if (!state)
      return ctx.fail(missing());
    std::lock_guard<std::mutex> guard{state->mutex};
    if (!state->table)
      return ctx.fail(missing());
    use(*state->table, *state);
  }
  status bad(const std::string& why) const {
    return make_error(errc::invalid_argument, op() + " node '" + name() + "' on hash table '" +
                                                table_ + "': " + why);
  }
  const std::string& table() const { return table_; }

private:
  status missing() const {
    return make_error(errc::failed_precondition, op() + " node '" + name() + "': hash table '" +
                                                   table_ + "' does not exist on this device");
  }
  std::string table_;
};

class hash_find_kernel : public on_table_kernel {
public:
  using on_table_kernel::on_table_kernel;
  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 1, dtype::int64) || !check_input(ctx, 2, dtype::int64))
      return;
    auto& ids = ctx.input(1);
    auto step = ctx.input(2).num_elements() > 0 ? ctx.input(2).data<std::int64_t>()[0] : -1;
    with_table(ctx, [&](hash_embedding_table& t, variable_state&) {
      auto n = ids.num_elements();
      auto out = ctx.allocate_output(0, dtype::float32, tensor_shape{std::vector<std::int64_t>{n, t.dim()}});
      t.lookup(ids.data<std::int64_t>(), n, step, out.data<float>());
    });
  }
};

/// The sparse updates' common part: per (id, gradient row) with a row, `update(row, grad)`;
/// ids without a row (not admitted, evicted) are dropped. Outputs the rows applied.
class hash_apply_kernel : public on_table_kernel {
public:
  using on_table_kernel::on_table_kernel;

protected:
  template <class Prepare>
  void apply(kernel_context& ctx, int rows_input, int ids_input, Prepare&& prepare) {
    if (!check_input(ctx, rows_input, dtype::float32) || !check_input(ctx, ids_input, dtype::int64))
      return;
    auto& grads = ctx.input(rows_input);
    auto& ids = ctx.input(ids_input);
    with_table(ctx, [&](hash_embedding_table& t, variable_state& state) {
      auto dim = t.dim();
      if (grads.num_elements() != ids.num_elements() * dim)
        return ctx.fail(bad(std::to_string(ids.num_elements()) + " ids for gradient rows of shape " +
                            grads.shape().to_string() + " (rows of " + std::to_string(dim) + ")"));
      auto update = prepare(t);
      if (!ctx.status().ok())
        return;
      std::int64_t applied = 0;
      const float* g = grads.data<float>();
      const std::int64_t* id = ids.data<std::int64_t>();
      for (std::int64_t i = 0; i < ids.num_elements(); ++i)
        if (float* row = t.row_for_update(id[i])) {
          update(row, g + i * dim, dim);
          ++applied;
        }
      state.count_update();
      ctx.set_output(0, tensor::scalar<std::int64_t>(applied));
    });
  }
  float scalar(const kernel_context& ctx, int i) { return ctx.input(i).data<float>()[0]; }
  bool check_scalars(kernel_context& ctx, std::initializer_list<int> at) {
    for (int i : at) {
      if (!check_input(ctx, i, dtype::float32))
        return false;
      if (ctx.input(i).num_elements() != 1) {
        ctx.fail(bad("input " + std::to_string(i) + " must be a scalar"));
        return false;
      }
    }
    return true;
  }
};

/// row -= lr * grad
class hash_apply_gradient_descent_kernel : public hash_apply_kernel {
public:
  using hash_apply_kernel::hash_apply_kernel;
  void compute(kernel_context& ctx) override {
    if (!check_scalars(ctx, {1}))
      return;
    float lr = scalar(ctx, 1);
    apply(ctx, 2, 3, [lr](hash_embedding_table&) {
      return [lr](float* row, const float* grad, std::int64_t dim) {
        view(row, dim) -= lr * view(grad, dim);
      };
    });
  }
};

/// accum ("Adagrad" slot) += grad^2; row -= lr * grad / sqrt(accum)
class hash_apply_adagrad_kernel : public hash_apply_kernel {
public:
  explicit hash_apply_adagrad_kernel(const node& n)
    : hash_apply_kernel(n), initial_(static_cast<float>(n.attr_or<double>("initial_accumulator_value", 0.1))) {}
  void compute(kernel_context& ctx) override {
    if (!check_scalars(ctx, {1}))
      return;
    float lr = scalar(ctx, 1);
    apply(ctx, 2, 3, [&](hash_embedding_table& t) {
      auto accum = t.slot_offset("Adagrad", initial_);
      return [lr, accum](float* row, const float* grad, std::int64_t dim) {
        auto g = view(grad, dim);
        auto a = view(row + accum, dim);
        a += g.square();
        view(row, dim) -= lr * g / a.sqrt();
      };
    });
  }

private:
  float initial_;
};

/// FTRL-Proximal (devices/ftrl.hpp) on the row with its slots "Ftrl" (accum) and "Ftrl_1"
/// (linear): SparseApplyFtrlV2's arithmetic (V1 when l2_shrinkage is 0).
class hash_apply_ftrl_kernel : public hash_apply_kernel {
public:
  explicit hash_apply_ftrl_kernel(const node& n)
    : hash_apply_kernel(n), initial_(static_cast<float>(n.attr_or<double>("initial_accumulator_value", 0.1))) {}
  void compute(kernel_context& ctx) override {
    if (!check_scalars(ctx, {3, 4, 5, 6, 7}))
      return;
    ftrl_parameters<float> p{scalar(ctx, 3), scalar(ctx, 4), scalar(ctx, 5), scalar(ctx, 6), scalar(ctx, 7)};
    if (auto checked = check_ftrl_parameters(p, op() + " node '" + name() + "'"); !checked.ok())
      return ctx.fail(std::move(checked));
    apply(ctx, 1, 2, [&](hash_embedding_table& t) {
      auto accum = t.slot_offset("Ftrl", initial_);
      auto linear = t.slot_offset("Ftrl_1", 0.0f);
      return [p, accum, linear](float* row, const float* grad, std::int64_t dim) {
        ftrl_update(row, row + accum, row + linear, grad, dim, p);
      };
    });
  }

private:
  float initial_;
};

tensor vector_tensor(const std::vector<std::int64_t>& v) {
  return tensor::from_vector<std::int64_t>(v, tensor_shape{std::vector<std::int64_t>{static_cast<std::int64_t>(v.size())}});
}

class hash_export_kernel : public on_table_kernel {
public:
  using on_table_kernel::on_table_kernel;
  void compute(kernel_context& ctx) override {
    with_table(ctx, [&](hash_embedding_table& t, variable_state&) {
      auto c = t.export_contents();
      auto n = static_cast<std::int64_t>(c.keys.size());
      ctx.set_output(0, vector_tensor(c.keys));
      ctx.set_output(1, tensor::from_vector<float>(c.rows, tensor_shape{std::vector<std::int64_t>{n, t.width()}}));
      ctx.set_output(2, vector_tensor(c.last_steps));
      ctx.set_output(3, vector_tensor(c.candidates));
      ctx.set_output(4, vector_tensor(c.counts));
    });
  }
};

class hash_import_kernel : public on_table_kernel {
public:
  using on_table_kernel::on_table_kernel;
  void compute(kernel_context& ctx) override {
    for (int i : {1, 3, 4, 5})
      if (!check_input(ctx, i, dtype::int64))
        return;
    if (!check_input(ctx, 2, dtype::float32))
      return;
    auto ints = [&](int i) {
      auto& t = ctx.input(i);
      return std::vector<std::int64_t>(t.data<std::int64_t>(), t.data<std::int64_t>() + t.num_elements());
    };
    hash_embedding_table::contents c;
    c.keys = ints(1);
    auto& rows = ctx.input(2);
    c.rows.assign(rows.data<float>(), rows.data<float>() + rows.num_elements());
    c.last_steps = ints(3);
    c.candidates = ints(4);
    c.counts = ints(5);
    with_table(ctx, [&](hash_embedding_table& t, variable_state& state) {
      auto imported = t.import_contents(c, op() + " node '" + name() + "' on hash table '" + table() + "'");
      if (!imported.ok())
        return ctx.fail(std::move(imported));
      state.count_update();
      ctx.set_output(0, tensor::scalar<std::int64_t>(t.size()));
    });
  }
};

/// For each id its shard (hash_shard_of) and its position.
class hash_shard_ids_kernel : public op_kernel {
public:
  explicit hash_shard_ids_kernel(const node& n)
    : op_kernel(n), shards_(n.attr_or<std::int64_t>("num_shards", 1)) {}
  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, dtype::int64))
      return;
    auto& ids = ctx.input(0);
    auto shard = ctx.allocate_output(0, dtype::int32, ids.shape());
    auto position = ctx.allocate_output(1, dtype::int32, ids.shape());
    for (std::int64_t i = 0; i < ids.num_elements(); ++i) {
      shard.data<std::int32_t>()[i] = static_cast<std::int32_t>(hash_shard_of(ids.data<std::int64_t>()[i], shards_));
      position.data<std::int32_t>()[i] = static_cast<std::int32_t>(i);
    }
  }

private:
  std::int64_t shards_;
};

} // namespace

void register_hash_embedding_kernels(kernel_registry& registry) {
  // Keyed by the table's token (float32) or, for _HashShardIds, the ids (int64).
  std::vector<dtype> keyed{dtype::float32};
  registry.add("HashEmbeddingTable", "CPU", keyed, make_kernel<hash_table_kernel>);
  registry.add("HashEmbeddingFind", "CPU", keyed, make_kernel<hash_find_kernel>);
  registry.add("HashEmbeddingApplyGradientDescent", "CPU", keyed, make_kernel<hash_apply_gradient_descent_kernel>);
  registry.add("HashEmbeddingApplyAdagrad", "CPU", keyed, make_kernel<hash_apply_adagrad_kernel>);
  registry.add("HashEmbeddingApplyFtrl", "CPU", keyed, make_kernel<hash_apply_ftrl_kernel>);
  registry.add("HashEmbeddingExport", "CPU", keyed, make_kernel<hash_export_kernel>);
  registry.add("HashEmbeddingImport", "CPU", keyed, make_kernel<hash_import_kernel>);
  registry.add("_HashShardIds", "CPU", {dtype::int64}, make_kernel<hash_shard_ids_kernel>);
}

} // namespace actorflow

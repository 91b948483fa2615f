// Hash embeddings through real sessions (graph/hash_embedding.hpp): rows made on first touch and
// the same in every process, admission, eviction, sparse updates against the same optimizers on
// a plain table, checkpoints, and shards on two ps tasks of an in-process cluster.
#include "actors/saver.hpp"
#include "actors/session.hpp"
#include "devices/hash_embedding_table.hpp"
#include "graph/gradients.hpp"
#include "graph/hash_embedding.hpp"
#include "graph/metrics.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "graph/replica_device_setter.hpp"
#include "graph/sparse_ops.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

using namespace actorflow;
using actorflow::test::temp_dir;

namespace {

tensor ids_of(const std::vector<std::int64_t>& values) {
  return tensor::from_vector<std::int64_t>(values, tensor_shape{std::vector<std::int64_t>{
                                                     static_cast<std::int64_t>(values.size())}});
}

/// A hash embedding looked up at fed ids (and a fed step), trained towards fed targets by
/// `opt` (none: lookups only).
struct hash_model {
  graph g;
  hash_embedding table;
  output ids, step, targets, rows, loss, train;
  hash_model(std::int64_t dim, hash_initializer init, int shards, hash_embedding_options o,
             optimizer* opt, std::int64_t batch, bool fed_step = false) {
    ids = ops::placeholder(g, dtype::int64, tensor_shape{std::vector<std::int64_t>{batch}}, "ids");
    if (fed_step)
      step = ops::placeholder(g, dtype::int64, tensor_shape{std::vector<std::int64_t>{}}, "step");
    table = ops::hash_embedding(g, "emb", dim, init, shards, o);
    rows = ops::hash_embedding_lookup(table, ids, step);
    if (opt != nullptr) {
      targets = ops::placeholder(g, dtype::float32, {batch, dim}, "targets");
      loss = ops::reduce_sum(ops::square(ops::sub(rows, targets)));
      train = opt->minimize(loss, table.variables());
    }
  }
  /// Each shard's size, read by running its table node.
  std::vector<std::int64_t> sizes(session& s) {
    auto r = s.run(table.sizes());
    REQUIRE(r.ok());
    std::vector<std::int64_t> out;
    for (auto& t : *r)
      out.push_back(t.scalar_value<std::int64_t>());
    return out;
  }
};

std::vector<float> rows_of(session& s, hash_model& m, const std::vector<std::int64_t>& ids,
                           feed_list extra = {}) {
  extra.emplace_back(m.ids, ids_of(ids));
  auto r = s.run({m.rows}, extra);
  INFO(r.error().to_string());
  REQUIRE(r.ok());
  return r->at(0).to_vector<float>();
}

tensor targets_of(std::vector<float> values, std::int64_t dim) {
  auto n = static_cast<std::int64_t>(values.size()) / dim;
  return tensor::from_vector<float>(values, tensor_shape{std::vector<std::int64_t>{n, dim}});
}

} // namespace

TEST_CASE("a hash embedding makes each id's row on first touch, the same row in every process, on the shard its hash picks", "[actors][sparse][hash_embedding]") {
  auto init = hash_initializer::uniform(-1, 1);
  hash_embedding_options o;
  o.seed = 5;
  const std::vector<std::int64_t> ids{7, 100, 7, std::int64_t{1} << 40, -3, 0, 100, 55};
  std::vector<float> first;
  for (int process = 0; process < 2; ++process) {
    hash_model m{3, init, 2, o, nullptr, 8};
    INFO(m.g.status().to_string());
    INFO(m.g.status().to_string());
  REQUIRE(m.g.status().ok());
    CHECK(m.rows.shape() == (tensor_shape{8, 3}));
    session s{m.g};
    CHECK(m.sizes(s) == std::vector<std::int64_t>{0, 0});
    auto got = rows_of(s, m, ids);
    for (std::size_t i = 0; i < ids.size(); ++i)
      for (std::int64_t c = 0; c < 3; ++c) {
        auto v = got[i * 3 + static_cast<std::size_t>(c)];
        CHECK(v == hash_embedding_table::initial_value(init, 5, ids[i], c));
        CHECK(v >= -1.0f);
        CHECK(v < 1.0f);
      }
    // Distinct ids get distinct rows.
    CHECK(got[0] != got[3]);
    std::vector<std::int64_t> expected{0, 0};
    for (auto id : {7, 100, 0, -3, 55})
      ++expected[static_cast<std::size_t>(hash_shard_of(id, 2))];
    ++expected[static_cast<std::size_t>(hash_shard_of(std::int64_t{1} << 40, 2))];
    CHECK(m.sizes(s) == expected);
    CHECK(expected[0] > 0);
    CHECK(expected[1] > 0);
    if (process == 0)
      first = got;
    else
      CHECK(got == first);  // a restarted process makes the same rows
  }
  // Another seed, other rows.
  CHECK(hash_embedding_table::initial_value(init, 6, 7, 0) != first[0]);
}

TEST_CASE("with admission an id has no row before its Nth lookup: zeros are looked up and its gradients dropped", "[actors][sparse][hash_embedding]") {
  hash_embedding_options o;
  o.admit_after = 3;
  gradient_descent_optimizer sgd{0.5};
  hash_model m{2, hash_initializer::constant(0.25), 1, o, &sgd, 2};
  INFO(m.g.status().to_string());
  REQUIRE(m.g.status().ok());
  session s{m.g};
  auto targets = targets_of({1, 1, 1, 1}, 2);
  auto step = [&](std::vector<std::int64_t> ids) {
    auto r = s.run({m.rows}, {{m.ids, ids_of(ids)}, {m.targets, targets}}, {m.train});
    INFO(r.error().to_string());
    REQUIRE(r.ok());
    return r->at(0).to_vector<float>();
  };
  // A lookup counts each distinct id of its batch once: id 9 is seen in three lookups.
  CHECK(step({4, 9}) == std::vector<float>{0, 0, 0, 0});
  CHECK(step({9, 7}) == std::vector<float>{0, 0, 0, 0});
  CHECK(m.sizes(s) == std::vector<std::int64_t>{0});
  CHECK(step({9, 4}) == std::vector<float>{0.25f, 0.25f, 0, 0});
  CHECK(m.sizes(s) == std::vector<std::int64_t>{1});
  // Id 9 got its update (0.25 - 0.5 * 2 * (0.25 - 1)); id 4's gradients were dropped, and its
  // third lookup makes its row at the initial value.
  CHECK(step({9, 4}) == std::vector<float>{1.0f, 1.0f, 0.25f, 0.25f});
  CHECK(m.sizes(s) == std::vector<std::int64_t>{2});
}

TEST_CASE("with eviction a row untouched for more than T steps is dropped and made anew", "[actors][sparse][hash_embedding]") {
  hash_embedding_options o;
  o.evict_after = 2;
  gradient_descent_optimizer sgd{0.25};
  hash_model m{1, hash_initializer::constant(0.5), 1, o, &sgd, 1, /*fed_step=*/true};
  INFO(m.g.status().to_string());
  REQUIRE(m.g.status().ok());
  session s{m.g};
  auto train_at = [&](std::int64_t id, std::int64_t global_step) {
    REQUIRE(s.run_targets({m.train}, {{m.ids, ids_of({id})},
                                      {m.step, tensor::scalar<std::int64_t>(global_step)},
                                      {m.targets, targets_of({2.5f}, 1)}})
              .ok());
  };
  auto look_at = [&](std::int64_t id, std::int64_t global_step) {
    return rows_of(s, m, {id}, {{m.step, tensor::scalar<std::int64_t>(global_step)}})[0];
  };
  train_at(1, 0);  // 0.5 - 0.25 * 2 * (0.5 - 2.5) = 1.5
  train_at(2, 1);
  CHECK(look_at(1, 2) == 1.5f);  // 2 steps untouched: kept (and touched again at 2)
  train_at(2, 3);
  train_at(2, 4);
  CHECK(m.sizes(s) == std::vector<std::int64_t>{2});
  train_at(2, 5);  // id 1 last seen at step 2: gone at 5
  CHECK(m.sizes(s) == std::vector<std::int64_t>{1});
  CHECK(look_at(1, 5) == 0.5f);  // a new row
  CHECK(m.sizes(s) == std::vector<std::int64_t>{2});
}

TEST_CASE("gradient descent, Adagrad and FTRL train a hash embedding as they train the same rows of a plain table", "[actors][sparse][hash_embedding][optimizers]") {
  // Ids 1000, 7, 1 << 33 and 42 of the hash table are rows 0-3 of a plain table starting at the
  // same constant; batches repeat ids, and the table's shards are two.
  const std::vector<std::int64_t> hash_ids{1000, 7, std::int64_t{1} << 33, 42};
  const std::vector<std::vector<int>> batches{{0, 1, 0, 3}, {2, 2, 1, 0}, {3, 0, 1, 1}};
  const std::vector<float> targets{0.5f, -1, 2, 0.25f, -0.5f, 1, 1.5f, 0};
  for (std::string kind : {"sgd", "adagrad", "ftrl"}) {
    INFO(kind);
    auto make_opt = [&]() -> std::unique_ptr<optimizer> {
      if (kind == "sgd")
        return std::make_unique<gradient_descent_optimizer>(0.1);
      if (kind == "adagrad")
        return std::make_unique<adagrad_optimizer>(0.3, 0.2);
      return std::make_unique<ftrl_optimizer>(0.3, -0.5, 0.1, 0.01, 0.05, 0.1);
    };
    auto hash_opt = make_opt();
    hash_model m{2, hash_initializer::constant(0.1), 2, {}, hash_opt.get(), 4};
    INFO(m.g.status().to_string());
    INFO(m.g.status().to_string());
  REQUIRE(m.g.status().ok());
    bool table_update = false;
    for (int id = 0; id < static_cast<int>(m.g.size()); ++id)
      table_update = table_update || m.g.at(id).op.rfind("HashEmbeddingApply", 0) == 0;
    CHECK(table_update);
    session hs{m.g};

    graph g;
    auto plain = ops::variable(g, ops::fill(g, {4, 2}, ops::scalar_like(g, dtype::float32, 0.1)), "plain");
    auto ids = ops::placeholder(g, dtype::int64, tensor_shape{std::vector<std::int64_t>{4}}, "ids");
    auto target = ops::placeholder(g, dtype::float32, {4, 2}, "targets");
    auto loss = ops::reduce_sum(ops::square(ops::sub(ops::embedding_lookup(plain, ids), target)));
    auto plain_opt = make_opt();
    auto train = plain_opt->minimize(loss, {plain});
    REQUIRE(g.status().ok());
    session ps{g};
    REQUIRE(ps.run_targets({ops::global_variables_initializer(g)}).ok());

    for (auto& b : batches) {
      std::vector<std::int64_t> as_hash, as_rows;
      for (auto i : b) {
        as_hash.push_back(hash_ids[static_cast<std::size_t>(i)]);
        as_rows.push_back(i);
      }
      auto t = targets_of(targets, 2);
      REQUIRE(hs.run_targets({m.train}, {{m.ids, ids_of(as_hash)}, {m.targets, t}}).ok());
      REQUIRE(ps.run_targets({train}, {{ids, ids_of(as_rows)}, {target, t}}).ok());
    }
    auto expected = ps.run({plain.read});
    REQUIRE(expected.ok());
    auto want = expected->at(0).to_vector<float>();
    auto got = rows_of(hs, m, hash_ids);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("element " << i);
      CHECK(got[i] == Approx(want[i]).margin(1e-6));
    }
    CHECK(want != std::vector<float>(8, 0.1f));
  }
}

TEST_CASE("a checkpoint saves a hash embedding's keys, rows, slots and counts and restores them into a new process", "[actors][sparse][hash_embedding][saver]") {
  temp_dir dir;
  checkpoint_manager manager{dir.path(), 2};
  hash_embedding_options o;
  o.admit_after = 2;
  auto targets = targets_of({1, 2, 3, 4, 5, 6}, 2);
  auto batch = std::vector<std::int64_t>{5, 6, 5};
  std::vector<tensor> exported;
  std::vector<float> after_save;
  {
    adagrad_optimizer opt{0.2, 0.1};
    hash_model m{2, hash_initializer::uniform(-1, 1), 2, o, &opt, 3};
    saver sv{m.g};
    REQUIRE(sv.status().ok());
    CHECK(sv.tables().size() == 2);
    session s{m.g};
    for (auto ids : {batch, std::vector<std::int64_t>{5, 8, 6}})
      REQUIRE(s.run_targets({m.train}, {{m.ids, ids_of(ids)}, {m.targets, targets}}).ok());
    // 5 and 6 admitted and trained; 8 seen once (a candidate).
    REQUIRE(sv.save(s, manager, 2).ok());
    auto e = manager.latest();
    REQUIRE(e.has_value());
    auto data = read_checkpoint(*e);
    REQUIRE(data.ok());
    std::int64_t keys = 0, candidates = 0;
    for (auto& shard : m.table.shards) {
      auto& rows = data->entries.at(shard.name() + "-rows");
      keys += data->entries.at(shard.name() + "-keys").num_elements();
      candidates += data->entries.at(shard.name() + "-candidates").num_elements();
      CHECK(rows.shape().dim(1) == 4);  // the value and Adagrad's accumulator
    }
    CHECK(keys == 2);
    CHECK(candidates == 1);
    REQUIRE(s.run_targets({m.train}, {{m.ids, ids_of({8, 6, 5})}, {m.targets, targets}}).ok());
    after_save = rows_of(s, m, {8, 6, 5});
  }
  // A new process: the same graph, restored, then the same step.
  adagrad_optimizer opt{0.2, 0.1};
  hash_model m{2, hash_initializer::uniform(-1, 1), 2, o, &opt, 3};
  saver sv{m.g};
  session s{m.g};
  REQUIRE(sv.restore(s, *manager.latest()).ok());
  CHECK(m.sizes(s)[0] + m.sizes(s)[1] == 2);
  REQUIRE(s.run_targets({m.train}, {{m.ids, ids_of({8, 6, 5})}, {m.targets, targets}}).ok());
  auto again = rows_of(s, m, {8, 6, 5});
  REQUIRE(again.size() == after_save.size());
  for (std::size_t i = 0; i < again.size(); ++i)
    CHECK(again[i] == Approx(after_save[i]).margin(1e-7));
  // Id 8's count came back: its second lookup admitted it (a row, not zeros) in both runs.
  CHECK(again[0] != 0.0f);

  // A table of another width is refused, naming it, and nothing changes.
  gradient_descent_optimizer sgd{0.1};
  hash_model other{3, hash_initializer::zeros(), 2, o, &sgd, 3};
  saver other_saver{other.g};
  session os{other.g};
  auto refused = other_saver.restore(os, *manager.latest());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.message().find("hash table 'emb/part_") != std::string::npos);
  CHECK(other.sizes(os) == std::vector<std::int64_t>{0, 0});
}

TEST_CASE("a hash embedding's shards on two ps tasks train as in one process", "[actors][sparse][hash_embedding][cluster]") {
  const std::vector<std::vector<std::int64_t>> batches{{3, 11, 3, 900}, {12, 11, 77, 3}, {900, 5, 5, 6}};
  auto targets = targets_of({1, -1, 0.5f, 2, 0, 1, -2, 0.25f}, 2);
  auto train = [&](bool cluster) {
    graph g;
    output ids, target, rows, step;
    hash_embedding table;
    {
      auto setter = replica_device_setter(2);
      REQUIRE(setter.ok());
      std::optional<scope_guard> dev;
      if (cluster)
        dev.emplace(g.device(*setter));
      ids = ops::placeholder(g, dtype::int64, tensor_shape{std::vector<std::int64_t>{4}}, "ids");
      target = ops::placeholder(g, dtype::float32, {4, 2}, "targets");
      table = ops::hash_embedding(g, "emb", 2, hash_initializer::normal(0, 0.5), 2);
      rows = ops::hash_embedding_lookup(table, ids);
      gradient_descent_optimizer sgd{0.2};
      step = sgd.minimize(ops::reduce_sum(ops::square(ops::sub(rows, target))), table.variables());
    }
    REQUIRE(g.status().ok());
    if (cluster) {
      CHECK(g.at(table.shards[0].node_id).requested_device.find("/job:ps/task:0") != std::string::npos);
      CHECK(g.at(table.shards[1].node_id).requested_device.find("/job:ps/task:1") != std::string::npos);
    }
    session_options options;
    if (cluster)
      options.in_process_cluster = {{"ps", 2}, {"worker", 1}};
    session s{g, options};
    for (auto& b : batches) {
      auto stepped = s.run_targets({step}, {{ids, ids_of(b)}, {target, targets}});
      INFO(stepped.to_string());
      REQUIRE(stepped.ok());
    }
    auto sizes = s.run(table.sizes());
    REQUIRE(sizes.ok());
    std::vector<std::int64_t> shard_sizes;
    for (auto& t : *sizes)
      shard_sizes.push_back(t.scalar_value<std::int64_t>());
    auto r = s.run({rows}, {{ids, ids_of({3, 11, 900, 77})}});
    INFO(r.error().to_string());
    REQUIRE(r.ok());
    return std::make_pair(shard_sizes, r->at(0).to_vector<float>());
  };
  // Updates served by a shard actor count in its variable's series (devices/variable_shard.cpp):
  // each shard applied one update per step, in its mailbox.
  auto& metrics = default_metrics();
  auto was_enabled = metrics.enabled();
  metrics.set_enabled(true);
  auto updates_of = [&](const std::string& shard) -> metric_counter& {
    return metrics.counter("actorflow_shard_updates_total",
                           "Updates a parameter shard applied, by variable.", {{"variable", shard}});
  };
  auto before = std::make_pair(updates_of("emb/part_0").value(), updates_of("emb/part_1").value());
  auto cluster = train(true);
  CHECK(updates_of("emb/part_0").value() - before.first == batches.size());
  CHECK(updates_of("emb/part_1").value() - before.second == batches.size());
  metrics.set_enabled(was_enabled);
  auto local = train(false);
  // Seven distinct ids, each on the shard its hash names.
  std::vector<std::int64_t> expected{0, 0};
  for (auto id : {3, 11, 900, 12, 77, 5, 6})
    ++expected[static_cast<std::size_t>(hash_shard_of(id, 2))];
  CHECK(cluster.first == expected);
  CHECK(local.first == expected);
  REQUIRE(cluster.second.size() == local.second.size());
  for (std::size_t i = 0; i < local.second.size(); ++i)
    CHECK(cluster.second[i] == Approx(local.second[i]).margin(1e-6));
}

TEST_CASE("hash embeddings refuse what they cannot do with errors naming the table", "[actors][sparse][hash_embedding]") {
  {
    graph g;
    auto table = ops::hash_embedding(g, "emb", 2, hash_initializer::zeros(), 1);
    auto ids = ops::placeholder(g, dtype::int32, tensor_shape{std::vector<std::int64_t>{3}}, "ids");
    static_cast<void>(ops::hash_embedding_lookup(table, ids));
    REQUIRE_FALSE(g.status().ok());
    CHECK(g.status().message().find("hash_embedding_lookup of 'emb': ids must be int64") != std::string::npos);
  }
  {
    graph g;
    static_cast<void>(ops::hash_embedding(g, "emb", 2, hash_initializer{"xavier", 0, 0}, 1));
    REQUIRE_FALSE(g.status().ok());
    CHECK(g.status().message().find("initializer 'xavier'") != std::string::npos);
  }
  {
    momentum_optimizer momentum{0.1, 0.9};
    hash_model m{2, hash_initializer::zeros(), 2, {}, &momentum, 3};
    REQUIRE_FALSE(m.g.status().ok());
    CHECK(m.g.status().message().find("MomentumOptimizer cannot update hash table 'emb/part_0'") != std::string::npos);
  }
  {
    graph g;
    auto table = ops::hash_embedding(g, "emb", 2, hash_initializer::zeros(), 1);
    gradient_descent_optimizer sgd{0.1};
    static_cast<void>(sgd.apply_gradients({{ops::constant(g, tensor::from_vector<float>({1, 2})), table.variables()[0]}}));
    REQUIRE_FALSE(g.status().ok());
    CHECK(g.status().message().find("the gradient of hash table 'emb/part_0' is dense") != std::string::npos);
  }
}

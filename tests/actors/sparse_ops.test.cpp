// Sparse values and embeddings through real sessions (graph/sparse_ops.hpp): the ops against
// hand-computed values, the gradient of a lookup as an IndexedSlices against finite differences,
// and the sparse optimizer paths against the dense ones on the same data.
#include "actors/session.hpp"
#include "graph/gradients.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "graph/sparse_ops.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace actorflow;

namespace {

constexpr std::int64_t rows = 6;
constexpr std::int64_t dim = 3;

std::vector<double> table_values() {
  std::vector<double> v;
  for (std::int64_t i = 0; i < rows * dim; ++i)
    v.push_back(0.1 * static_cast<double>(i) - 0.7);
  return v;
}

/// A float64 table of rows x dim and int64 ids fed at run time.
struct lookup_model {
  graph g;
  actorflow::variable table;
  output ids;
  explicit lookup_model(std::vector<std::int64_t> ids_shape = {2, 2}) {
    table = ops::variable(g, ops::constant(g, tensor::from_vector<double>(table_values(), {rows, dim})),
                          "table");
    ids = ops::placeholder(g, dtype::int64, tensor_shape{ids_shape}, "ids");
  }
};

tensor ids_of(const std::vector<std::int64_t>& values, std::vector<std::int64_t> shape) {
  return tensor::from_vector<std::int64_t>(values, tensor_shape{std::move(shape)});
}

} // namespace

TEST_CASE("embedding_lookup gives the rows of its ids in their shape, with repeated ids", "[actors][sparse]") {
  lookup_model m;
  auto looked_up = ops::embedding_lookup(m.table, m.ids);
  REQUIRE(m.g.status().ok());
  CHECK(looked_up.shape() == tensor_shape{std::vector<std::int64_t>{2, 2, dim}});
  session s{m.g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(m.g)}).ok());
  auto r = s.run({looked_up}, {{m.ids, ids_of({1, 4, 1, 0}, {2, 2})}});
  REQUIRE(r.ok());
  auto got = r->at(0).to_vector<double>();
  auto table = table_values();
  std::vector<double> expected;
  for (auto id : {1, 4, 1, 0})
    for (std::int64_t c = 0; c < dim; ++c)
      expected.push_back(table[static_cast<std::size_t>(id * dim + c)]);
  CHECK(got == expected);
  // An id out of the table is an error that names it.
  auto bad = s.run({looked_up}, {{m.ids, ids_of({1, 6, 1, 0}, {2, 2})}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message().find("index 6 is out of range [0, 6)") != std::string::npos);
}

TEST_CASE("the gradient of a lookup is an IndexedSlices of the unique rows, and its dense form matches finite differences", "[actors][sparse][gradients]") {
  lookup_model m;
  auto looked_up = ops::embedding_lookup(m.table, m.ids);
  std::mt19937_64 engine{7};
  std::uniform_real_distribution<double> dist{-1, 1};
  std::vector<double> weights(2 * 2 * dim);
  for (auto& w : weights)
    w = dist(engine);
  auto weighted = ops::mul(looked_up, ops::constant(m.g, tensor::from_vector<double>(weights, {2, 2, dim})));
  auto y = ops::reduce_sum(ops::square(weighted));
  auto grad = gradients(y, {m.table.ref})[0];
  REQUIRE(m.g.status().ok());
  auto slices = as_indexed_slices(grad);
  REQUIRE(slices.has_value());
  CHECK(slices->dense_shape == std::vector<std::int64_t>{rows, dim});

  session s{m.g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(m.g)}).ok());
  feed_list feeds{{m.ids, ids_of({1, 4, 1, 0}, {2, 2})}};
  auto r = s.run({grad, slices->indices, slices->values}, feeds);
  REQUIRE(r.ok());
  // Three distinct rows cross back, not four (the ids were made unique first).
  CHECK(r->at(1).num_elements() == 3);
  CHECK(r->at(2).num_elements() == 3 * dim);
  auto analytic = r->at(0).to_vector<double>();

  // y as a function of the table, by central differences.
  auto value = ops::placeholder(m.g, dtype::float64, {rows, dim}, "value");
  auto set = ops::assign(m.table, value);
  auto table = table_values();
  const double h = 1e-6;
  for (std::int64_t i = 0; i < rows * dim; ++i) {
    auto at = [&](double delta) {
      auto shifted = table;
      shifted[static_cast<std::size_t>(i)] += delta;
      REQUIRE(s.run_targets({set}, {{value, tensor::from_vector<double>(shifted, {rows, dim})}}).ok());
      auto out = s.run({y}, feeds);
      REQUIRE(out.ok());
      return out->at(0).scalar_value<double>();
    };
    auto numeric = (at(h) - at(-h)) / (2 * h);
    INFO("table element " << i);
    CHECK(analytic[static_cast<std::size_t>(i)] == Approx(numeric).margin(1e-6));
  }
  // Rows 2, 3 and 5 were not looked up: no gradient.
  for (auto row : {2, 3, 5})
    for (std::int64_t c = 0; c < dim; ++c)
      CHECK(analytic[static_cast<std::size_t>(row * dim + c)] == 0.0);
}

TEST_CASE("sparse gradient descent, momentum, Adagrad and Adam give the variables of their dense forms, with repeated ids and two lookups of one table", "[actors][sparse][optimizers]") {
  for (std::string kind : {"sgd", "momentum", "adagrad", "adam"}) {
    auto train = [&](bool sparse) {
      lookup_model m{{4}};
      // Two lookups of one table: their sparse gradients are summed as rows.
      auto first = ops::embedding_lookup(m.table, m.ids);
      auto second = ops::embedding_lookup(m.table, m.ids, "embedding_lookup_again");
      auto target = ops::constant(m.g, tensor::from_vector<double>(std::vector<double>(4 * dim, 0.25), {4, dim}));
      auto loss = ops::reduce_sum(ops::square(ops::sub(ops::add(first, ops::mul(second, second)), target)));
      auto pairs = std::vector<gradient_and_variable>{{gradients(loss, {m.table.ref})[0], m.table}};
      REQUIRE(as_indexed_slices(pairs[0].first).has_value());
      if (!sparse)
        pairs[0].first = ops::identity(pairs[0].first, "dense");  // the dense tensor it stands for
      std::unique_ptr<optimizer> opt;
      if (kind == "sgd")
        opt = std::make_unique<gradient_descent_optimizer>(0.1);
      else if (kind == "adagrad")
        opt = std::make_unique<adagrad_optimizer>(0.1, 0.1);
      else if (kind == "adam")
        opt = std::make_unique<adam_optimizer>(0.1);
      else
        opt = std::make_unique<momentum_optimizer>(0.1, 0.9);
      auto step = opt->apply_gradients(pairs);
      REQUIRE(m.g.status().ok());
      bool uses_sparse_kernel = false;
      for (int id = 0; id < static_cast<int>(m.g.size()); ++id) {
        auto& n = m.g.at(id);
        uses_sparse_kernel = uses_sparse_kernel || n.op.rfind("SparseApply", 0) == 0;
        // Adam applies densely (TF1 decays every row's moments), made dense beside the table
        // from the deduplicated rows.
        if (kind == "adam" && sparse && n.op == "ApplyAdam") {
          auto& densified = m.g.at(n.inputs.back().node_id);
          CHECK(densified.op == "IndexedSlices");
          CHECK(densified.attr_or<std::string>("colocate_with", "") == "table");
          CHECK(m.g.at(densified.inputs[0].node_id).op == "_DeduplicateSlices");
        }
      }
      CHECK(uses_sparse_kernel == (sparse && kind != "adam"));
      session s{m.g};
      REQUIRE(s.run_targets({ops::global_variables_initializer(m.g)}).ok());
      // Sparse momentum is lazy (TF's SparseApplyMomentum): a row's accumulator decays only
      // when the row is touched, so against the dense form every step touches the same rows.
      auto batches = kind != "momentum"
                       ? std::vector<std::vector<std::int64_t>>{{1, 4, 1, 0}, {5, 5, 2, 1}, {0, 1, 2, 3}}
                       : std::vector<std::vector<std::int64_t>>{{1, 4, 1, 0}, {0, 4, 4, 1}, {4, 0, 1, 1}};
      for (auto& batch : batches)
        REQUIRE(s.run_targets({step}, {{m.ids, ids_of(batch, {4})}}).ok());
      auto value = s.run({m.table.read});
      REQUIRE(value.ok());
      return value->at(0).to_vector<double>();
    };
    INFO(kind);
    auto dense = train(false);
    auto sparse = train(true);
    REQUIRE(dense.size() == sparse.size());
    for (std::size_t i = 0; i < dense.size(); ++i)
      CHECK(sparse[i] == Approx(dense[i]).margin(1e-12));
    // Training moved the table.
    CHECK(dense != table_values());
  }
}

TEST_CASE("Unique, UnsortedSegmentSum, deduplicated slices and the scatter ops", "[actors][sparse]") {
  graph g;
  auto x = ops::constant(g, tensor::from_vector<std::int64_t>({7, 3, 7, 7, 1, 3}));
  auto [y, idx] = ops::unique(x);
  auto data = ops::constant(g, tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}));
  auto segments = ops::unsorted_segment_sum(
    data, ops::constant(g, tensor::from_vector<std::int32_t>({2, 0, 2, 2})),
    ops::constant(g, tensor::scalar<std::int32_t>(3)));
  auto [ids, sums] = ops::deduplicate_slices(
    data, ops::constant(g, tensor::from_vector<std::int64_t>({5, 2, 5, 9})));
  auto v = ops::variable(g, ops::constant(g, tensor::from_vector<float>({0, 0, 1, 1, 2, 2}, {3, 2})), "v");
  auto added = ops::scatter_add(v, ops::constant(g, tensor::from_vector<std::int32_t>({2, 0, 2})),
                                ops::constant(g, tensor::from_vector<float>({1, 1, 10, 10, 100, 100}, {3, 2})));
  REQUIRE(g.status().ok());
  session s{g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  auto r = s.run({y, idx, segments, ids, sums});
  REQUIRE(r.ok());
  CHECK(r->at(0).to_vector<std::int64_t>() == std::vector<std::int64_t>{7, 3, 1});
  CHECK(r->at(1).to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 1, 0, 0, 2, 1});
  CHECK(r->at(2).to_vector<float>() == std::vector<float>{3, 4, 0, 0, 1 + 5 + 7, 2 + 6 + 8});
  CHECK(r->at(3).to_vector<std::int64_t>() == std::vector<std::int64_t>{5, 2, 9});
  CHECK(r->at(4).to_vector<float>() == std::vector<float>{1 + 5, 2 + 6, 3, 4, 7, 8});
  auto after = s.run({added});
  REQUIRE(after.ok());
  // Rows 0 and 2 changed (2 twice), row 1 untouched.
  CHECK(after->at(0).to_vector<float>() == std::vector<float>{10, 10, 1, 1, 103, 103});
}

TEST_CASE("sparse momentum is lazy: a row the batch does not touch keeps its value and its accumulator", "[actors][sparse][optimizers]") {
  lookup_model m{{2}};
  auto loss = ops::reduce_sum(ops::embedding_lookup(m.table, m.ids));
  momentum_optimizer opt{0.5, 0.9};
  auto step = opt.minimize(loss, {m.table});
  REQUIRE(m.g.status().ok());
  session s{m.g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(m.g)}).ok());
  REQUIRE(s.run_targets({step}, {{m.ids, ids_of({2, 3}, {2})}}).ok());
  REQUIRE(s.run_targets({step}, {{m.ids, ids_of({3, 3}, {2})}}).ok());
  auto table = table_values();
  auto now = s.run({m.table.read});
  REQUIRE(now.ok());
  auto got = now->at(0).to_vector<double>();
  for (std::int64_t c = 0; c < dim; ++c) {
    auto at = [&](std::int64_t row) { return static_cast<std::size_t>(row * dim + c); };
    // Row 2, touched once (gradient 1): accum 1, moved by 0.5 once; untouched in step 2.
    CHECK(got[at(2)] == Approx(table[at(2)] - 0.5));
    // Row 3: gradient 1 then 2 (twice in the batch, summed): accum 1, then 0.9 + 2.
    CHECK(got[at(3)] == Approx(table[at(3)] - 0.5 * 1 - 0.5 * 2.9));
    // Rows never looked up do not move.
    CHECK(got[at(0)] == table[at(0)]);
  }
}

TEST_CASE("embedding_lookup over a partitioned table follows TF's mod and div rules, and trains the shards' rows like the dense table", "[actors][sparse]") {
  // 7 rows over 3 shards: 3, 2 and 2 rows (fixed_size_partitioner's layout); row r holds
  // (r, 10 r).
  std::vector<float> full;
  for (int r = 0; r < 7; ++r) {
    full.push_back(static_cast<float>(r));
    full.push_back(static_cast<float>(10 * r));
  }
  struct table_model {
    graph g;
    actorflow::partitioned_variable w;
    output ids;
    explicit table_model(const std::vector<float>& full) {
      w = ops::partitioned_variable(g, "w", tensor_shape{std::vector<std::int64_t>{7, 2}},
                                    constant_initializer(tensor::from_vector<float>(full, {7, 2})),
                                    fixed_size_partitioner(3));
      ids = ops::placeholder(g, dtype::int64, {5}, "ids");
    }
  };
  auto rows_of = [&](const std::vector<int>& full_rows) {
    std::vector<float> out;
    for (auto r : full_rows) {
      out.push_back(full[static_cast<std::size_t>(2 * r)]);
      out.push_back(full[static_cast<std::size_t>(2 * r + 1)]);
    }
    return out;
  };
  auto ids = ids_of({6, 0, 3, 3, 2}, {5});
  for (std::string strategy : {"div", "mod"}) {
    INFO(strategy);
    table_model m{full};
    auto looked_up = ops::embedding_lookup(m.w, m.ids, strategy);
    REQUIRE(m.g.status().ok());
    session s{m.g};
    REQUIRE(s.run_targets({ops::global_variables_initializer(m.g)}).ok());
    auto r = s.run({looked_up}, {{m.ids, ids}});
    REQUIRE(r.ok());
    // div: id i is row i of the whole table. mod: id i is row i / 3 of shard i % 3, and shard
    // k's row j is the whole table's row offset_k + j (offsets 0, 3, 5): 6 -> shard 0 row 2,
    // 0 -> shard 0 row 0, 3 -> shard 0 row 1, 2 -> shard 2 row 0.
    auto expected = strategy == "div" ? rows_of({6, 0, 3, 3, 2}) : rows_of({2, 0, 1, 1, 5});
    CHECK(r->at(0).to_vector<float>() == expected);
    auto bad = s.run({looked_up}, {{m.ids, ids_of({7, 0, 0, 0, 0}, {5})}});
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().message().find("id 7 is out of the table's 7 rows") != std::string::npos);
  }

  // Sparse (the lookup) against dense (a Gather of the whole table, whose gradient reaches
  // each shard dense through the concat): the same shards after three steps.
  auto train = [&](bool sparse) {
    table_model m{full};
    auto looked_up = sparse ? ops::embedding_lookup(m.w, m.ids, "div")
                            : ops::gather(m.w.as_tensor(), m.ids, 0, "dense_gather");
    auto loss = ops::reduce_sum(ops::square(looked_up));
    auto step = gradient_descent_optimizer{0.05}.minimize(loss, m.w.shards());
    REQUIRE(m.g.status().ok());
    session s{m.g};
    REQUIRE(s.run_targets({ops::global_variables_initializer(m.g)}).ok());
    for (auto& batch : std::vector<std::vector<std::int64_t>>{{6, 0, 3, 3, 2}, {1, 1, 1, 5, 4}, {0, 6, 2, 4, 3}})
      REQUIRE(s.run_targets({step}, {{m.ids, ids_of(batch, {5})}}).ok());
    auto value = s.run({m.w.as_tensor()});
    REQUIRE(value.ok());
    return value->at(0).to_vector<float>();
  };
  auto dense = train(false);
  auto sparse = train(true);
  REQUIRE(dense.size() == sparse.size());
  for (std::size_t i = 0; i < dense.size(); ++i)
    CHECK(sparse[i] == Approx(dense[i]).margin(1e-6));
  CHECK(dense != full);
}

TEST_CASE("embedding_lookup_sparse combines each example's rows by sum, mean and sqrtn, zeros for an example without ids, and trains sparsely", "[actors][sparse]") {
  auto table = table_values();
  auto row = [&](int r, std::int64_t c) { return table[static_cast<std::size_t>(r * dim + c)]; };
  // Examples 0: ids 1 (w 1), 4 (w 2); 1: ids 1 (w 0.5), 0 (w 1); 2: none; 3: id 5 (w 3).
  std::vector<std::int64_t> examples{0, 0, 1, 1, 3};
  std::vector<double> weights{1, 2, 0.5, 1, 3};
  for (std::string combiner : {"sum", "mean", "sqrtn"}) {
    INFO(combiner);
    lookup_model m{{5}};
    auto combined = ops::embedding_lookup_sparse(
      m.table, m.ids, ops::constant(m.g, tensor::from_vector<std::int64_t>(examples)),
      ops::constant(m.g, tensor::scalar<std::int64_t>(4)),
      ops::constant(m.g, tensor::from_vector<double>(weights)), combiner);
    auto grad = gradients(ops::reduce_sum(combined), {m.table.ref})[0];
    REQUIRE(m.g.status().ok());
    CHECK(as_indexed_slices(grad).has_value());
    session s{m.g};
    REQUIRE(s.run_targets({ops::global_variables_initializer(m.g)}).ok());
    auto r = s.run({combined}, {{m.ids, ids_of({1, 4, 1, 0, 5}, {5})}});
    REQUIRE(r.ok());
    auto got = r->at(0).to_vector<double>();
    REQUIRE(got.size() == 4 * dim);
    for (std::int64_t c = 0; c < dim; ++c) {
      double sum0 = 1 * row(1, c) + 2 * row(4, c), sum1 = 0.5 * row(1, c) + 1 * row(0, c), sum3 = 3 * row(5, c);
      double d0 = 1, d1 = 1, d3 = 1;
      if (combiner == "mean") {
        d0 = 3;
        d1 = 1.5;
        d3 = 3;
      } else if (combiner == "sqrtn") {
        d0 = std::sqrt(5.0);
        d1 = std::sqrt(1.25);
        d3 = 3;
      }
      CHECK(got[static_cast<std::size_t>(0 * dim + c)] == Approx(sum0 / d0));
      CHECK(got[static_cast<std::size_t>(1 * dim + c)] == Approx(sum1 / d1));
      CHECK(got[static_cast<std::size_t>(2 * dim + c)] == 0.0);
      CHECK(got[static_cast<std::size_t>(3 * dim + c)] == Approx(sum3 / d3));
    }
  }
  lookup_model bad{{5}};
  ops::embedding_lookup_sparse(bad.table, bad.ids, bad.ids, ops::constant(bad.g, tensor::scalar<std::int64_t>(4)),
                               {}, "max");
  CHECK(bad.g.status().message().find("combiner 'max'") != std::string::npos);
}

TEST_CASE("lazy Adam updates the rows a batch touches only, moments and all, by Adam's formula", "[actors][sparse][optimizers]") {
  lookup_model m{{2}};
  auto loss = ops::reduce_sum(ops::embedding_lookup(m.table, m.ids));
  adam_optimizer lazy{0.1, 0.9, 0.999, 1e-8, true};
  auto step = lazy.minimize(loss, {m.table});
  REQUIRE(m.g.status().ok());
  session s{m.g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(m.g)}).ok());
  // Step 1 touches rows 2 and 3, step 2 rows 3 and 4 (gradient 1 each).
  REQUIRE(s.run_targets({step}, {{m.ids, ids_of({2, 3}, {2})}}).ok());
  REQUIRE(s.run_targets({step}, {{m.ids, ids_of({3, 4}, {2})}}).ok());
  auto table = table_values();
  auto now = s.run({m.table.read});
  REQUIRE(now.ok());
  auto got = now->at(0).to_vector<double>();
  // One row through Adam's steps, its gradient g_t at step t (0: untouched, not stepped).
  auto adam_row = [](double value, const std::vector<double>& grads) {
    double mm = 0, vv = 0, b1 = 1, b2 = 1;
    for (auto g : grads) {
      b1 *= 0.9;
      b2 *= 0.999;  // the powers advance every step, touched or not
      if (g == 0)
        continue;
      mm += (g - mm) * 0.1;
      vv += (g * g - vv) * 0.001;
      value -= 0.1 * std::sqrt(1 - b2) / (1 - b1) * mm / (std::sqrt(vv) + 1e-8);
    }
    return value;
  };
  for (std::int64_t c = 0; c < dim; ++c) {
    auto at = [&](std::int64_t row) { return static_cast<std::size_t>(row * dim + c); };
    CHECK(got[at(2)] == Approx(adam_row(table[at(2)], {1, 0})).margin(1e-12));
    CHECK(got[at(3)] == Approx(adam_row(table[at(3)], {1, 1})).margin(1e-12));
    CHECK(got[at(4)] == Approx(adam_row(table[at(4)], {0, 1})).margin(1e-12));
    CHECK(got[at(0)] == table[at(0)]);
  }
}

TEST_CASE("embedding_lookup with max_norm scales rows longer than it down to it, over one table and a partitioned one, and its gradient matches finite differences", "[actors][sparse][gradients]") {
  const double max_norm = 1.0;
  auto table = table_values();
  auto clipped_row = [&](std::int64_t id) {
    std::vector<double> row(table.begin() + id * dim, table.begin() + (id + 1) * dim);
    double norm = 0;
    for (auto v : row)
      norm += v * v;
    norm = std::sqrt(norm);
    for (auto& v : row)
      v = norm > max_norm ? v * max_norm / norm : v;
    return row;
  };
  const std::vector<std::int64_t> batch{1, 4, 1, 0};
  std::vector<double> expected;
  for (auto id : batch)
    for (auto v : clipped_row(id))
      expected.push_back(v);
  // Rows 4 and 0 are longer than 1 (1.05 and 1.05), row 1 is not (0.54).
  CHECK(expected[3] != table[4 * dim]);
  CHECK(expected[0] == table[1 * dim]);
  {
    graph g;
    auto parts = ops::partitioned_variable(g, "table", {rows, dim},
                                           constant_initializer(tensor::from_vector<double>(table, {rows, dim})),
                                           fixed_size_partitioner(2), dtype::float64);
    auto ids = ops::placeholder(g, dtype::int64, tensor_shape{std::vector<std::int64_t>{4}}, "ids");
    auto looked_up = ops::embedding_lookup(parts, ids, "div", max_norm);
    INFO(g.status().to_string());
    REQUIRE(g.status().ok());
    session s{g};
    REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
    auto r = s.run({looked_up}, {{ids, ids_of(batch, {4})}});
    REQUIRE(r.ok());
    auto got = r->at(0).to_vector<double>();
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i)
      CHECK(got[i] == Approx(expected[i]).margin(1e-12));
  }
  lookup_model m{{4}};
  auto looked_up = ops::embedding_lookup(m.table, m.ids, max_norm);
  std::vector<double> weights;
  for (std::int64_t i = 0; i < 4 * dim; ++i)
    weights.push_back(0.3 * static_cast<double>(i % 5) - 0.5);
  auto y = ops::reduce_sum(ops::mul(looked_up, ops::constant(m.g, tensor::from_vector<double>(weights, {4, dim}))));
  auto grad = gradients(y, {m.table.ref})[0];
  REQUIRE(m.g.status().ok());
  REQUIRE(as_indexed_slices(grad).has_value());
  session s{m.g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(m.g)}).ok());
  feed_list feeds{{m.ids, ids_of(batch, {4})}};
  auto r = s.run({looked_up, grad}, feeds);
  REQUIRE(r.ok());
  auto got = r->at(0).to_vector<double>();
  for (std::size_t i = 0; i < got.size(); ++i)
    CHECK(got[i] == Approx(expected[i]).margin(1e-12));
  auto analytic = r->at(1).to_vector<double>();
  auto value = ops::placeholder(m.g, dtype::float64, {rows, dim}, "value");
  auto set = ops::assign(m.table, value);
  const double h = 1e-6;
  for (std::int64_t i = 0; i < rows * dim; ++i) {
    auto at = [&](double delta) {
      auto shifted = table;
      shifted[static_cast<std::size_t>(i)] += delta;
      REQUIRE(s.run_targets({set}, {{value, tensor::from_vector<double>(shifted, {rows, dim})}}).ok());
      auto out = s.run({y}, feeds);
      REQUIRE(out.ok());
      return out->at(0).scalar_value<double>();
    };
    INFO("table element " << i);
    CHECK(analytic[static_cast<std::size_t>(i)] == Approx((at(h) - at(-h)) / (2 * h)).margin(1e-6));
  }
}

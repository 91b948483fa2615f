// FtrlOptimizer through real sessions: ApplyFtrl, ApplyFtrlV2 and SparseApplyFtrl(V2) against
// TensorFlow's formula written out here in float64 (the way TF's Eigen kernel writes it, with
// the clamp, not the way devices/ftrl.hpp does), the sparse path against the dense one on the
// same data, and repeated ids summed before they are applied.
#include "actors/session.hpp"
#include "graph/gradients.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "graph/sparse_ops.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace actorflow;

namespace {

constexpr std::int64_t rows = 5;
constexpr std::int64_t dim = 2;

struct hyper {
  double lr, lr_power, initial_accum, l1, l2, l2_shrinkage;
};

/// TF's training_ops.cc ApplyFtrl / ApplyFtrlV2 for one element, as its Eigen code reads:
/// new_accum = accum + g^2; linear += g_shrunk - (new_accum^-p - accum^-p) / lr * var;
/// x = clamp(linear, -l1, l1) - linear; y = new_accum^-p / lr + 2 l2; var = x / y.
void reference_step(double& var, double& accum, double& linear, double g, const hyper& h) {
  double g_shrunk = g + 2 * h.l2_shrinkage * var;
  double new_accum = accum + g * g;
  linear += g_shrunk - (std::pow(new_accum, -h.lr_power) - std::pow(accum, -h.lr_power)) / h.lr * var;
  double x = std::max(-h.l1, std::min(h.l1, linear)) - linear;
  double y = std::pow(new_accum, -h.lr_power) / h.lr + 2 * h.l2;
  var = x / y;
  accum = new_accum;
}

std::vector<double> initial_values() {
  std::vector<double> v;
  for (std::int64_t i = 0; i < rows * dim; ++i)
    v.push_back(0.3 * std::sin(static_cast<double>(i) + 1));
  return v;
}

/// The snapshot of the graph's variable `name` (an optimizer's slot).
output opt_slot_read(graph& g, const std::string& name) {
  for (auto& v : g.global_variables())
    if (v.name() == name)
      return v.read;
  FAIL("no variable " << name);
  return {};
}

tensor ids_of(const std::vector<std::int64_t>& values) {
  return tensor::from_vector<std::int64_t>(values, tensor_shape{std::vector<std::int64_t>{
                                                     static_cast<std::int64_t>(values.size())}});
}

} // namespace

TEST_CASE("FTRL's dense and sparse updates follow TensorFlow's formula in float64 for several steps", "[actors][optimizers][ftrl]") {
  // lr_power -0.5 takes TF's square-root branch, -0.3 its pow branch; l2_shrinkage picks V2;
  // l1 0.05 zeroes the elements whose linear term stays small.
  for (auto h : {hyper{0.2, -0.5, 0.1, 0.0, 0.0, 0.0}, hyper{0.2, -0.5, 0.1, 0.05, 0.1, 0.0},
                 hyper{0.1, -0.3, 0.2, 0.05, 0.02, 0.0}, hyper{0.2, -0.5, 0.1, 0.01, 0.1, 0.3}}) {
    for (bool sparse : {false, true}) {
      INFO("lr_power " << h.lr_power << " l1 " << h.l1 << " l2 " << h.l2 << " l2_shrinkage "
                       << h.l2_shrinkage << (sparse ? " sparse" : " dense"));
      graph g;
      auto w = ops::variable(g, ops::constant(g, tensor::from_vector<double>(initial_values(), {rows, dim})), "w");
      // The gradient is fed: dense [rows, dim], or rows at ids (with a repeat) as an IndexedSlices.
      auto dense_grad = ops::placeholder(g, dtype::float64, {rows, dim}, "dense_grad");
      auto values = ops::placeholder(g, dtype::float64, {4, dim}, "values");
      auto ids = ops::placeholder(g, dtype::int64, {4}, "ids");
      auto grad = sparse ? ops::indexed_slices(values, ids, {rows, dim}) : dense_grad;
      ftrl_optimizer opt{h.lr, h.lr_power, h.initial_accum, h.l1, h.l2, h.l2_shrinkage};
      auto step = opt.apply_gradients({{grad, w}});
      REQUIRE(g.status().ok());
      std::string expected_op = std::string{sparse ? "SparseApplyFtrl" : "ApplyFtrl"} +
                                (h.l2_shrinkage != 0 ? "V2" : "");
      bool found = false;
      for (int id = 0; id < static_cast<int>(g.size()); ++id)
        found = found || g.at(id).op == expected_op;
      CHECK(found);

      session s{g};
      REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
      auto var = initial_values();
      std::vector<double> accum(var.size(), h.initial_accum), linear(var.size(), 0.0);
      std::mt19937_64 engine{11};
      std::uniform_real_distribution<double> dist{-1, 1};
      const std::vector<std::vector<std::int64_t>> batches{{3, 0, 3, 1}, {4, 4, 2, 0}, {1, 3, 0, 2}};
      for (auto& batch : batches) {
        std::vector<double> rows_fed(4 * dim), full(rows * dim, 0.0);
        for (auto& x : rows_fed)
          x = dist(engine);
        for (auto& x : full)
          x = dist(engine);
        feed_list feeds;
        std::map<std::int64_t, std::vector<double>> summed;  // a repeated id's rows add up
        if (sparse) {
          feeds = {{values, tensor::from_vector<double>(rows_fed, {4, dim})},
                   {ids, tensor::from_vector<std::int64_t>(batch, tensor_shape{std::vector<std::int64_t>{4}})}};
          for (std::size_t k = 0; k < batch.size(); ++k) {
            auto& row = summed[batch[k]];
            row.resize(dim, 0.0);
            for (std::int64_t c = 0; c < dim; ++c)
              row[static_cast<std::size_t>(c)] += rows_fed[k * dim + static_cast<std::size_t>(c)];
          }
        } else {
          feeds = {{dense_grad, tensor::from_vector<double>(full, {rows, dim})}};
          for (std::int64_t r = 0; r < rows; ++r)
            summed[r] = std::vector<double>(full.begin() + r * dim, full.begin() + (r + 1) * dim);
        }
        REQUIRE(s.run_targets({step}, feeds).ok());
        for (auto& [r, row] : summed)
          for (std::int64_t c = 0; c < dim; ++c) {
            auto at = static_cast<std::size_t>(r * dim + c);
            reference_step(var[at], accum[at], linear[at], row[static_cast<std::size_t>(c)], h);
          }
      }
      auto got = s.run({w.read, opt_slot_read(g, "w/Ftrl"), opt_slot_read(g, "w/Ftrl_1")});
      REQUIRE(got.ok());
      auto got_var = got->at(0).to_vector<double>();
      auto got_accum = got->at(1).to_vector<double>();
      auto got_linear = got->at(2).to_vector<double>();
      int zeroed = 0;
      for (std::size_t i = 0; i < var.size(); ++i) {
        INFO("element " << i);
        CHECK(got_var[i] == Approx(var[i]).margin(1e-12));
        CHECK(got_accum[i] == Approx(accum[i]).margin(1e-12));
        CHECK(got_linear[i] == Approx(linear[i]).margin(1e-12));
        zeroed += var[i] == 0.0 ? 1 : 0;
      }
      // The reference itself moved: every element was updated at least once.
      CHECK(var != initial_values());
      if (h.l1 == 0)
        CHECK(zeroed == 0);
    }
  }
}

TEST_CASE("FTRL through embedding_lookup: the sparse path gives the dense path's variables, with repeated ids deduplicated", "[actors][optimizers][ftrl][sparse]") {
  // A table starting at zeros (FTRL's usual start) trained on batches that skip rows: a zero
  // gradient leaves linear and accum as they are, so the dense update recomputes the same var and
  // both paths agree on every row. With l2_shrinkage (V2) an untouched row's linear term still
  // shrinks in the dense form, and a random start is zeroed by a dense step: there the batches
  // touch every row.
  struct run_case {
    bool zero_start;
    std::vector<std::vector<std::int64_t>> batches;
    double l2_shrinkage;
  };
  for (auto& rc : {run_case{true, {{1, 4, 1, 0}, {4, 4, 2, 1}, {0, 1, 1, 3}}, 0.0},
                   run_case{true, {{2, 2, 4, 0, 1, 3}, {3, 0, 3, 1, 4, 2}}, 0.2},
                   run_case{false, {{1, 4, 3, 0, 2, 1}, {0, 2, 4, 3, 1, 1}, {4, 3, 2, 1, 0, 0}}, 0.0}}) {
    auto train = [&](bool sparse) {
      graph g;
      auto start = rc.zero_start ? std::vector<double>(rows * dim, 0.0) : initial_values();
      auto table = ops::variable(g, ops::constant(g, tensor::from_vector<double>(start, {rows, dim})), "table");
      auto batch = static_cast<std::int64_t>(rc.batches[0].size());
      auto ids = ops::placeholder(g, dtype::int64, tensor_shape{std::vector<std::int64_t>{batch}}, "ids");
      auto looked_up = ops::embedding_lookup(table, ids);
      // A target per position, so that a repeated id's rows differ and must be summed.
      std::vector<double> targets;
      for (std::int64_t i = 0; i < batch * dim; ++i)
        targets.push_back(0.25 * static_cast<double>(i % 5) - 0.4);
      auto target = ops::constant(g, tensor::from_vector<double>(targets, {batch, dim}));
      auto loss = ops::reduce_sum(ops::square(ops::sub(looked_up, target)));
      auto grad = gradients(loss, {table.ref})[0];
      REQUIRE(as_indexed_slices(grad).has_value());
      if (!sparse)
        grad = ops::identity(grad, "dense");
      ftrl_optimizer opt{0.3, -0.5, 0.1, 0.001, 0.01, rc.l2_shrinkage};
      auto step = opt.apply_gradients({{grad, table}});
      REQUIRE(g.status().ok());
      int sparse_updates = 0, deduplications = 0;
      for (int id = 0; id < static_cast<int>(g.size()); ++id) {
        sparse_updates += g.at(id).op.rfind("SparseApplyFtrl", 0) == 0 ? 1 : 0;
        deduplications += g.at(id).op == "_DeduplicateSlices" ? 1 : 0;
      }
      CHECK(sparse_updates == (sparse ? 1 : 0));
      CHECK(deduplications == (sparse ? 1 : 0));
      session s{g};
      REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
      for (auto& b : rc.batches)
        REQUIRE(s.run_targets({step}, {{ids, ids_of(b)}}).ok());
      auto got = s.run({table.read, opt_slot_read(g, "table/Ftrl"), opt_slot_read(g, "table/Ftrl_1")});
      REQUIRE(got.ok());
      std::vector<double> all;
      for (auto& t : *got) {
        auto v = t.to_vector<double>();
        all.insert(all.end(), v.begin(), v.end());
      }
      return all;
    };
    INFO("zero start " << rc.zero_start << " l2_shrinkage " << rc.l2_shrinkage);
    auto dense = train(false);
    auto sparse = train(true);
    REQUIRE(dense.size() == sparse.size());
    for (std::size_t i = 0; i < dense.size(); ++i) {
      INFO("value " << i);
      CHECK(sparse[i] == Approx(dense[i]).margin(1e-6));
    }
    // Training moved the accumulators (the middle third) away from their start.
    CHECK(std::any_of(dense.begin() + rows * dim, dense.begin() + 2 * rows * dim,
                      [](double a) { return a > 0.1 + 1e-9; }));
  }
}

TEST_CASE("FtrlOptimizer refuses hyperparameters TensorFlow refuses, naming them", "[actors][optimizers][ftrl]") {
  struct bad_case {
    ftrl_optimizer opt;
    const char* named;
  };
  for (auto& bc : {bad_case{ftrl_optimizer{0.1, 0.5}, "learning_rate_power"},
                   bad_case{ftrl_optimizer{0.0}, "learning_rate"},
                   bad_case{ftrl_optimizer{0.1, -0.5, -1.0}, "initial_accumulator_value"},
                   bad_case{ftrl_optimizer{0.1, -0.5, 0.1, -0.1}, "l1"}}) {
    graph g;
    auto w = ops::variable(g, ops::constant(g, tensor::from_vector<double>({1.0, 2.0})), "w");
    auto copy = bc.opt;
    copy.apply_gradients({{ops::constant(g, tensor::from_vector<double>({0.5, 0.5})), w}});
    REQUIRE_FALSE(g.status().ok());
    INFO(g.status().message());
    CHECK(g.status().message().find(bc.named) != std::string::npos);
  }
}

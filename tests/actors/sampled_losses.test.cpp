// Sampled losses through real sessions (graph/sampled_losses.hpp): the log-uniform sampler's
// frequencies and expected counts against TF's formulas, nce_loss and sampled_softmax_loss
// against hand-computed values on fixed candidates, and their gradients against finite
// differences.
#include "actors/session.hpp"
#include "graph/gradients.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "graph/sampled_losses.hpp"
#include "graph/sparse_ops.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <vector>

using namespace actorflow;

namespace {

double log_uniform_p(std::int64_t k, std::int64_t range) {
  return std::log((k + 2.0) / (k + 1.0)) / std::log(range + 1.0);
}

double sigmoid_xent(double x, double z) { return std::max(x, 0.0) - x * z + std::log1p(std::exp(-std::abs(x))); }

/// weights [5, 2] and biases [5] (float64), two examples, fixed candidates {0, 3, 4}.
struct sampled_model {
  graph g;
  actorflow::variable weights, biases, input_table;
  output labels, inputs;
  sampled_values fixed;
  std::vector<double> w{0.1, -0.2, 0.4, 0.3, -0.5, 0.2, 0.7, -0.1, 0.05, 0.6};
  std::vector<double> b{0.01, -0.02, 0.03, 0.1, -0.1};
  std::vector<double> x{0.5, -1.0, 2.0, 0.25};
  std::vector<std::int64_t> truth{1, 3};
  std::vector<std::int64_t> candidates{0, 3, 4};
  std::vector<double> true_expected{0.2, 0.1};
  std::vector<double> sampled_expected{0.3, 0.1, 0.05};

  sampled_model() {
    weights = ops::variable(g, ops::constant(g, tensor::from_vector<double>(w, {5, 2})), "weights");
    biases = ops::variable(g, ops::constant(g, tensor::from_vector<double>(b, {5})), "biases");
    labels = ops::constant(g, tensor::from_vector<std::int64_t>(truth, {2, 1}));
    input_table = ops::variable(g, ops::constant(g, tensor::from_vector<double>(x, {2, 2})), "inputs");
    inputs = input_table.read;
    fixed = {ops::constant(g, tensor::from_vector<std::int64_t>(candidates)),
             ops::constant(g, tensor::from_vector<double>(true_expected, {2, 1})),
             ops::constant(g, tensor::from_vector<double>(sampled_expected))};
  }
  /// The logit of class k for example i, less log(expected count).
  double logit(int i, std::int64_t k, double expected) const {
    auto kk = static_cast<std::size_t>(k);
    auto ii = static_cast<std::size_t>(i);
    return x[2 * ii] * w[2 * kk] + x[2 * ii + 1] * w[2 * kk + 1] + b[kk] - std::log(expected);
  }
};

} // namespace

TEST_CASE("the log-uniform candidate sampler draws with TF's probabilities and gives its expected counts", "[actors][sampled]") {
  constexpr std::int64_t range = 1000;
  graph g;
  g.seed = 5;
  auto truth = ops::constant(g, tensor::from_vector<std::int64_t>({0, 7, 999}, {3, 1}));
  auto many = ops::log_uniform_candidate_sampler(truth, 1, 20000, false, range);
  auto few = ops::log_uniform_candidate_sampler(truth, 1, 50, true, range);
  REQUIRE(g.status().ok());
  session s{g};
  auto r = s.run({many.candidates, many.true_expected_count, many.sampled_expected_count,
                  few.candidates, few.true_expected_count});
  REQUIRE(r.ok());
  auto drawn = r->at(0).to_vector<std::int64_t>();
  std::vector<double> counts(range, 0);
  for (auto k : drawn) {
    REQUIRE(k >= 0);
    REQUIRE(k < range);
    ++counts[static_cast<std::size_t>(k)];
  }
  // Frequencies of the most likely classes, within 4 standard deviations.
  for (std::int64_t k : {0, 1, 2, 9}) {
    auto p = log_uniform_p(k, range);
    auto sd = std::sqrt(20000 * p * (1 - p));
    INFO("class " << k);
    CHECK(std::abs(counts[static_cast<std::size_t>(k)] - 20000 * p) < 4 * sd);
  }
  // Without uniqueness an expected count is P(k) * num_sampled.
  auto true_expected = r->at(1).to_vector<float>();
  CHECK(true_expected[1] == Approx(log_uniform_p(7, range) * 20000).epsilon(1e-5));
  CHECK(r->at(2).to_vector<float>()[0] == Approx(log_uniform_p(drawn[0], range) * 20000).epsilon(1e-5));
  // Unique draws: distinct, and each count -expm1(tries * log1p(-P)) for one number of tries.
  auto unique = r->at(3).to_vector<std::int64_t>();
  CHECK(std::set<std::int64_t>(unique.begin(), unique.end()).size() == 50);
  auto counted = r->at(4).to_vector<float>();
  auto tries = std::log1p(-static_cast<double>(counted[0])) / std::log1p(-log_uniform_p(0, range));
  CHECK(tries >= 50);
  CHECK(counted[2] == Approx(-std::expm1(tries * std::log1p(-log_uniform_p(999, range)))).epsilon(1e-3));
  // The graph seed makes the draws reproducible.
  session again{g};
  auto same = again.run({many.candidates});
  REQUIRE(same.ok());
  CHECK(same->at(0).to_vector<std::int64_t>() == drawn);
  // Each step draws anew: a sampler that drew one sample for every step would leave NCE the
  // same few negatives.
  auto first = s.run({few.candidates});
  auto next = s.run({few.candidates});
  REQUIRE(first.ok());
  REQUIRE(next.ok());
  CHECK(next->at(0).to_vector<std::int64_t>() != first->at(0).to_vector<std::int64_t>());
}

TEST_CASE("nce_loss and sampled_softmax_loss on fixed candidates match their formulas, accidental hits removed", "[actors][sampled]") {
  sampled_model m;
  ops::sampled_loss_options options;
  options.sampled = m.fixed;
  auto nce = ops::nce_loss(m.weights, m.biases, m.labels, m.inputs, 3, 5, options);
  auto softmax = ops::sampled_softmax_loss(m.weights, m.biases, m.labels, m.inputs, 3, 5, options);
  REQUIRE(m.g.status().ok());
  session s{m.g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(m.g)}).ok());
  auto r = s.run({nce, softmax});
  REQUIRE(r.ok());
  auto nce_values = r->at(0).to_vector<double>();
  auto softmax_values = r->at(1).to_vector<double>();
  for (int i = 0; i < 2; ++i) {
    INFO("example " << i);
    auto truth = m.truth[static_cast<std::size_t>(i)];
    std::vector<double> logits{m.logit(i, truth, m.true_expected[static_cast<std::size_t>(i)])};
    for (std::size_t j = 0; j < 3; ++j)
      logits.push_back(m.logit(i, m.candidates[j], m.sampled_expected[j]));
    double expected_nce = sigmoid_xent(logits[0], 1);
    for (std::size_t j = 1; j < 4; ++j)
      expected_nce += sigmoid_xent(logits[j], 0);
    CHECK(nce_values[static_cast<std::size_t>(i)] == Approx(expected_nce).epsilon(1e-12));
    // Softmax over the true logit and the candidates that are not example i's true class
    // (example 1's class 3 was also drawn: it drops out).
    double total = 0;
    for (std::size_t j = 0; j < 4; ++j)
      if (j == 0 || m.candidates[j - 1] != truth)
        total += std::exp(logits[j]);
    CHECK(softmax_values[static_cast<std::size_t>(i)] == Approx(std::log(total) - logits[0]).epsilon(1e-9));
  }
}

TEST_CASE("nce_loss's gradients match finite differences, and the tables' are sparse", "[actors][sampled][gradients]") {
  sampled_model m;
  ops::sampled_loss_options options;
  options.sampled = m.fixed;
  auto loss = ops::reduce_sum(ops::nce_loss(m.weights, m.biases, m.labels, m.inputs, 3, 5, options));
  auto grads = gradients(loss, {m.weights.ref, m.biases.ref, m.inputs});
  REQUIRE(m.g.status().ok());
  CHECK(as_indexed_slices(grads[0]).has_value());
  CHECK(as_indexed_slices(grads[1]).has_value());
  session s{m.g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(m.g)}).ok());
  auto r = s.run({grads[0], grads[1], grads[2]});
  REQUIRE(r.ok());
  auto check = [&](const actorflow::variable& v, std::vector<double> values, const tensor& analytic,
                   std::vector<std::int64_t> shape) {
    auto fed = ops::placeholder(m.g, dtype::float64, tensor_shape{shape}, "fed_" + v.name());
    auto set = ops::assign(v, fed);
    const double h = 1e-6;
    for (std::size_t i = 0; i < values.size(); ++i) {
      auto at = [&](double delta) {
        auto shifted = values;
        shifted[i] += delta;
        REQUIRE(s.run_targets({set}, {{fed, tensor::from_vector<double>(shifted, tensor_shape{shape})}}).ok());
        auto out = s.run({loss});
        REQUIRE(out.ok());
        return out->at(0).scalar_value<double>();
      };
      auto numeric = (at(h) - at(-h)) / (2 * h);
      INFO(v.name() << " element " << i);
      CHECK(analytic.to_vector<double>()[i] == Approx(numeric).margin(1e-6));
    }
    REQUIRE(s.run_targets({set}, {{fed, tensor::from_vector<double>(values, tensor_shape{shape})}}).ok());
  };
  check(m.weights, m.w, r->at(0), {5, 2});
  check(m.biases, m.b, r->at(1), {5});
  check(m.input_table, m.x, r->at(2), {2, 2});
  // Class 2 was neither true nor drawn: no gradient.
  CHECK(r->at(1).to_vector<double>()[2] == 0.0);
}

TEST_CASE("a word2vec step moves each looked-up row of its float32 tables by the row's summed gradient", "[actors][sampled][gradients]") {
  // word2vec's graph in small: a float32 table, a batch of ids with repeats, nce_loss over
  // fixed candidates, gradient descent. The table's change must be -lr times, per row, the sum
  // of the loss's gradients for the examples that looked it up.
  graph g;
  const std::int64_t rows = 12, dim = 3;
  std::vector<float> table(rows * dim), w(rows * dim);
  for (std::size_t i = 0; i < table.size(); ++i) {
    table[i] = 0.1f * static_cast<float>(static_cast<int>(i % 7) - 3);
    w[i] = 0.05f * static_cast<float>(static_cast<int>(i % 5) - 2);
  }
  auto embeddings = ops::variable(g, ops::constant(g, tensor::from_vector<float>(table, {rows, dim})), "embeddings");
  auto weights = ops::variable(g, ops::constant(g, tensor::from_vector<float>(w, {rows, dim})), "weights");
  auto biases = ops::variable(g, ops::zeros(g, {rows}), "biases");
  std::vector<std::int64_t> ids{3, 7, 3, 0, 11, 7, 3, 5};
  auto centers = ops::constant(g, tensor::from_vector<std::int64_t>(ids));
  auto contexts = ops::constant(g, tensor::from_vector<std::int64_t>({1, 2, 4, 6, 8, 9, 10, 1}, {8, 1}));
  ops::sampled_loss_options options;
  options.sampled = {ops::constant(g, tensor::from_vector<std::int64_t>({0, 2, 5})),
                     ops::constant(g, tensor::from_vector<float>(std::vector<float>(8, 0.2f), {8, 1})),
                     ops::constant(g, tensor::from_vector<float>({0.3f, 0.1f, 0.05f}))};
  auto embedded = ops::embedding_lookup(embeddings, centers);
  auto loss = ops::reduce_mean(ops::nce_loss(weights, biases, contexts, embedded, 3, rows, options));
  auto by_example = gradients(loss, {embedded})[0];
  auto table_grads = gradients(loss, {weights.ref, biases.ref});
  const double lr = 0.5;
  auto train = gradient_descent_optimizer{lr}.minimize(loss);
  REQUIRE(g.status().ok());
  session s{g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  auto before = s.run({by_example, embeddings.read, weights.read, table_grads[0], biases.read,
                       table_grads[1]});
  REQUIRE(before.ok());
  REQUIRE(s.run_targets({train}).ok());
  auto after = s.run({embeddings.read, weights.read, biases.read});
  REQUIRE(after.ok());
  // The output tables (true classes' and candidates' rows, some both): -lr times the gradient.
  for (int t : {0, 1}) {
    auto old_values = before->at(2 + 2 * t).to_vector<float>();
    auto grad_values = before->at(3 + 2 * t).to_vector<float>();
    auto new_values = after->at(1 + t).to_vector<float>();
    REQUIRE(grad_values.size() == old_values.size());
    for (std::size_t i = 0; i < old_values.size(); ++i) {
      INFO((t == 0 ? "weights" : "biases") << " element " << i);
      CHECK(new_values[i] == Approx(old_values[i] - lr * grad_values[i]).margin(1e-6));
    }
  }
  auto grad = before->at(0).to_vector<float>();
  auto old_table = before->at(1).to_vector<float>();
  auto new_table = after->at(0).to_vector<float>();
  std::vector<double> expected(old_table.begin(), old_table.end());
  for (std::size_t e = 0; e < ids.size(); ++e)
    for (std::int64_t d = 0; d < dim; ++d)
      expected[static_cast<std::size_t>(ids[e] * dim + d)] -= lr * grad[e * dim + static_cast<std::size_t>(d)];
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO("table element " << i << " (row " << i / dim << ")");
    CHECK(new_table[i] == Approx(expected[i]).margin(1e-6));
  }
}

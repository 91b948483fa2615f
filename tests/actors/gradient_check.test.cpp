// Every gradient against central finite differences, in float64, through real sessions.
// Each case builds z = op(x...) and y = reduce_sum(z * weights) with random weights (so the
// seed reaching op is not all ones), runs the symbolic gradients of y, and compares each element
// with (y(x + h) - y(x - h)) / 2h. Inputs and weights come from a fixed, printed seed.
#include "actors/session.hpp"
#include "graph/control_flow.hpp"
#include "graph/gradients.hpp"
#include "graph/math_ops.hpp"
#include "graph/ops.hpp"
#include "graph/shape_ops.hpp"
#include "graph/strided_slice.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace actorflow;

namespace {

constexpr std::uint64_t base_seed = 20240611;

// --- random inputs -------------------------------------------------------------------------------

tensor uniform(std::mt19937_64& engine, tensor_shape shape, double lo, double hi) {
  tensor t{dtype::float64, std::move(shape)};
  std::uniform_real_distribution<double> dist{lo, hi};
  for (std::int64_t i = 0; i < t.num_elements(); ++i)
    t.data<double>()[i] = dist(engine);
  return t;
}

/// Magnitudes in [lo, hi) with random signs: keeps Relu and Div away from their kinks and poles.
tensor away_from_zero(std::mt19937_64& engine, tensor_shape shape, double lo, double hi) {
  auto t = uniform(engine, std::move(shape), lo, hi);
  std::bernoulli_distribution sign{0.5};
  for (std::int64_t i = 0; i < t.num_elements(); ++i)
    if (sign(engine))
      t.data<double>()[i] = -t.data<double>()[i];
  return t;
}

/// Values at least 0.2 apart in shuffled order: no ties for Max, even after perturbation.
tensor distinct(std::mt19937_64& engine, tensor_shape shape) {
  tensor t{dtype::float64, std::move(shape)};
  auto n = t.num_elements();
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), engine);
  std::uniform_real_distribution<double> jitter{0.0, 0.05};
  for (std::int64_t i = 0; i < n; ++i)
    t.data<double>()[i] =
      (static_cast<double>(order[static_cast<std::size_t>(i)]) - static_cast<double>(n) / 2) * 0.25 +
      jitter(engine);
  return t;
}

// --- the checker ---------------------------------------------------------------------------------

/// One input: its value and the shape its placeholder declares (possibly partial).
struct test_input {
  tensor value;
  tensor_shape declared;
};

/// Rows of positive values summing to one: SoftmaxCrossEntropyWithLogits's backprop output (and so
/// its gradient, as in TensorFlow) assumes labels are distributions.
tensor distributions(std::mt19937_64& engine, tensor_shape shape) {
  auto t = uniform(engine, std::move(shape), 0.1, 1.0);
  auto classes = t.shape().dim(t.shape().rank() - 1);
  for (std::int64_t r = 0; r < t.num_elements() / classes; ++r) {
    double total = 0;
    for (std::int64_t c = 0; c < classes; ++c)
      total += t.data<double>()[r * classes + c];
    for (std::int64_t c = 0; c < classes; ++c)
      t.data<double>()[r * classes + c] /= total;
  }
  return t;
}

test_input fixed(tensor value) {
  auto shape = value.shape();
  return {std::move(value), std::move(shape)};
}

test_input partial(tensor value, tensor_shape declared) { return {std::move(value), std::move(declared)}; }

using builder = std::function<output(graph&, const std::vector<output>&)>;

struct check_options {
  double h = 1e-6;
  /// |symbolic - numeric| <= tolerance * max(1, |numeric|).
  double tolerance = 1e-6;
};

std::vector<output> placeholders(graph& g, const std::vector<test_input>& inputs) {
  std::vector<output> xs;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    xs.push_back(ops::placeholder(g, dtype::float64, inputs[i].declared, "x" + std::to_string(i)));
  return xs;
}

feed_list feeds_for(const std::vector<output>& xs, const std::vector<tensor>& values) {
  feed_list feeds;
  for (std::size_t i = 0; i < xs.size(); ++i)
    feeds.emplace_back(xs[i], values[i]);
  return feeds;
}

double scalar_of(const result<std::vector<tensor>>& r) {
  INFO(r.error().to_string());
  REQUIRE(r.ok());
  return r->at(0).scalar_value<double>();
}

void compare(double symbolic, double numeric, const check_options& options) {
  INFO("symbolic " << symbolic << ", numeric " << numeric);
  CHECK(std::abs(symbolic - numeric) <= options.tolerance * std::max(1.0, std::abs(numeric)));
}

/// Checks d(sum(build(x) * weights))/dx for every input against central differences.
void check_gradients(const std::string& label, std::uint64_t seed, std::vector<test_input> inputs,
                     const builder& build, check_options options = {}) {
  INFO("case '" << label << "', seed " << seed);
  std::mt19937_64 engine{seed ^ 0x9e3779b97f4a7c15ull};
  std::vector<tensor> values;
  for (auto& in : inputs)
    values.push_back(in.value);

  // z's run-time shape decides the weights' shape (its static shape may be partial).
  tensor_shape z_shape;
  {
    graph g;
    auto xs = placeholders(g, inputs);
    auto z = build(g, xs);
    INFO(g.status().to_string());
    REQUIRE(g.status().ok());
    session s{g};
    auto r = s.run({z}, feeds_for(xs, values));
    INFO(r.error().to_string());
    REQUIRE(r.ok());
    REQUIRE(r->at(0).type() == dtype::float64);
    z_shape = r->at(0).shape();
  }

  graph g;
  auto xs = placeholders(g, inputs);
  auto z = build(g, xs);
  auto weights = ops::constant(g, uniform(engine, z_shape, -1.0, 1.0), "weights");
  auto y = ops::reduce_sum(z * weights, {}, false, "y");
  auto grads = gradients(y, xs);
  INFO(g.status().to_string());
  REQUIRE(g.status().ok());
  for (auto& grad : grads)
    REQUIRE(grad.valid());

  session s{g};
  auto symbolic = s.run(grads, feeds_for(xs, values));
  INFO(symbolic.error().to_string());
  REQUIRE(symbolic.ok());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    INFO("input " << i << " " << values[i].shape().to_string());
    auto& grad = symbolic->at(i);
    REQUIRE(grad.type() == dtype::float64);
    REQUIRE(grad.shape() == values[i].shape());
    for (std::int64_t j = 0; j < values[i].num_elements(); ++j) {
      INFO("element " << j);
      auto at = [&](double offset) {
        auto perturbed = values;
        perturbed[i] = values[i].clone();
        perturbed[i].data<double>()[j] += offset;
        return scalar_of(s.run({y}, feeds_for(xs, perturbed)));
      };
      auto numeric = (at(options.h) - at(-options.h)) / (2 * options.h);
      compare(grad.data<double>()[j], numeric, options);
    }
  }
}

tensor_shape shape(std::vector<std::int64_t> dims) { return tensor_shape{std::move(dims)}; }

} // namespace

TEST_CASE("elementwise unary gradients match finite differences", "[actors][gradients]") {
  std::uint64_t seed = base_seed;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  auto s23 = shape({2, 3});
  struct unary_case {
    std::string name;
    std::function<output(output)> op;
    tensor input;
  };
  std::vector<unary_case> cases{
    {"Identity", [](output x) { return ops::identity(x); }, uniform(e, s23, -2, 2)},
    {"Neg", [](output x) { return ops::neg(x); }, uniform(e, s23, -2, 2)},
    {"Square", [](output x) { return ops::square(x); }, uniform(e, s23, -2, 2)},
    {"Sqrt", [](output x) { return ops::sqrt(x); }, uniform(e, s23, 0.5, 3)},
    {"Exp", [](output x) { return ops::exp(x); }, uniform(e, s23, -2, 2)},
    {"Log", [](output x) { return ops::log(x); }, uniform(e, s23, 0.5, 3)},
    {"Relu", [](output x) { return ops::relu(x); }, away_from_zero(e, s23, 0.1, 2)},
    {"Sigmoid", [](output x) { return ops::sigmoid(x); }, uniform(e, s23, -3, 3)},
    {"Tanh", [](output x) { return ops::tanh(x); }, uniform(e, s23, -2, 2)},
    {"Softmax", [](output x) { return ops::softmax(x); }, uniform(e, s23, -2, 2)},
    {"Softmax of a vector", [](output x) { return ops::softmax(x); }, uniform(e, shape({4}), -2, 2)},
    {"Abs", [](output x) { return ops::abs(x); }, away_from_zero(e, s23, 0.1, 2)},
    {"Sin", [](output x) { return ops::sin(x); }, uniform(e, s23, -3, 3)},
    {"Cos", [](output x) { return ops::cos(x); }, uniform(e, s23, -3, 3)},
    {"Log1p", [](output x) { return ops::log1p(x); }, uniform(e, s23, -0.5, 3)},
    {"Expm1", [](output x) { return ops::expm1(x); }, uniform(e, s23, -2, 2)},
    {"Cumsum", [](output x) { return ops::cumsum(x, 1); }, uniform(e, s23, -2, 2)},
    {"Cumsum exclusive and reversed", [](output x) { return ops::cumsum(x, 0, true, true); },
     uniform(e, s23, -2, 2)},
    {"Cumsum reversed", [](output x) { return ops::cumsum(x, -1, false, true); }, uniform(e, s23, -2, 2)},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    auto& c = cases[i];
    check_gradients(c.name, seed + i, {fixed(c.input)},
                    [&](graph&, const std::vector<output>& x) { return c.op(x[0]); });
  }
}

TEST_CASE("Add, Sub, Mul, Div, Maximum, Minimum, Pow, SquaredDifference and FloorMod gradients "
          "undo broadcasting",
          "[actors][gradients]") {
  std::uint64_t seed = base_seed + 100;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  struct shapes {
    tensor_shape a, b;
  };
  std::vector<shapes> pairs{{shape({2, 3}), shape({2, 3})}, {shape({2, 3}), shape({3})},
                            {shape({3}), shape({2, 3})},    {shape({2, 3}), shape({2, 1})},
                            {shape({}), shape({2, 3})},     {shape({2, 3}), shape({})},
                            {shape({3}), shape({2, 1})},    {shape({1, 3}), shape({2, 1})}};
  std::vector<std::pair<std::string, std::function<output(output, output)>>> binary{
    {"Add", [](output a, output b) { return ops::add(a, b); }},
    {"Sub", [](output a, output b) { return ops::sub(a, b); }},
    {"Mul", [](output a, output b) { return ops::mul(a, b); }},
    {"Div", [](output a, output b) { return ops::div(a, b); }},
    {"Maximum", [](output a, output b) { return ops::maximum(a, b); }},
    {"Minimum", [](output a, output b) { return ops::minimum(a, b); }},
    {"Pow", [](output a, output b) { return ops::pow(a, b); }},
    {"SquaredDifference", [](output a, output b) { return ops::squared_difference(a, b); }},
    {"FloorMod", [](output a, output b) { return ops::floor_mod(a, b); }},
  };
  std::uint64_t n = 0;
  for (auto& [name, op] : binary)
    for (auto& p : pairs) {
      // Pow's base stays positive (its gradient in y needs log x); divisors away from zero.
      auto a = name == "Pow" ? uniform(e, p.a, 0.5, 2) : uniform(e, p.a, -2, 2);
      auto b = name == "Div" || name == "FloorMod" ? away_from_zero(e, p.b, 0.5, 2)
                                                   : uniform(e, p.b, -2, 2);
      auto fn = op;
      check_gradients(name + " " + p.a.to_string() + " " + p.b.to_string(), seed + n++,
                      {fixed(a), fixed(b)},
                      [fn](graph&, const std::vector<output>& x) { return fn(x[0], x[1]); });
    }
  // The same tensor on both sides: two gradients summed into one input.
  check_gradients("x * x + exp(x) * x", seed + n++, {fixed(uniform(e, shape({2, 3}), -1, 1))},
                  [](graph&, const std::vector<output>& x) {
                    return x[0] * x[0] + ops::exp(x[0]) * x[0];
                  });
  // Partial static shapes: broadcasting undone at run time.
  check_gradients("[?,3] + [3] fed with a batch of 4", seed + n++,
                  {partial(uniform(e, shape({4, 3}), -1, 1), shape({-1, 3})),
                   fixed(uniform(e, shape({3}), -1, 1))},
                  [](graph&, const std::vector<output>& x) { return x[0] * x[1] + x[1]; });
  check_gradients("[?,3] / [?,1] of unknown batch", seed + n++,
                  {partial(uniform(e, shape({2, 3}), -1, 1), shape({-1, 3})),
                   partial(away_from_zero(e, shape({2, 1}), 0.5, 2), shape({-1, 1}))},
                  [](graph&, const std::vector<output>& x) { return x[0] / x[1]; });
}

TEST_CASE("MatMul gradients match for all four transpose combinations", "[actors][gradients]") {
  std::uint64_t seed = base_seed + 200;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  std::uint64_t n = 0;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      auto a = uniform(e, ta ? shape({3, 2}) : shape({2, 3}), -1, 1);
      auto b = uniform(e, tb ? shape({4, 3}) : shape({3, 4}), -1, 1);
      check_gradients(std::string{"MatMul transpose_a="} + (ta ? "true" : "false") +
                        " transpose_b=" + (tb ? "true" : "false"),
                      seed + n++, {fixed(a), fixed(b)},
                      [ta, tb](graph&, const std::vector<output>& x) {
                        return ops::matmul(x[0], x[1], ta, tb);
                      });
    }
}

TEST_CASE("Sum, Mean, Max, Min and Prod gradients match over every axis with and without "
          "keep_dims",
          "[actors][gradients]") {
  std::uint64_t seed = base_seed + 300;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  std::vector<std::vector<std::int64_t>> axes_sets{{}, {0}, {1}, {2}, {-1}, {0, 2}, {1, 2}};
  std::vector<std::pair<std::string, decltype(&ops::reduce_sum)>> reductions{
    {"Sum", &ops::reduce_sum}, {"Mean", &ops::reduce_mean}, {"Max", &ops::reduce_max},
    {"Min", &ops::reduce_min}, {"Prod", &ops::reduce_prod}};
  std::uint64_t n = 0;
  for (auto& [name, reduce] : reductions)
    for (auto& axes : axes_sets)
      for (bool keep : {false, true}) {
        std::string label = name + " axes [";
        for (auto a : axes)
          label += std::to_string(a) + " ";
        label += keep ? "] keep_dims" : "]";
        auto fn = reduce;
        auto ax = axes;
        check_gradients(label, seed + n++, {fixed(distinct(e, shape({2, 3, 4})))},
                        [fn, ax, keep](graph&, const std::vector<output>& x) {
                          return fn(x[0], ax, keep, "reduce");
                        });
      }
  // Unknown batch: the broadcast back and Mean's count come from the run-time shape.
  for (auto& [name, reduce] : reductions)
    for (bool keep : {false, true}) {
      auto fn = reduce;
      check_gradients(name + " over an unknown batch axis" + (keep ? " keep_dims" : ""),
                      seed + n++, {partial(distinct(e, shape({4, 3})), shape({-1, 3}))},
                      [fn, keep](graph&, const std::vector<output>& x) {
                        return fn(x[0], {0}, keep, "reduce");
                      });
      check_gradients(name + " over everything of unknown rank", seed + n++,
                      {partial(distinct(e, shape({2, 3})), tensor_shape::unknown())},
                      [fn](graph&, const std::vector<output>& x) { return fn(x[0], {}, false, "reduce"); });
    }
}

TEST_CASE("SelectV2 sends each branch its elements' gradient, broadcasting undone",
          "[actors][gradients]") {
  std::uint64_t seed = base_seed + 350;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  // where(x0 > 0, x0, x1 [3]) - x2 []: the condition broadcasts with the row and the scalar.
  check_gradients("select over a row and a scalar", seed,
                  {fixed(away_from_zero(e, shape({2, 3}), 0.1, 2)), fixed(uniform(e, shape({3}), -2, 2)),
                   fixed(uniform(e, shape({}), -2, 2))},
                  [](graph& g, const std::vector<output>& x) {
                    auto positive = ops::greater(x[0], ops::constant(g, 0.0, "zero"));
                    return ops::select(positive, x[0], x[1]) * ops::select(positive, x[2], x[0]);
                  });
}

TEST_CASE("Prod's gradient is exact where its groups hold one zero or more",
          "[actors][gradients]") {
  // Rows: one zero, two zeros, none.
  graph g;
  auto x = ops::constant(g, tensor::from_vector<double>({0, 2, 3, 0, 0, 4, 1, 2, 3}, shape({3, 3})));
  auto grads = gradients(ops::reduce_sum(ops::reduce_prod(x, {1})), {x});
  REQUIRE(g.status().ok());
  session s{g};
  auto r = s.run(grads);
  INFO(r.error().to_string());
  REQUIRE(r.ok());
  CHECK(r->at(0).to_vector<double>() == std::vector<double>{6, 0, 0, 0, 0, 0, 6, 3, 2});
  // The same against finite differences (a product is linear in each factor, zeros included).
  std::mt19937_64 e{base_seed + 360};
  auto with_zeros = uniform(e, shape({2, 4}), -2, 2);
  with_zeros.data<double>()[1] = 0;
  with_zeros.data<double>()[4] = 0;
  with_zeros.data<double>()[6] = 0;
  check_gradients("Prod of rows holding zeros", base_seed + 360, {fixed(with_zeros)},
                  [](graph&, const std::vector<output>& x) { return ops::reduce_prod(x[0], {1}); });
}

TEST_CASE("Max splits its gradient evenly between tied maxima", "[actors][gradients]") {
  graph g;
  auto x = ops::constant(g, tensor::from_vector<double>({1, 3, 3, 2, 0, 2, 5, 5, 5}, shape({3, 3})));
  auto grads = gradients(ops::reduce_sum(ops::reduce_max(x, {1})), {x});
  REQUIRE(g.status().ok());
  session s{g};
  auto r = s.run(grads);
  INFO(r.error().to_string());
  REQUIRE(r.ok());
  auto got = r->at(0).to_vector<double>();
  std::vector<double> expected{0, 0.5, 0.5, 0.5, 0, 0.5, 1.0 / 3, 1.0 / 3, 1.0 / 3};
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    CHECK(got[i] == Approx(expected[i]));
}

TEST_CASE("Reshape, Fill and Cast gradients match finite differences", "[actors][gradients]") {
  std::uint64_t seed = base_seed + 400;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  std::uint64_t n = 0;
  for (auto dims : std::vector<std::vector<std::int64_t>>{{3, 2}, {-1}, {6, 1}, {1, -1, 3}})
    check_gradients("Reshape to " + shape(dims).to_string(), seed + n++,
                    {fixed(uniform(e, shape({2, 3}), -1, 1))},
                    [dims](graph&, const std::vector<output>& x) {
                      return ops::reshape(ops::square(x[0]), dims);
                    });
  check_gradients("Reshape of an input of unknown batch", seed + n++,
                  {partial(uniform(e, shape({4, 3}), -1, 1), shape({-1, 3}))},
                  [](graph&, const std::vector<output>& x) {
                    return ops::reshape(ops::square(x[0]), {-1});
                  });
  check_gradients("Fill", seed + n++, {fixed(uniform(e, shape({}), -1, 1))},
                  [](graph& g, const std::vector<output>& x) {
                    return ops::fill(g, {2, 3}, ops::square(x[0]));
                  });
  check_gradients("Cast float64 -> float64", seed + n++, {fixed(uniform(e, shape({2, 3}), -1, 1))},
                  [](graph&, const std::vector<output>& x) {
                    return ops::cast(ops::square(x[0]), dtype::float64);
                  });
  // Through float32 the differences are only as exact as float32: a larger step and tolerance.
  check_options coarse;
  coarse.h = 1e-3;
  coarse.tolerance = 2e-3;
  check_gradients("Cast float64 -> float32 -> float64", seed + n++,
                  {fixed(uniform(e, shape({2, 3}), -1, 1))},
                  [](graph&, const std::vector<output>& x) {
                    auto narrow = ops::cast(x[0], dtype::float32);
                    return ops::cast(ops::square(narrow), dtype::float64);
                  },
                  coarse);
}

TEST_CASE("ConcatV2 gradients match finite differences over every axis and unknown dimensions",
          "[actors][gradients]") {
  std::uint64_t seed = base_seed + 1000;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  std::uint64_t n = 0;
  struct concat_case {
    std::vector<tensor_shape> parts;
    std::int64_t axis;
  };
  std::vector<concat_case> cases{
    {{shape({2, 3}), shape({1, 3}), shape({3, 3})}, 0},
    {{shape({2, 2}), shape({2, 3})}, 1},
    {{shape({2, 2}), shape({2, 3})}, -1},
    {{shape({2, 1, 2}), shape({2, 3, 2})}, 1},
    {{shape({4}), shape({2})}, 0},
  };
  for (auto& c : cases) {
    std::vector<test_input> inputs;
    std::string label = "concat along " + std::to_string(c.axis) + " of";
    for (auto& s : c.parts) {
      inputs.push_back(fixed(uniform(e, s, -1, 1)));
      label += " " + s.to_string();
    }
    auto axis = c.axis;
    // Squares make each slice's gradient depend on its own input's values.
    check_gradients(label, seed + n++, inputs, [axis](graph&, const std::vector<output>& x) {
      std::vector<output> squares;
      for (auto& xi : x)
        squares.push_back(ops::square(xi));
      return ops::concat(squares, axis);
    });
  }
  // Unknown dimensions: the slices come from the inputs' run-time shapes.
  check_gradients("concat of batches of unknown size along axis 0", seed + n++,
                  {partial(uniform(e, shape({2, 3}), -1, 1), shape({-1, 3})),
                   partial(uniform(e, shape({3, 3}), -1, 1), shape({-1, 3}))},
                  [](graph&, const std::vector<output>& x) {
                    return ops::concat({ops::exp(x[0]), ops::square(x[1])}, 0);
                  });
  check_gradients("concat along axis 1 of unknown rank and unknown batch", seed + n++,
                  {partial(uniform(e, shape({3, 2}), -1, 1), tensor_shape::unknown()),
                   partial(uniform(e, shape({3, 4}), -1, 1), shape({-1, 4}))},
                  [](graph&, const std::vector<output>& x) {
                    return ops::concat({ops::tanh(x[0]), x[1] * x[1]}, 1);
                  });
  // Second order: differentiating SplitToShapesOf concatenates, with zeros for a slice that no
  // gradient reaches (the constant's).
  auto start = uniform(e, shape({2, 3}), -1, 1);
  auto constant = uniform(e, shape({1, 3}), -1, 1);
  check_gradients("second order through concat and a constant slice", seed + n++, {fixed(start)},
                  [constant](graph& g, const std::vector<output>& x) {
                    auto c = ops::constant(g, constant, "c");
                    auto joined = ops::concat({ops::tanh(x[0]), c}, 0);
                    return gradients(ops::reduce_sum(joined * joined * joined), {x[0]})[0];
                  });
}

TEST_CASE("SoftmaxCrossEntropyWithLogits gradients match for logits and labels",
          "[actors][gradients]") {
  std::uint64_t seed = base_seed + 500;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  auto logits = uniform(e, shape({2, 3}), -2, 2);
  auto labels = distributions(e, shape({2, 3}));
  check_gradients("loss (output 0)", seed, {fixed(logits), fixed(labels)},
                  [](graph&, const std::vector<output>& x) {
                    return ops::softmax_cross_entropy_with_logits(x[0], x[1]);
                  });
  check_gradients("backprop (output 1)", seed + 1, {fixed(logits), fixed(labels)},
                  [](graph& g, const std::vector<output>& x) {
                    auto loss = ops::softmax_cross_entropy_with_logits(x[0], x[1]);
                    return g.output_of(loss.node_id, 1);
                  });
  check_gradients("both outputs", seed + 2, {fixed(logits), fixed(labels)},
                  [](graph& g, const std::vector<output>& x) {
                    auto loss = ops::softmax_cross_entropy_with_logits(x[0], x[1]);
                    auto backprop = g.output_of(loss.node_id, 1);
                    return backprop * ops::reshape(loss, {-1, 1});
                  });
}

TEST_CASE("gradients of gradients match finite differences", "[actors][gradients]") {
  std::uint64_t seed = base_seed + 600;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  struct case_spec {
    std::string name;
    std::function<output(output)> f;
    tensor input;
  };
  std::vector<case_spec> cases{
    {"Tanh", [](output x) { return ops::tanh(x); }, uniform(e, shape({2, 3}), -1, 1)},
    {"Sigmoid", [](output x) { return ops::sigmoid(x); }, uniform(e, shape({2, 3}), -2, 2)},
    {"Relu * x", [](output x) { return ops::relu(x) * x; }, away_from_zero(e, shape({2, 3}), 0.1, 1)},
    {"Mean of x^3", [](output x) { return ops::reduce_mean(x * ops::square(x), {1}, true); },
     uniform(e, shape({2, 3}), -1, 1)},
    {"Reshape", [](output x) { return ops::reshape(ops::exp(ops::reshape(x, {-1})), {2, 3}); }, uniform(e, shape({2, 3}), -1, 1)},
  };
  std::uint64_t n = 0;
  for (auto& c : cases) {
    auto f = c.f;
    // z = d(sum(f(x) * x))/dx, itself differentiated by the checker.
    check_gradients("second order: " + c.name, seed + n++, {fixed(c.input)},
                    [f](graph&, const std::vector<output>& x) {
                      return gradients(ops::reduce_sum(f(x[0]) * x[0]), {x[0]})[0];
                    });
  }
  check_gradients("second order through a broadcast bias", seed + n++,
                  {partial(uniform(e, shape({3, 2}), -1, 1), shape({-1, 2})),
                   fixed(uniform(e, shape({2}), -1, 1))},
                  [](graph&, const std::vector<output>& x) {
                    auto t = ops::tanh(x[0] + x[1]);
                    return gradients(ops::reduce_sum(t * t), {x[1]})[0];
                  });
}

TEST_CASE("the gradient for a variable's ref flows through variable.read", "[actors][gradients]") {
  std::uint64_t seed = base_seed + 700;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  graph g;
  auto v = ops::variable(g, ops::constant(g, uniform(e, shape({3, 2}), -1, 1)), "v");
  auto x = ops::constant(g, uniform(e, shape({2, 3}), -1, 1), "x");
  auto weights = ops::constant(g, uniform(e, shape({2, 2}), -1, 1), "weights");
  // One use through the read identity, one of the ref directly.
  auto y = ops::reduce_sum(ops::tanh(ops::matmul(x, v)) * weights) +
           ops::reduce_sum(ops::square(ops::identity(v.ref)));
  auto grads = gradients(y, {v.ref});
  INFO(g.status().to_string());
  REQUIRE(g.status().ok());
  REQUIRE(grads[0].valid());
  auto value = ops::placeholder(g, dtype::float64, {3, 2}, "value");
  auto set = ops::assign(v, value);
  session s{g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  auto start = s.run({v.read});
  REQUIRE(start.ok());
  auto initial = start->at(0).clone();
  auto symbolic = s.run(grads);
  INFO(symbolic.error().to_string());
  REQUIRE(symbolic.ok());
  REQUIRE(symbolic->at(0).shape() == shape({3, 2}));
  check_options options;
  for (std::int64_t j = 0; j < initial.num_elements(); ++j) {
    INFO("element " << j);
    auto at = [&](double offset) {
      auto perturbed = initial.clone();
      perturbed.data<double>()[j] += offset;
      REQUIRE(s.run_targets({set}, {{value, perturbed}}).ok());
      return scalar_of(s.run({y}));
    };
    auto numeric = (at(options.h) - at(-options.h)) / (2 * options.h);
    compare(symbolic->at(0).data<double>()[j], numeric, options);
  }
}

TEST_CASE("an MLP over a batch of unknown size gets exact gradients for weights and inputs",
          "[actors][gradients]") {
  std::uint64_t seed = base_seed + 800;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  graph g;
  auto x = ops::placeholder(g, dtype::float64, {-1, 3}, "x");
  auto labels = ops::placeholder(g, dtype::float64, {-1, 2}, "labels");
  auto w1 = ops::variable(g, ops::constant(g, uniform(e, shape({3, 4}), -1, 1)), "w1");
  auto b1 = ops::variable(g, ops::constant(g, uniform(e, shape({4}), -0.5, 0.5)), "b1");
  auto w2 = ops::variable(g, ops::constant(g, uniform(e, shape({4, 2}), -1, 1)), "w2");
  auto b2 = ops::variable(g, ops::constant(g, uniform(e, shape({2}), -0.5, 0.5)), "b2");
  auto h = ops::tanh(ops::matmul(x, w1) + b1, "h");
  auto logits = ops::matmul(h, w2) + b2;
  auto xent = ops::reduce_mean(ops::softmax_cross_entropy_with_logits(logits, labels));
  auto penalty = ops::reduce_mean(ops::square(ops::reshape(h, {-1}))) * 0.1;
  auto peak = ops::reduce_mean(ops::reduce_max(ops::sigmoid(h), {1}));
  auto spread = ops::reduce_sum(ops::reduce_mean(ops::relu(logits + 5.0), {0}, true));
  auto loss = xent + penalty + peak + spread;
  std::vector<variable> vars{w1, b1, w2, b2};
  std::vector<output> xs;
  for (auto& v : vars)
    xs.push_back(v.ref);
  xs.push_back(x);
  auto grads = gradients(loss, xs);
  INFO(g.status().to_string());
  REQUIRE(g.status().ok());
  for (auto& grad : grads)
    REQUIRE(grad.valid());
  CHECK(grads[4].shape() == shape({-1, 3}));
  // The batch is unknown, so the run-time shape ops carry the gradients.
  int runtime_ops = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    auto& op = g.at(static_cast<int>(i)).op;
    runtime_ops += op == "SumToShapeOf" || op == "BroadcastToShapeOf" || op == "ReshapeLike";
  }
  CHECK(runtime_ops > 0);

  std::vector<output> setters;
  std::vector<output> values;
  for (auto& v : vars) {
    values.push_back(ops::placeholder(g, dtype::float64, v.ref.shape(), v.name() + "_value"));
    setters.push_back(ops::assign(v, values.back()));
  }
  auto batch = uniform(e, shape({5, 3}), -1, 1);
  auto targets = distributions(e, shape({5, 2}));
  session s{g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  std::vector<tensor> initial;
  for (auto& v : vars) {
    auto r = s.run({v.read});
    REQUIRE(r.ok());
    initial.push_back(r->at(0).clone());
  }
  feed_list data{{x, batch}, {labels, targets}};
  auto symbolic = s.run(grads, data);
  INFO(symbolic.error().to_string());
  REQUIRE(symbolic.ok());
  REQUIRE(symbolic->at(4).shape() == shape({5, 3}));

  check_options options;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    bool is_input = i == vars.size();
    auto& base = is_input ? batch : initial[i];
    INFO((is_input ? std::string{"x"} : vars[i].name()));
    REQUIRE(symbolic->at(i).shape() == base.shape());
    for (std::int64_t j = 0; j < base.num_elements(); ++j) {
      INFO("element " << j);
      auto at = [&](double offset) {
        auto perturbed = base.clone();
        perturbed.data<double>()[j] += offset;
        if (is_input)
          return scalar_of(s.run({loss}, {{x, perturbed}, {labels, targets}}));
        REQUIRE(s.run_targets({setters[i]}, {{values[i], perturbed}}).ok());
        auto y = scalar_of(s.run({loss}, data));
        REQUIRE(s.run_targets({setters[i]}, {{values[i], initial[i]}}).ok());
        return y;
      };
      auto numeric = (at(options.h) - at(-options.h)) / (2 * options.h);
      compare(symbolic->at(i).data<double>()[j], numeric, options);
    }
  }
}

TEST_CASE("run-time shape gradients of large float32 tensors match closed forms",
          "[actors][gradients]") {
  // Big enough for the kernels' parallel paths; float32 to cover the other registered dtype.
  std::uint64_t seed = base_seed + 900;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  const std::int64_t rows = 512, cols = 256;
  auto random_float = [&](tensor_shape s) {
    auto d = uniform(e, std::move(s), -1, 1);
    tensor f{dtype::float32, d.shape()};
    for (std::int64_t i = 0; i < d.num_elements(); ++i)
      f.data<float>()[i] = static_cast<float>(d.data<double>()[i]);
    return f;
  };
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {-1, cols}, "x");
  auto c = ops::placeholder(g, dtype::float32, {-1, 1}, "c");
  auto b = ops::placeholder(g, dtype::float32, {cols}, "b");
  auto w_value = random_float(shape({rows, cols}));
  auto row_value = random_float(shape({cols}));
  auto w = ops::constant(g, w_value, "w");
  auto w_row = ops::constant(g, row_value, "w_row");
  auto y = ops::reduce_sum(ops::reduce_mean(x, {0}) * w_row) + ops::reduce_sum((x + b) * w) +
           ops::reduce_sum(x * c * w);
  auto grads = gradients(y, {x, b, c});
  INFO(g.status().to_string());
  REQUIRE(g.status().ok());
  auto x_value = random_float(shape({rows, cols}));
  auto c_value = random_float(shape({rows, 1}));
  auto b_value = random_float(shape({cols}));
  session s{g};
  auto r = s.run(grads, {{x, x_value}, {c, c_value}, {b, b_value}});
  INFO(r.error().to_string());
  REQUIRE(r.ok());
  auto& dx = r->at(0);
  auto& db = r->at(1);
  auto& dc = r->at(2);
  REQUIRE(dx.shape() == shape({rows, cols}));
  REQUIRE(db.shape() == shape({cols}));
  REQUIRE(dc.shape() == shape({rows, 1}));
  auto near = [](double got, double expected) {
    return std::abs(got - expected) <= 1e-4 * std::max(1.0, std::abs(expected));
  };
  int bad_x = 0, bad_b = 0, bad_c = 0;
  for (std::int64_t j = 0; j < cols; ++j) {
    double column = 0;
    for (std::int64_t i = 0; i < rows; ++i) {
      double wij = w_value.data<float>()[i * cols + j];
      column += wij;
      double expected = row_value.data<float>()[j] / rows + wij + c_value.data<float>()[i] * wij;
      bad_x += !near(dx.data<float>()[i * cols + j], expected);
    }
    bad_b += !near(db.data<float>()[j], column);
  }
  for (std::int64_t i = 0; i < rows; ++i) {
    double dot = 0;
    for (std::int64_t j = 0; j < cols; ++j)
      dot += static_cast<double>(x_value.data<float>()[i * cols + j]) * w_value.data<float>()[i * cols + j];
    bad_c += !near(dc.data<float>()[i], dot);
  }
  CHECK(bad_x == 0);
  CHECK(bad_b == 0);
  CHECK(bad_c == 0);
}

TEST_CASE("Conv2D gradients match for both paddings and strides, for input and filter",
          "[actors][gradients]") {
  std::uint64_t seed = base_seed + 900;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  std::uint64_t n = 0;
  for (std::string padding : {"SAME", "VALID"})
    for (std::int64_t stride : {1, 2}) {
      auto x = uniform(e, shape({2, 5, 6, 2}), -1, 1);
      auto filter = uniform(e, shape({3, 2, 2, 3}), -1, 1);
      check_gradients("Conv2D " + padding + " stride " + std::to_string(stride), seed + n++,
                      {fixed(x), fixed(filter)},
                      [padding, stride](graph&, const std::vector<output>& in) {
                        return ops::conv2d(in[0], in[1], {stride, stride}, padding);
                      });
    }
}

TEST_CASE("MaxPool and AvgPool gradients match for both paddings", "[actors][gradients]") {
  std::uint64_t seed = base_seed + 950;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  std::uint64_t n = 0;
  for (std::string padding : {"SAME", "VALID"}) {
    // distinct(): no ties, so the maximum (and its finite difference) is unambiguous.
    check_gradients("MaxPool 2x2/2 " + padding, seed + n++, {fixed(distinct(e, shape({2, 5, 4, 3})))},
                    [padding](graph&, const std::vector<output>& in) {
                      return ops::max_pool(in[0], {2, 2}, {2, 2}, padding);
                    });
    check_gradients("AvgPool 3x2/1 " + padding, seed + n++, {fixed(uniform(e, shape({2, 5, 4, 3}), -1, 1))},
                    [padding](graph&, const std::vector<output>& in) {
                      return ops::avg_pool(in[0], {3, 2}, {1, 1}, padding);
                    });
  }
}

// --- control flow (graph/control_flow.hpp) -------------------------------------------------------

TEST_CASE("gradients flow through the taken branch of a cond only", "[actors][gradients]") {
  std::uint64_t seed = base_seed + 1000;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  std::uint64_t n = 0;
  for (double sign : {1.0, -1.0}) {
    // sum(x0) decides the branch; the perturbations are too small to flip it.
    auto x0 = uniform(e, shape({2, 3}), 0.5, 1.0);
    for (std::int64_t i = 0; i < x0.num_elements(); ++i)
      x0.data<double>()[i] *= sign;
    check_gradients(sign > 0 ? "cond, true branch" : "cond, false branch", seed + n++,
                    {fixed(x0), fixed(uniform(e, shape({3, 2}), -1, 1))},
                    [](graph&, const std::vector<output>& in) {
                      auto x = in[0];
                      auto w = in[1];
                      return ops::cond(
                        ops::greater(ops::reduce_sum(x), 0.0),
                        [&] { return ops::tanh(ops::matmul(x, w)); },
                        // x only: no gradient reaches w from this branch.
                        [&] { return ops::reshape(x * x, {3, 2}) * 3.0; });
                    });
  }
}

TEST_CASE("gradients of a while loop reach its initial values and the tensors its body reads",
          "[actors][gradients]") {
  std::uint64_t seed = base_seed + 1100;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  std::uint64_t n = 0;
  for (int iterations : {0, 1, 4}) {
    check_gradients("a tanh recurrence over " + std::to_string(iterations) + " iterations",
                    seed + n++,
                    {fixed(uniform(e, shape({2, 3}), -1, 1)), fixed(uniform(e, shape({3, 3}), -0.8, 0.8)),
                     fixed(uniform(e, shape({3}), -0.5, 0.5))},
                    [iterations](graph& g, const std::vector<output>& in) {
                      auto w = in[1];
                      auto b = in[2];
                      auto out = ops::while_loop(
                        [iterations](const std::vector<output>& v) {
                          return ops::less(v[0], static_cast<double>(iterations));
                        },
                        [&](const std::vector<output>& v) {
                          // h' = tanh(h w + b) * s, s' = s * 1.1: two carried variables.
                          auto h = ops::tanh(ops::matmul(v[1], w) + b) * v[2];
                          return std::vector<output>{v[0] + 1.0, h, v[2] * 1.1};
                        },
                        {ops::scalar_like(g, dtype::float64, 0.0, "i"), in[0],
                         ops::scalar_like(g, dtype::float64, 1.0, "s")});
                      return out[1] * out[2];
                    });
  }
}

TEST_CASE("gradients of nested while loops and of a loop with parallel iterations",
          "[actors][gradients]") {
  std::uint64_t seed = base_seed + 1200;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  check_gradients("a loop in a loop", seed, {fixed(uniform(e, shape({3}), -1, 1)), fixed(uniform(e, shape({3}), 0.5, 1.0))},
                  [](graph& g, const std::vector<output>& in) {
                    auto w = in[1];
                    auto out = ops::while_loop(
                      [](const std::vector<output>& v) { return ops::less(v[0], 3.0); },
                      [&](const std::vector<output>& v) {
                        auto i = v[0];
                        auto inner = ops::while_loop(
                          [](const std::vector<output>& u) { return ops::less(u[0], 2.0); },
                          [&](const std::vector<output>& u) {
                            return std::vector<output>{u[0] + 1.0, ops::sigmoid(u[1] * w + i)};
                          },
                          {ops::scalar_like(*i.owner, dtype::float64, 0.0, "j"), v[1]});
                        return std::vector<output>{i + 1.0, inner[1]};
                      },
                      {ops::scalar_like(g, dtype::float64, 0.0, "i"), in[0]});
                    return out[1];
                  });
  ops::while_options serial;
  serial.parallel_iterations = 1;
  check_gradients("ten iterations, one at a time", seed + 1, {fixed(uniform(e, shape({4}), -1, 1))},
                  [serial](graph& g, const std::vector<output>& in) {
                    auto out = ops::while_loop(
                      [](const std::vector<output>& v) { return ops::less(v[0], 10.0); },
                      [](const std::vector<output>& v) {
                        return std::vector<output>{v[0] + 1.0, ops::tanh(v[1]) * 0.9 + v[1] * 0.1};
                      },
                      {ops::scalar_like(g, dtype::float64, 0.0, "i"), in[0]}, serial);
                    return out[1];
                  });
}


namespace {

/// Four iterations of h' = early(h, w) in iterations 0 and 1 (a cond's true branch) and
/// h' = h / 2 - w in 2 and 3; inputs h0 and w.
output branching_loop(graph& g, const std::vector<output>& in,
                      const std::function<output(output h, output w)>& early) {
  auto w = in[1];
  auto out = ops::while_loop(
    [](const std::vector<output>& v) { return ops::less(v[0], 4.0); },
    [&](const std::vector<output>& v) {
      auto h = v[1];
      auto next = ops::cond(ops::less(v[0], 1.5), [&] { return early(h, w); },
                            [&] { return h * 0.5 - w; });
      return std::vector<output>{v[0] + 1.0, next};
    },
    {ops::scalar_like(g, dtype::float64, 0.0, "i"), in[0]});
  return out[1];
}

} // namespace

TEST_CASE("gradients of conds inside while loops take each iteration's branch",
          "[actors][gradients]") {
  std::uint64_t seed = base_seed + 1300;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  auto inputs = [&] {
    return std::vector<test_input>{fixed(uniform(e, shape({3}), -1, 1)),
                                   fixed(uniform(e, shape({3}), 0.5, 1.0))};
  };
  // The true branch reads a forward value of its own (the tanh), popped only where pushed.
  check_gradients("a cond in a loop", seed, inputs(), [](graph& g, const std::vector<output>& in) {
    return branching_loop(g, in, [](output h, output w) {
      auto t = ops::tanh(h * w + 0.1);
      return t * t;
    });
  });
  check_gradients("a loop in a cond in a loop", seed + 1, inputs(),
                  [](graph& g, const std::vector<output>& in) {
                    return branching_loop(g, in, [](output h, output w) {
                      auto inner = ops::while_loop(
                        [](const std::vector<output>& u) { return ops::less(u[0], 2.0); },
                        [&](const std::vector<output>& u) {
                          return std::vector<output>{u[0] + 1.0, ops::tanh(u[1] * w)};
                        },
                        {ops::scalar_like(*h.owner, dtype::float64, 0.0, "j"), h});
                      return inner[1];
                    });
                  });
}

TEST_CASE("gradients of a loop whose condition reads its float state while its body reads an "
          "integer",
          "[actors][gradients]") {
  std::uint64_t seed = base_seed + 1400;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  check_gradients("an integer counter in the body, a float bound in the condition", seed,
                  {fixed(uniform(e, shape({3}), -1, 1))}, [](graph& g, const std::vector<output>& in) {
                    auto out = ops::while_loop(
                      [](const std::vector<output>& v) {
                        return ops::logical_and(ops::less(v[0], 3.0),
                                                ops::less(ops::reduce_sum(ops::square(v[1])), 1000.0));
                      },
                      [](const std::vector<output>& v) {
                        auto scale = ops::cast(v[0], dtype::float64) * 0.25 + 0.5;
                        return std::vector<output>{v[0] + 1.0, ops::tanh(v[1] * scale)};
                      },
                      {ops::constant(g, std::int32_t{0}, "t"), in[0]});
                    return out[1];
                  });
}

TEST_CASE("Transpose gradients match finite differences for every permutation of rank 3 and of "
          "unknown dimensions",
          "[actors][gradients]") {
  std::uint64_t seed = base_seed + 1500;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  std::uint64_t n = 0;
  std::vector<std::int64_t> perm{0, 1, 2};
  do {
    check_gradients("transpose by " + shape(perm).to_string(), seed + n++,
                    {fixed(uniform(e, shape({2, 3, 4}), -1, 1))},
                    [perm](graph&, const std::vector<output>& x) {
                      // The square makes each element's gradient depend on its own value.
                      return ops::transpose(ops::square(x[0]), perm);
                    });
  } while (std::next_permutation(perm.begin(), perm.end()));
  check_gradients("transpose without perm of an input of unknown rank", seed + n++,
                  {partial(uniform(e, shape({3, 2, 2}), -1, 1), tensor_shape::unknown())},
                  [](graph&, const std::vector<output>& x) {
                    return ops::transpose(ops::tanh(x[0]));
                  });
  check_gradients("transpose of a batch of unknown size into a matmul", seed + n++,
                  {partial(uniform(e, shape({4, 3}), -1, 1), shape({-1, 3})),
                   fixed(uniform(e, shape({4, 2}), -1, 1))},
                  [](graph&, const std::vector<output>& x) {
                    return ops::matmul(ops::transpose(x[0], {1, 0}), ops::exp(x[1]));
                  });
}

TEST_CASE("StridedSlice gradients match finite differences, with unknown dimensions and second order",
          "[actors][gradients]") {
  std::uint64_t seed = base_seed + 3000;
  std::mt19937_64 e{seed};
  INFO("seed " << seed);
  std::uint64_t n = 0;
  // x[3:0:-2, 1::2]: backwards rows, every other column.
  strided_slice_spec corners{{3, 1}, {0, 0}, {-2, 2}, 0, 2, 0, 0, 0};
  check_gradients("x[3:0:-2, 1::2] of [5, 4]", seed + n++, {fixed(uniform(e, shape({5, 4}), -1, 1))},
                  [corners](graph&, const std::vector<output>& x) {
                    return ops::square(ops::strided_slice(x[0], corners));
                  });
  // x[..., tf.newaxis, -1] of a batch of unknown size: the gradient takes x's run-time shape.
  strided_slice_spec last{{0, 0, -1}, {0, 0, 0}, {1, 1, 1}, 0, 0, 1, 2, 4};
  check_gradients("x[..., newaxis, -1] of [?, 3]", seed + n++,
                  {partial(uniform(e, shape({2, 3}), -1, 1), shape({-1, 3}))},
                  [last](graph&, const std::vector<output>& x) {
                    return ops::exp(ops::strided_slice(x[0], last));
                  });
  // Second order: the gradient of StridedSliceGrad with respect to its dy slices.
  strided_slice_spec rows{{1}, {3}, {1}};
  check_gradients("StridedSliceGrad(x[1:3]) of [4, 2] in its dy", seed + n++,
                  {fixed(uniform(e, shape({2, 2}), -1, 1))},
                  [rows](graph& g, const std::vector<output>& x) {
                    // x's values are never read, only its shape: no gradient goes to it.
                    auto like = ops::constant(g, tensor::from_vector(std::vector<double>(8, 0.0), shape({4, 2})));
                    return ops::square(ops::strided_slice_grad(like, x[0], rows));
                  });
}

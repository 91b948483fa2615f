// Graph building: shape inference of every op in graph/ops.hpp, unique names, name scopes,
// variables, the initializer, control dependencies, tensor_shape and broadcasting.
#include "graph/graph.hpp"
#include "graph/ops.hpp"
#include "graph/tensor_shape.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

using namespace actorflow;
using Catch::Matchers::Contains;

namespace {

tensor_shape shape(std::vector<std::int64_t> dims) { return tensor_shape{std::move(dims)}; }

const node& node_named(const graph& g, const std::string& name) {
  auto id = g.find(name);
  INFO("looking for node '" << name << "'");
  REQUIRE(id >= 0);
  return g.at(id);
}

bool has_control_input(const node& n, int id) {
  return std::find(n.control_inputs.begin(), n.control_inputs.end(), id) != n.control_inputs.end();
}

/// The graph's recorded error, which must be invalid_argument and name the node.
std::string recorded_error(const graph& g, const std::string& node_name) {
  INFO(g.status().to_string());
  REQUIRE_FALSE(g.status().ok());
  CHECK(g.status().code() == errc::invalid_argument);
  CHECK_THAT(g.status().message(), Contains("'" + node_name + "'"));
  return g.status().message();
}

} // namespace

// --- tensor_shape ------------------------------------------------------------------------------

TEST_CASE("tensor_shape prints known, partial, scalar and unknown-rank shapes", "[graph][shape]") {
  CHECK(shape({3, 4}).to_string() == "[3,4]");
  CHECK(shape({-1, 784}).to_string() == "[?,784]");
  CHECK(tensor_shape{}.to_string() == "[]");
  CHECK(tensor_shape::unknown().to_string() == "<unknown>");
  CHECK(shape({2, 3, 4}).num_elements() == 24);
  CHECK(tensor_shape{}.num_elements() == 1);
  CHECK(shape({-1, 3}).num_elements() == -1);
  CHECK_FALSE(shape({-1, 3}).fully_defined());
  CHECK(shape({-1, 784}).is_compatible_with(shape({32, 784})));
  CHECK_FALSE(shape({-1, 784}).is_compatible_with(shape({32, 783})));
  CHECK_FALSE(shape({-1, 784}).is_compatible_with(shape({784})));
  CHECK(tensor_shape::unknown().is_compatible_with(shape({1, 2, 3})));
  CHECK(tensor_shape::unknown() != tensor_shape{});
}

TEST_CASE("broadcast_shapes follows numpy rules and names both shapes when they clash",
          "[graph][shape]") {
  auto b = broadcast_shapes(shape({3, 1}), shape({1, 4}));
  REQUIRE(b.ok());
  CHECK(*b == shape({3, 4}));

  auto lower_rank = broadcast_shapes(shape({2, 3, 4}), shape({4}));
  REQUIRE(lower_rank.ok());
  CHECK(*lower_rank == shape({2, 3, 4}));

  auto with_scalar = broadcast_shapes(tensor_shape{}, shape({5}));
  REQUIRE(with_scalar.ok());
  CHECK(*with_scalar == shape({5}));

  auto partial = broadcast_shapes(shape({-1, 784}), shape({784}));
  REQUIRE(partial.ok());
  CHECK(*partial == shape({-1, 784}));

  auto unknown = broadcast_shapes(tensor_shape::unknown(), shape({3}));
  REQUIRE(unknown.ok());
  CHECK_FALSE(unknown->rank_known());

  auto bad = broadcast_shapes(shape({3, 4}), shape({5, 4}));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code() == errc::invalid_argument);
  CHECK_THAT(bad.error().message(), Contains("[3,4]") && Contains("[5,4]"));
}

// --- sources -------------------------------------------------------------------------------------

TEST_CASE("constants take their dtype and shape from the value", "[graph][ops]") {
  graph g;
  auto f = ops::constant(g, 3.f);
  auto d = ops::constant(g, 3.0);
  auto i = ops::constant(g, std::int32_t{3});
  auto l = ops::constant(g, std::int64_t{3});
  auto v = ops::constant(g, std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  auto s = ops::scalar_like(g, dtype::int64, 7.0);
  REQUIRE(g.status().ok());
  CHECK(f.type() == dtype::float32);
  CHECK(f.shape() == tensor_shape{});
  CHECK(d.type() == dtype::float64);
  CHECK(i.type() == dtype::int32);
  CHECK(l.type() == dtype::int64);
  CHECK(v.type() == dtype::float32);
  CHECK(v.shape() == shape({2, 3}));
  CHECK(s.type() == dtype::int64);
  CHECK(f.producer().op == "Const");
  CHECK(f.producer().has_attr("value"));
  CHECK(f.producer().attr_or<dtype>("dtype", dtype::boolean) == dtype::float32);
}

TEST_CASE("a constant whose values do not fill its shape is an error", "[graph][ops]") {
  graph g;
  (void)ops::constant(g, std::vector<float>{1, 2, 3}, {2, 2}, "bad");
  REQUIRE_FALSE(g.status().ok());
  CHECK_THAT(g.status().message(), Contains("bad") && Contains("[2,2]"));
}

TEST_CASE("placeholders keep partial and unknown shapes", "[graph][ops]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {-1, 784}, "x");
  auto any = ops::placeholder(g, dtype::int32);
  REQUIRE(g.status().ok());
  CHECK(x.name() == "x");
  CHECK(x.producer().op == "Placeholder");
  CHECK(x.type() == dtype::float32);
  CHECK(x.shape() == shape({-1, 784}));
  CHECK(x.shape().to_string() == "[?,784]");
  CHECK(any.name() == "Placeholder");
  CHECK(any.type() == dtype::int32);
  CHECK_FALSE(any.shape().rank_known());
}

// --- elementwise -------------------------------------------------------------------------------

TEST_CASE("unary elementwise ops keep their input's dtype and shape", "[graph][ops]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {-1, 10}, "x");
  std::vector<std::pair<output, std::string>> results = {
    {ops::identity(x), "Identity"}, {ops::neg(x), "Neg"},   {ops::square(x), "Square"},
    {ops::sqrt(x), "Sqrt"},         {ops::exp(x), "Exp"},   {ops::log(x), "Log"},
    {ops::relu(x), "Relu"},         {ops::sigmoid(x), "Sigmoid"}, {ops::tanh(x), "Tanh"},
    {ops::softmax(x), "Softmax"},   {-x, "Neg"},
  };
  REQUIRE(g.status().ok());
  for (auto& [y, op] : results) {
    INFO(y.name());
    CHECK(y.producer().op == op);
    CHECK(y.type() == dtype::float32);
    CHECK(y.shape() == shape({-1, 10}));
    REQUIRE(y.producer().inputs.size() == 1);
    CHECK(y.producer().inputs[0].node_id == x.node_id);
  }
  CHECK(results[1].first.name() == "Neg");
  CHECK(results.back().first.name() == "Neg_1");
}

TEST_CASE("float-only unary ops reject an integer input", "[graph][ops]") {
  graph g;
  auto i = ops::constant(g, std::int32_t{4});
  (void)ops::sqrt(i, "root");
  auto message = recorded_error(g, "root");
  CHECK_THAT(message, Contains("int32"));
}

TEST_CASE("binary ops broadcast and use TensorFlow's default names", "[graph][ops]") {
  graph g;
  auto a = ops::placeholder(g, dtype::float32, {3, 1}, "a");
  auto b = ops::placeholder(g, dtype::float32, {1, 4}, "b");
  auto sum = a + b;
  auto diff = a - b;
  auto prod = a * b;
  auto quot = a / b;
  REQUIRE(g.status().ok());
  CHECK(sum.name() == "add");
  CHECK(sum.producer().op == "Add");
  CHECK(diff.name() == "sub");
  CHECK(diff.producer().op == "Sub");
  CHECK(prod.name() == "mul");
  CHECK(prod.producer().op == "Mul");
  CHECK(quot.name() == "truediv");
  CHECK(quot.producer().op == "Div");
  for (auto& y : {sum, diff, prod, quot}) {
    CHECK(y.shape() == shape({3, 4}));
    CHECK(y.type() == dtype::float32);
  }
}

TEST_CASE("a plain number becomes a constant of the other operand's dtype", "[graph][ops]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float64, {2}, "x");
  auto y = x * 2.0;
  auto z = 1.0 - x;
  REQUIRE(g.status().ok());
  CHECK(y.shape() == shape({2}));
  CHECK(y.type() == dtype::float64);
  auto& two = g.at(y.producer().inputs[1].node_id);
  CHECK(two.op == "Const");
  CHECK(two.output_types.at(0) == dtype::float64);
  CHECK(z.producer().op == "Sub");
  CHECK(g.at(z.producer().inputs[0].node_id).op == "Const");
  CHECK(g.at(z.producer().inputs[1].node_id).name == "x");
}

TEST_CASE("mismatched broadcast shapes are recorded with the node's name and both shapes",
          "[graph][ops]") {
  graph g;
  auto a = ops::placeholder(g, dtype::float32, {3, 4}, "a");
  auto b = ops::placeholder(g, dtype::float32, {5, 4}, "b");
  auto c = ops::add(a, b, "bad_add");
  auto message = recorded_error(g, "bad_add");
  CHECK_THAT(message, Contains("[3,4]") && Contains("[5,4]"));
  // The node is still added, with an unknown shape, so that building can go on.
  CHECK(c.valid());
  CHECK(g.find("bad_add") == c.node_id);
  CHECK_FALSE(c.shape().rank_known());
  auto d = c * a;
  CHECK(d.valid());
  // Only the first error is kept.
  (void)ops::matmul(a, a, false, false, "second_error");
  CHECK_THAT(g.status().message(), Contains("bad_add"));
  CHECK_THAT(g.status().message(), !Contains("second_error"));
}

TEST_CASE("binary ops reject inputs of different dtypes", "[graph][ops]") {
  graph g;
  auto f = ops::constant(g, 1.f);
  auto i = ops::constant(g, std::int32_t{1});
  (void)ops::mul(f, i, "mixed");
  auto message = recorded_error(g, "mixed");
  CHECK_THAT(message, Contains("float32") && Contains("int32"));
}

TEST_CASE("Equal gives a bool result of the broadcast shape", "[graph][ops]") {
  graph g;
  auto a = ops::placeholder(g, dtype::int64, {-1}, "a");
  auto b = ops::placeholder(g, dtype::int64, {-1}, "b");
  auto e = ops::equal(a, b);
  REQUIRE(g.status().ok());
  CHECK(e.name() == "Equal");
  CHECK(e.type() == dtype::boolean);
  CHECK(e.shape() == shape({-1}));
  // Kernels are keyed by the input dtype, not the bool output.
  CHECK(e.producer().kernel_type == dtype::int64);
}

TEST_CASE("Cast changes the dtype, keeps the shape, and is keyed by the input dtype",
          "[graph][ops]") {
  graph g;
  auto i = ops::placeholder(g, dtype::int32, {2, 5}, "i");
  auto f = ops::cast(i, dtype::float32);
  REQUIRE(g.status().ok());
  CHECK(f.name() == "Cast");
  CHECK(f.type() == dtype::float32);
  CHECK(f.shape() == shape({2, 5}));
  CHECK(f.producer().attr_or<dtype>("dtype", dtype::boolean) == dtype::float32);
  CHECK(f.producer().kernel_type == dtype::int32);
}

// --- linear algebra, reductions, shapes -------------------------------------------------------

TEST_CASE("MatMul infers m by n and honours the transpose flags", "[graph][ops]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {-1, 784}, "x");
  auto w = ops::placeholder(g, dtype::float32, {784, 10}, "w");
  auto plain = ops::matmul(x, w);
  auto wt = ops::placeholder(g, dtype::float32, {784, 5}, "wt");
  auto ta = ops::matmul(wt, w, true, false);
  auto a = ops::placeholder(g, dtype::float32, {2, 3}, "a");
  auto b = ops::placeholder(g, dtype::float32, {4, 3}, "b");
  auto tb = ops::matmul(a, b, false, true);
  auto c = ops::placeholder(g, dtype::float32, {5, 2}, "c");
  auto both = ops::matmul(a, c, true, true);
  REQUIRE(g.status().ok());
  CHECK(plain.name() == "MatMul");
  CHECK(plain.shape() == shape({-1, 10}));
  CHECK(ta.name() == "MatMul_1");
  CHECK(ta.shape() == shape({5, 10}));
  CHECK(ta.producer().attr_or("transpose_a", false));
  CHECK_FALSE(ta.producer().attr_or("transpose_b", true));
  CHECK(tb.shape() == shape({2, 4}));
  CHECK(both.shape() == shape({3, 5}));
}

TEST_CASE("MatMul with different inner dimensions is an error naming both shapes",
          "[graph][ops]") {
  graph g;
  auto a = ops::placeholder(g, dtype::float32, {2, 3}, "a");
  auto b = ops::placeholder(g, dtype::float32, {4, 5}, "b");
  (void)ops::matmul(a, b, false, false, "logits");
  auto message = recorded_error(g, "logits");
  CHECK_THAT(message, Contains("[2,3]") && Contains("[4,5]"));
}

TEST_CASE("MatMul transposed into a mismatch is an error", "[graph][ops]") {
  graph g;
  auto a = ops::placeholder(g, dtype::float32, {2, 3}, "a");
  auto b = ops::placeholder(g, dtype::float32, {3, 4}, "b");
  (void)ops::matmul(a, b, true, false, "mm");
  recorded_error(g, "mm");
}

TEST_CASE("MatMul rejects inputs that are not matrices", "[graph][ops]") {
  graph g;
  auto a = ops::placeholder(g, dtype::float32, {6}, "a");
  auto b = ops::placeholder(g, dtype::float32, {6, 2}, "b");
  (void)ops::matmul(a, b, false, false, "mm");
  auto message = recorded_error(g, "mm");
  CHECK_THAT(message, Contains("[6]"));
}

TEST_CASE("reductions drop or keep the reduced axes, with negative axes counted from the end",
          "[graph][ops]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {2, 3, 4}, "x");
  auto sum1 = ops::reduce_sum(x, {1});
  auto sum1_keep = ops::reduce_sum(x, {1}, true);
  auto sum_last = ops::reduce_sum(x, {-1});
  auto sum_all = ops::reduce_sum(x);
  auto mean_all_keep = ops::reduce_mean(x, {}, true);
  auto mean0 = ops::reduce_mean(x, {0});
  auto max_ends = ops::reduce_max(x, {0, -1});
  auto max_ends_keep = ops::reduce_max(x, {-1, 0}, true);
  auto dup = ops::reduce_sum(x, {2, -1});
  REQUIRE(g.status().ok());
  CHECK(sum1.name() == "Sum");
  CHECK(sum1.producer().op == "Sum");
  CHECK(sum1.shape() == shape({2, 4}));
  CHECK(sum1_keep.name() == "Sum_1");
  CHECK(sum1_keep.shape() == shape({2, 1, 4}));
  CHECK(sum_last.shape() == shape({2, 3}));
  CHECK(sum_all.shape() == tensor_shape{});
  CHECK(mean_all_keep.producer().op == "Mean");
  CHECK(mean_all_keep.shape() == shape({1, 1, 1}));
  CHECK(mean0.shape() == shape({3, 4}));
  CHECK(max_ends.producer().op == "Max");
  CHECK(max_ends.shape() == shape({3}));
  CHECK(max_ends_keep.shape() == shape({1, 3, 1}));
  CHECK(dup.shape() == shape({2, 3}));
  CHECK(max_ends.type() == dtype::float32);
}

TEST_CASE("reductions keep unknown dimensions that are not reduced", "[graph][ops]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {-1, 10}, "x");
  CHECK(ops::reduce_sum(x, {1}).shape() == shape({-1}));
  CHECK(ops::reduce_mean(x).shape() == tensor_shape{});
  CHECK_FALSE(ops::reduce_sum(ops::placeholder(g, dtype::float32)).shape().rank_known());
  CHECK(g.status().ok());
}

TEST_CASE("a reduction axis out of range is an error naming the node", "[graph][ops]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {2, 3}, "x");
  (void)ops::reduce_sum(x, {-3}, false, "too_far");
  auto message = recorded_error(g, "too_far");
  CHECK_THAT(message, Contains("-3"));
}

TEST_CASE("ArgMax removes the axis and gives int64", "[graph][ops]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {-1, 10}, "x");
  auto a1 = ops::argmax(x, 1);
  auto a_last = ops::argmax(x, -1);
  auto a0 = ops::argmax(x, 0);
  REQUIRE(g.status().ok());
  CHECK(a1.name() == "ArgMax");
  CHECK(a1.type() == dtype::int64);
  CHECK(a1.shape() == shape({-1}));
  CHECK(a_last.shape() == shape({-1}));
  CHECK(a0.shape() == shape({10}));
  CHECK(a1.producer().kernel_type == dtype::float32);
  (void)ops::argmax(x, 2, "bad_axis");
  recorded_error(g, "bad_axis");
}

TEST_CASE("Reshape resolves -1 from the element count", "[graph][ops]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {2, 3, 4}, "x");
  auto r1 = ops::reshape(x, {-1, 4});
  auto r2 = ops::reshape(x, {4, -1});
  auto r3 = ops::reshape(x, {24});
  auto images = ops::placeholder(g, dtype::float32, {-1, 784}, "images");
  auto r4 = ops::reshape(images, {-1, 28, 28});
  REQUIRE(g.status().ok());
  CHECK(r1.name() == "Reshape");
  CHECK(r1.shape() == shape({6, 4}));
  CHECK(r2.shape() == shape({4, 6}));
  CHECK(r3.shape() == shape({24}));
  // Unknown input size: -1 stays unknown.
  CHECK(r4.shape() == shape({-1, 28, 28}));
}

TEST_CASE("Reshape to a different element count is an error naming the node and shapes",
          "[graph][ops]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {2, 3, 4}, "x");
  (void)ops::reshape(x, {5, 5}, "bad_reshape");
  auto message = recorded_error(g, "bad_reshape");
  CHECK_THAT(message, Contains("[2,3,4]") && Contains("[5,5]"));
}

TEST_CASE("Reshape with -1 that cannot divide the elements is an error", "[graph][ops]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {2, 3, 4}, "x");
  (void)ops::reshape(x, {-1, 5}, "uneven");
  recorded_error(g, "uneven");
}

TEST_CASE("Reshape accepts at most one -1", "[graph][ops]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {2, 3, 4}, "x");
  (void)ops::reshape(x, {-1, -1}, "two_unknown");
  recorded_error(g, "two_unknown");
}

// --- activations and losses -------------------------------------------------------------------

TEST_CASE("softmax_cross_entropy_with_logits has a per-example loss and a backprop output",
          "[graph][ops]") {
  graph g;
  auto logits = ops::placeholder(g, dtype::float32, {-1, 10}, "logits");
  auto labels = ops::placeholder(g, dtype::float32, {-1, 10}, "labels");
  auto loss = ops::softmax_cross_entropy_with_logits(logits, labels);
  REQUIRE(g.status().ok());
  CHECK(loss.name() == "SoftmaxCrossEntropyWithLogits");
  auto& n = loss.producer();
  REQUIRE(n.output_types.size() == 2);
  CHECK(loss.shape() == shape({-1}));
  CHECK(loss.type() == dtype::float32);
  auto backprop = g.output_of(loss.node_id, 1);
  CHECK(backprop.shape() == shape({-1, 10}));
  CHECK(backprop.type() == dtype::float32);
  CHECK(backprop.tensor_name() == "SoftmaxCrossEntropyWithLogits:1");
  CHECK(g.find_output("SoftmaxCrossEntropyWithLogits:1").index == 1);
  CHECK(ops::reduce_mean(loss).shape() == tensor_shape{});
}

TEST_CASE("softmax cross-entropy with different logits and labels shapes is an error",
          "[graph][ops]") {
  graph g;
  auto logits = ops::placeholder(g, dtype::float32, {8, 10}, "logits");
  auto labels = ops::placeholder(g, dtype::float32, {8, 9}, "labels");
  (void)ops::softmax_cross_entropy_with_logits(logits, labels, "xent");
  auto message = recorded_error(g, "xent");
  CHECK_THAT(message, Contains("[8,10]") && Contains("[8,9]"));
}

// --- filling and random ----------------------------------------------------------------------

TEST_CASE("fill, zeros and ones build a Fill from a scalar value", "[graph][ops]") {
  graph g;
  auto f = ops::fill(g, {2, 3}, ops::constant(g, 7.f));
  auto z = ops::zeros(g, {784, 10});
  auto o = ops::ones(g, {4}, dtype::int32);
  REQUIRE(g.status().ok());
  CHECK(f.name() == "Fill");
  CHECK(f.producer().op == "Fill");
  CHECK(f.shape() == shape({2, 3}));
  CHECK(f.type() == dtype::float32);
  CHECK(z.name() == "zeros/Fill");
  CHECK(z.shape() == shape({784, 10}));
  CHECK(z.type() == dtype::float32);
  CHECK(g.at(z.producer().inputs[0].node_id).name == "zeros/value");
  CHECK(o.name() == "ones/Fill");
  CHECK(o.shape() == shape({4}));
  CHECK(o.type() == dtype::int32);
  auto z2 = ops::zeros(g, {1});
  CHECK(z2.name() == "zeros_1/Fill");
}

TEST_CASE("Fill with a non-scalar value is an error", "[graph][ops]") {
  graph g;
  auto v = ops::constant(g, std::vector<float>{1, 2}, {2});
  (void)ops::fill(g, {3}, v, "fill_vector");
  recorded_error(g, "fill_vector");
}

TEST_CASE("random ops carry shape, dtype and seed attributes", "[graph][ops]") {
  graph g;
  auto u = ops::random_uniform(g, {3, 4}, 0.0, 1.0, dtype::float32, 7);
  auto n = ops::random_normal(g, {5});
  auto t = ops::truncated_normal(g, {2, 2}, 0.0, 1.0, dtype::float64);
  REQUIRE(g.status().ok());
  CHECK(u.name() == "random_uniform/RandomUniform");
  CHECK(u.producer().op == "RandomUniform");
  CHECK(u.shape() == shape({3, 4}));
  CHECK(u.type() == dtype::float32);
  // An op seed without a graph seed: TensorFlow's default graph-level seed.
  CHECK(u.producer().attr_or<std::int64_t>("seed", -1) == 87654321);
  CHECK(u.producer().attr_or<std::int64_t>("seed2", -1) == 7);
  CHECK(n.name() == "random_normal/RandomStandardNormal");
  CHECK(n.shape() == shape({5}));
  // No seed at all: both zero (nondeterministic).
  CHECK(n.producer().attr_or<std::int64_t>("seed", -1) == 0);
  CHECK(n.producer().attr_or<std::int64_t>("seed2", -1) == 0);
  CHECK(t.name() == "truncated_normal/TruncatedNormal");
  CHECK(t.type() == dtype::float64);
  CHECK(t.shape() == shape({2, 2}));
}

TEST_CASE("random ops with a graph seed derive different op seeds", "[graph][ops]") {
  graph g;
  g.seed = 42;
  auto a = ops::random_normal(g, {2});
  auto b = ops::random_normal(g, {2});
  auto c = ops::random_normal(g, {2}, 0.0, 1.0, dtype::float32, 5);
  REQUIRE(g.status().ok());
  CHECK(a.producer().attr_or<std::int64_t>("seed", -1) == 42);
  CHECK(b.producer().attr_or<std::int64_t>("seed", -1) == 42);
  CHECK(a.producer().attr_or<std::int64_t>("seed2", -1) !=
        b.producer().attr_or<std::int64_t>("seed2", -1));
  CHECK(c.producer().attr_or<std::int64_t>("seed", -1) == 42);
  CHECK(c.producer().attr_or<std::int64_t>("seed2", -1) == 5);
}

TEST_CASE("random ops with a range, mean or stddev scale and shift the base op", "[graph][ops]") {
  graph g;
  auto u = ops::random_uniform(g, {3, 4}, -1.0, 1.0);
  auto n = ops::truncated_normal(g, {10}, 0.0, 0.1);
  REQUIRE(g.status().ok());
  CHECK(u.name() == "random_uniform/range/add");
  CHECK(u.shape() == shape({3, 4}));
  CHECK(g.find("random_uniform/range/mul") >= 0);
  CHECK(n.name() == "truncated_normal/scaled/mul");
  CHECK(n.shape() == shape({10}));
  CHECK(n.type() == dtype::float32);
}

TEST_CASE("random ops of an integer dtype are an error", "[graph][ops]") {
  graph g;
  (void)ops::random_uniform(g, {2}, 0.0, 1.0, dtype::int32, std::nullopt, "ints");
  recorded_error(g, "ints/RandomUniform");
}

// --- names and scopes --------------------------------------------------------------------------

TEST_CASE("every node gets a unique name: mul, mul_1, mul_2", "[graph][names]") {
  graph g;
  auto x = ops::constant(g, 2.f);
  auto m0 = x * x;
  auto m1 = x * x;
  auto m2 = x * x;
  CHECK(x.name() == "Const");
  CHECK(m0.name() == "mul");
  CHECK(m1.name() == "mul_1");
  CHECK(m2.name() == "mul_2");
  CHECK(m1.tensor_name() == "mul_1:0");
  CHECK(g.find("mul_1") == m1.node_id);
  CHECK(g.find("mul_3") == -1);
  CHECK(g.find_output("mul_2:0").node_id == m2.node_id);
  CHECK(g.find_output("mul_2").node_id == m2.node_id);
  CHECK_FALSE(g.find_output("mul_2:1").valid());
}

TEST_CASE("a name already taken with a suffix is skipped", "[graph][names]") {
  graph g;
  auto x = ops::constant(g, 2.f);
  auto explicit_name = ops::mul(x, x, "mul_1");
  auto m0 = x * x;
  auto m1 = x * x;
  CHECK(explicit_name.name() == "mul_1");
  CHECK(m0.name() == "mul");
  CHECK(m1.name() == "mul_2");
}

TEST_CASE("name scopes prefix names and a repeated scope becomes layer_1", "[graph][names]") {
  graph g;
  auto x = ops::constant(g, 2.f, "x");
  output first, second, nested, outside;
  {
    auto scope = g.name_scope("layer");
    CHECK(g.current_scope() == "layer");
    CHECK(g.scope_prefix() == "layer/");
    first = x * x;
    {
      auto inner = g.name_scope("inner");
      CHECK(g.current_scope() == "layer/inner");
      nested = x * x;
    }
  }
  CHECK(g.current_scope().empty());
  {
    auto scope = g.name_scope("layer");
    second = x * x;
  }
  outside = x * x;
  CHECK(first.name() == "layer/mul");
  CHECK(nested.name() == "layer/inner/mul");
  CHECK(second.name() == "layer_1/mul");
  CHECK(outside.name() == "mul");
}

TEST_CASE("an absolute name scope names by its full name inside any scope and restores them",
          "[graph][names]") {
  graph g;
  auto x = ops::constant(g, 2.f, "x");
  output inside, nested, at_root, after;
  {
    auto outer = g.name_scope("tower");
    {
      auto absolute = g.absolute_name_scope("layer1/w");
      CHECK(g.current_scope() == "layer1/w");
      inside = x * x;
      auto inner = g.name_scope("Initializer");
      nested = x * x;
    }
    {
      auto root = g.absolute_name_scope("");
      CHECK(g.current_scope().empty());
      at_root = x * x;
    }
    CHECK(g.current_scope() == "tower");
    after = x * x;
  }
  CHECK(inside.name() == "layer1/w/mul");
  CHECK(nested.name() == "layer1/w/Initializer/mul");
  CHECK(at_root.name() == "mul");
  CHECK(after.name() == "tower/mul");
}

// --- variables ---------------------------------------------------------------------------------

TEST_CASE("a variable is a VariableV2 with an Assign initializer and a read identity",
          "[graph][variables]") {
  graph g;
  auto w = ops::variable(g, ops::zeros(g, {784, 10}), "w");
  REQUIRE(g.status().ok());
  CHECK(w.name() == "w");
  CHECK(w.ref.producer().op == "VariableV2");
  CHECK(w.ref.shape() == shape({784, 10}));
  CHECK(w.ref.type() == dtype::float32);
  CHECK(w.ref.producer().attr_or<dtype>("dtype", dtype::boolean) == dtype::float32);
  CHECK(w.initializer.name() == "w/Assign");
  CHECK(w.initializer.producer().op == "Assign");
  CHECK(w.initializer.producer().attr_or<std::string>("colocate_with", "") == "w");
  REQUIRE(w.initializer.producer().inputs.size() == 2);
  CHECK(w.initializer.producer().inputs[0].node_id == w.ref.node_id);
  CHECK(w.read.name() == "w/read");
  CHECK(w.read.producer().op == "Identity");
  CHECK(w.read.producer().attr_or<std::string>("colocate_with", "") == "w");
  CHECK(w.read.shape() == shape({784, 10}));
  // Arithmetic on a variable uses its read output.
  output as_output = w;
  CHECK(as_output.node_id == w.read.node_id);
  REQUIRE(g.global_variables().size() == 1);
  CHECK(g.global_variables()[0].ref.node_id == w.ref.node_id);
}

TEST_CASE("a second variable with the same name becomes w_1", "[graph][variables]") {
  graph g;
  auto w = ops::variable(g, 1.f, "w");
  auto w1 = ops::variable(g, 2.f, "w");
  REQUIRE(g.status().ok());
  CHECK(w.name() == "w");
  CHECK(w1.name() == "w_1");
  CHECK(w1.initializer.name() == "w_1/Assign");
  CHECK(w1.read.name() == "w_1/read");
  // Each variable's initial value lives in its own scope.
  CHECK(g.find("w/initial_value") >= 0);
  CHECK(g.find("w_1/initial_value") >= 0);
  CHECK(g.at(w1.initializer.producer().inputs[1].node_id).name == "w_1/initial_value");
  CHECK(g.global_variables().size() == 2);
  auto x = w + w1;
  CHECK(x.shape() == tensor_shape{});
}

TEST_CASE("a variable inside a name scope is named after the scope", "[graph][variables]") {
  graph g;
  auto scope = g.name_scope("layer");
  auto b = ops::variable(g, ops::zeros(g, {10}), "b");
  CHECK(b.name() == "layer/b");
  CHECK(b.initializer.name() == "layer/b/Assign");
  CHECK(b.read.name() == "layer/b/read");
  CHECK(b.read.producer().attr_or<std::string>("colocate_with", "") == "layer/b");
}

TEST_CASE("assign ops are colocated with their variable and check the dtype",
          "[graph][variables]") {
  graph g;
  auto v = ops::variable(g, 1.f, "v");
  auto a = ops::assign_add(v, ops::constant(g, 2.f));
  auto s = ops::assign_sub(v, ops::constant(g, 1.f));
  auto r = ops::assign(v, ops::constant(g, 5.f));
  REQUIRE(g.status().ok());
  CHECK(a.producer().op == "AssignAdd");
  CHECK(s.producer().op == "AssignSub");
  CHECK(r.producer().op == "Assign");
  CHECK(r.name() == "Assign");
  for (auto& op : {a, s, r}) {
    CHECK(op.producer().attr_or<std::string>("colocate_with", "") == "v");
    CHECK(op.producer().attr_or<std::string>("variable", "") == "v");
  }
  (void)ops::assign(v, ops::constant(g, std::int32_t{1}), "wrong_type");
  auto message = recorded_error(g, "wrong_type");
  CHECK_THAT(message, Contains("int32") && Contains("float32"));
}

TEST_CASE("global_variables_initializer depends on every variable's initializer",
          "[graph][variables]") {
  graph g;
  auto a = ops::variable(g, 1.f, "a");
  auto b = ops::variable(g, ops::zeros(g, {3}), "b");
  auto c = ops::variable(g, 3.f, "c");
  auto init = ops::global_variables_initializer(g);
  REQUIRE(g.status().ok());
  CHECK(init.name() == "init");
  auto& n = init.producer();
  CHECK(n.op == "NoOp");
  CHECK(n.inputs.empty());
  CHECK(n.control_inputs.size() == 3);
  CHECK(has_control_input(n, a.initializer.node_id));
  CHECK(has_control_input(n, b.initializer.node_id));
  CHECK(has_control_input(n, c.initializer.node_id));
}

// --- control dependencies ----------------------------------------------------------------------

TEST_CASE("nodes created inside control_dependencies get the control inputs",
          "[graph][control]") {
  graph g;
  auto a = ops::constant(g, 1.f, "a");
  auto b = ops::constant(g, 2.f, "b");
  auto x = ops::constant(g, 3.f, "x");
  output inside, nested, after;
  {
    auto deps = g.control_dependencies({a});
    inside = x * x;
    {
      auto more = g.control_dependencies({b});
      nested = x + x;
    }
    after = ops::identity(x);
  }
  auto outside = ops::neg(x);
  REQUIRE(g.status().ok());
  CHECK(inside.producer().control_inputs == std::vector<int>{a.node_id});
  // Nested scopes accumulate.
  CHECK(has_control_input(nested.producer(), a.node_id));
  CHECK(has_control_input(nested.producer(), b.node_id));
  CHECK(nested.producer().control_inputs.size() == 2);
  // Leaving the inner scope drops only its dependencies.
  CHECK(after.producer().control_inputs == std::vector<int>{a.node_id});
  // Nodes outside get none, and no data edge is added by a control dependency.
  CHECK(outside.producer().control_inputs.empty());
  CHECK(inside.producer().inputs.size() == 2);
}

TEST_CASE("group makes a NoOp running after its dependencies", "[graph][control]") {
  graph g;
  auto a = ops::constant(g, 1.f);
  auto b = ops::constant(g, 2.f);
  auto grp = ops::group(g, {a, b});
  auto nop = ops::no_op(g);
  CHECK(grp.name() == "group_deps");
  CHECK(grp.producer().op == "NoOp");
  CHECK(grp.producer().control_inputs == std::vector<int>{a.node_id, b.node_id});
  CHECK(nop.name() == "NoOp");
  CHECK(nop.producer().control_inputs.empty());
  CHECK(nop.producer().output_types.empty());
  auto consumers = g.consumers();
  CHECK(consumers[static_cast<std::size_t>(a.node_id)] == std::vector<int>{grp.node_id});
}

// ConcatV2 (ops::concat): shape inference with partial shapes, the errors naming the shapes, and
// its gradient, SplitToShapesOf, built from run-time shapes.
#include "graph/gradients.hpp"
#include "graph/graph.hpp"
#include "graph/ops.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace actorflow;
using Catch::Matchers::Contains;

namespace {

tensor_shape shape(std::vector<std::int64_t> dims) { return tensor_shape{std::move(dims)}; }

output input(graph& g, tensor_shape s, dtype type = dtype::float32) {
  return ops::placeholder(g, type, std::move(s), "x");
}

/// The error concat of placeholders of `shapes` along `axis` records.
std::string concat_error(std::vector<tensor_shape> shapes, std::int64_t axis) {
  graph g;
  std::vector<output> values;
  for (auto& s : shapes)
    values.push_back(input(g, s));
  ops::concat(values, axis);
  INFO(g.status().to_string());
  REQUIRE_FALSE(g.status().ok());
  CHECK(g.status().code() == errc::invalid_argument);
  CHECK_THAT(g.status().message(), Contains("'concat'"));
  return g.status().message();
}

} // namespace

TEST_CASE("concat adds the extents along its axis and keeps the other dimensions",
          "[graph][concat]") {
  graph g;
  auto a = input(g, shape({4, 3}));
  auto b = input(g, shape({3, 3}));
  auto c = input(g, shape({2, 3}));
  auto rows = ops::concat({a, b, c}, 0);
  CHECK(rows.producer().op == "ConcatV2");
  CHECK(rows.name() == "concat");
  CHECK(rows.producer().attr_or<std::int64_t>("axis", -99) == 0);
  CHECK(rows.shape() == shape({9, 3}));
  CHECK(rows.type() == dtype::float32);

  auto d = input(g, shape({4, 5}));
  CHECK(ops::concat({a, d}, 1).shape() == shape({4, 8}));
  // A negative axis counts from the end.
  CHECK(ops::concat({a, d}, -1).shape() == shape({4, 8}));
  auto e = input(g, shape({2, 3, 4}), dtype::int64);
  auto f = input(g, shape({2, 1, 4}), dtype::int64);
  auto middle = ops::concat({e, f}, 1, "middle");
  CHECK(middle.shape() == shape({2, 4, 4}));
  CHECK(middle.type() == dtype::int64);
  REQUIRE(g.status().ok());
}

TEST_CASE("concat merges unknown dimensions and leaves an unknown extent unknown",
          "[graph][concat]") {
  graph g;
  auto a = input(g, shape({-1, 3}));
  auto b = input(g, shape({2, -1}));
  // The batch is unknown in a, so the sum along axis 0 is; axis 1 is 3 from a.
  CHECK(ops::concat({a, b}, 0).shape() == shape({-1, 3}));
  // Along axis 1: the rows merge to 2 (from b), the extent is unknown (b's).
  CHECK(ops::concat({a, b}, 1).shape() == shape({2, -1}));
  auto unknown = input(g, tensor_shape::unknown());
  CHECK(ops::concat({a, unknown}, 1).shape() == shape({-1, -1}));
  CHECK(ops::concat({unknown, unknown}, 0).shape() == tensor_shape::unknown());
  REQUIRE(g.status().ok());
}

TEST_CASE("concat of one value is an Identity, like tf.concat", "[graph][concat]") {
  graph g;
  auto a = input(g, shape({2, 3}));
  auto same = ops::concat({a}, 0);
  CHECK(same.producer().op == "Identity");
  CHECK(same.shape() == shape({2, 3}));
  CHECK_FALSE(ops::concat({}, 0).valid());
  REQUIRE(g.status().ok());
}

TEST_CASE("concat errors name the shapes that do not fit", "[graph][concat]") {
  CHECK_THAT(concat_error({shape({4, 3}), shape({3, 2})}, 0),
             Contains("[4,3]") && Contains("[3,2]") && Contains("dimension 1"));
  CHECK_THAT(concat_error({shape({4, 3}), shape({3})}, 0),
             Contains("[4,3]") && Contains("[3]") && Contains("rank"));
  CHECK_THAT(concat_error({shape({4, 3}), shape({4, 3})}, 2), Contains("axis 2 is out of range"));
  CHECK_THAT(concat_error({shape({4, 3}), shape({4, 3})}, -3), Contains("axis -3 is out of range"));
  CHECK_THAT(concat_error({tensor_shape{}, tensor_shape{}}, 0), Contains("scalars"));

  graph g;
  ops::concat({input(g, shape({2}), dtype::float32), input(g, shape({2}), dtype::float64)}, 0);
  CHECK_THAT(g.status().message(), Contains("float32") && Contains("float64"));
}

TEST_CASE("the gradient of concat splits dy by the inputs' run-time shapes", "[graph][concat]") {
  graph g;
  auto a = input(g, shape({-1, 3}), dtype::float64);
  auto b = input(g, shape({2, 3}), dtype::float64);
  auto c = ops::concat({a, b}, 0);
  auto grads = gradients(ops::reduce_sum(c), {a, b});
  INFO(g.status().to_string());
  REQUIRE(g.status().ok());
  REQUIRE(grads[0].valid());
  REQUIRE(grads[1].valid());
  auto& split = grads[0].producer();
  CHECK(split.op == "SplitToShapesOf");
  CHECK(split.name == "gradients/concat_grad/SplitToShapesOf");
  CHECK(split.attr_or<std::int64_t>("axis", -99) == 0);
  CHECK(grads[1].node_id == grads[0].node_id);
  CHECK(grads[0].index == 0);
  CHECK(grads[1].index == 1);
  CHECK(grads[0].shape() == shape({-1, 3}));
  CHECK(grads[1].shape() == shape({2, 3}));
  CHECK(grads[0].type() == dtype::float64);
  CHECK(gradient_registry::global().find("ConcatV2") != nullptr);
  CHECK(gradient_registry::global().find("SplitToShapesOf") != nullptr);
}

TEST_CASE("SplitToShapesOf fills unknown dimensions from dy and rejects shapes that cannot fit",
          "[graph][concat]") {
  graph g;
  auto dy = input(g, shape({5, 3}), dtype::float64);
  auto x0 = input(g, shape({-1, -1}), dtype::float64);
  auto x1 = input(g, tensor_shape::unknown(), dtype::float64);
  node_spec spec;
  spec.op = "SplitToShapesOf";
  spec.inputs = {dy, x0, x1};
  spec.attrs = {{"axis", std::int64_t{0}}};
  auto id = g.add_node(spec);
  REQUIRE(g.status().ok());
  CHECK(g.output_of(id, 0).shape() == shape({-1, 3}));
  CHECK(g.output_of(id, 1).shape() == tensor_shape::unknown());
  CHECK(g.at(id).output_types.size() == 2);

  spec.inputs = {dy, input(g, shape({2, 4}), dtype::float64)};
  g.add_node(spec);
  INFO(g.status().to_string());
  CHECK_THAT(g.status().message(), Contains("[5,3]") && Contains("[2,4]"));
}

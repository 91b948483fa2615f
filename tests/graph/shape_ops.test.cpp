// Shape inference and gradients of Transpose, Shape, Size and Rank (graph/shape_ops.hpp).
#include "graph/gradients.hpp"
#include "graph/graph.hpp"
#include "graph/ops.hpp"
#include "graph/shape_ops.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace actorflow;
using Catch::Matchers::Contains;

namespace {

tensor_shape shape(std::vector<std::int64_t> dims) { return tensor_shape{std::move(dims)}; }

} // namespace

TEST_CASE("Transpose permutes the static shape and reverses the axes without perm",
          "[graph][shape_ops]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, shape({2, -1, 4}), "x");
  auto moved = ops::transpose(x, {2, 0, 1});
  CHECK(moved.shape() == shape({4, 2, -1}));
  CHECK(moved.type() == dtype::float32);
  CHECK(g.at(moved.node_id).op == "Transpose");
  CHECK(g.at(moved.node_id).name == "transpose");
  CHECK(ops::transpose(x).shape() == shape({4, -1, 2}));

  auto unknown = ops::placeholder(g, dtype::int64, tensor_shape::unknown(), "u");
  // A perm fixes the rank of an input of unknown rank; the reversal does not.
  CHECK(ops::transpose(unknown, {1, 0}).shape() == shape({-1, -1}));
  CHECK_FALSE(ops::transpose(unknown).shape().rank_known());
  CHECK(ops::transpose(ops::constant(g, 3.0f)).shape() == tensor_shape{});
  CHECK(g.status().ok());
}

TEST_CASE("a Transpose perm that is not a permutation of the input's axes is an error naming "
          "the node",
          "[graph][shape_ops]") {
  struct bad_perm {
    std::vector<std::int64_t> perm;
    std::string says;
  };
  for (auto& c : std::vector<bad_perm>{{{0, 1}, "has 2 entries for an input of rank 3"},
                                       {{0, 1, 3}, "3 is out of range [0 .. 3)"},
                                       {{0, -1, 1}, "-1 is out of range [0 .. 3)"},
                                       {{0, 2, 2}, "names axis 2 twice"}}) {
    graph g;
    auto x = ops::placeholder(g, dtype::float32, shape({2, 3, 4}), "x");
    ops::transpose(x, c.perm, "t");
    INFO(g.status().to_string());
    REQUIRE_FALSE(g.status().ok());
    CHECK(g.status().code() == errc::invalid_argument);
    CHECK_THAT(g.status().message(), Contains("'t'") && Contains(c.says));
  }
}

TEST_CASE("the inverse of a permutation undoes it", "[graph][shape_ops]") {
  CHECK(inverse_permutation({2, 0, 1}) == std::vector<std::int64_t>{1, 2, 0});
  CHECK(inverse_permutation({0, 1}) == std::vector<std::int64_t>{0, 1});
  CHECK(inverse_permutation({}).empty());
  auto reversed = transpose_permutation({}, 4);
  REQUIRE(reversed.ok());
  CHECK(*reversed == std::vector<int>{3, 2, 1, 0});
}

TEST_CASE("Shape, Size and Rank give int32 by default and Shape's length is the rank",
          "[graph][shape_ops]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float64, shape({-1, 3}), "x");
  auto dims = ops::shape(x);
  CHECK(dims.type() == dtype::int32);
  CHECK(dims.shape() == shape({2}));
  CHECK(g.at(dims.node_id).name == "Shape");
  CHECK(ops::shape(x, dtype::int64).type() == dtype::int64);
  CHECK(ops::size(x).shape() == tensor_shape{});
  CHECK(ops::size(x, dtype::int64).type() == dtype::int64);
  CHECK(ops::rank(x).type() == dtype::int32);
  CHECK(ops::rank(x).shape() == tensor_shape{});
  auto unknown = ops::placeholder(g, dtype::boolean, tensor_shape::unknown(), "u");
  CHECK(ops::shape(unknown).shape() == shape({-1}));
  CHECK(g.status().ok());

  ops::shape(x, dtype::float32, "bad");
  REQUIRE_FALSE(g.status().ok());
  CHECK_THAT(g.status().message(), Contains("'bad'") && Contains("out_type must be int32 or int64"));
}

TEST_CASE("Transpose's gradient transposes by the inverse permutation and Shape stops gradients",
          "[graph][shape_ops]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float64, shape({2, 3, 4}), "x");
  auto y = ops::reduce_sum(ops::transpose(x, {1, 2, 0}));
  auto dx = gradients(y, {x});
  REQUIRE(g.status().ok());
  REQUIRE(dx[0].valid());
  CHECK(dx[0].shape() == shape({2, 3, 4}));
  auto& grad = g.at(dx[0].node_id);
  CHECK(grad.op == "Transpose");
  CHECK(grad.attr_or<std::vector<std::int64_t>>("perm", {}) == std::vector<std::int64_t>{2, 0, 1});

  // Differentiating a Shape, Size or Rank is no error: nothing flows through them.
  for (auto y_of_shape : {ops::shape(x), ops::size(x), ops::rank(x)}) {
    auto none = gradients(y_of_shape, {x});
    INFO(g.status().to_string());
    CHECK(g.status().ok());
    CHECK_FALSE(none[0].valid());
  }
}

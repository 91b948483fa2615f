// StridedSlice's shape inference on partial shapes, its errors, its gradient's graph
// (graph/strided_slice.hpp), and a graph that drops the nodes of a failed build
// (graph::discard_failed_nodes, which Python's ops rely on).
#include "graph/control_flow.hpp"
#include "graph/gradients.hpp"
#include "graph/graph.hpp"
#include "graph/ops.hpp"
#include "graph/strided_slice.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace actorflow;
using Catch::Matchers::Contains;

namespace {

tensor_shape shape(std::vector<std::int64_t> dims) { return tensor_shape{std::move(dims)}; }

/// x[..., new, index] style specs: the entries as (begin, end, stride) and the masks.
strided_slice_spec spec(std::vector<std::int64_t> begin, std::vector<std::int64_t> end,
                        std::vector<std::int64_t> strides, std::int64_t begin_mask = 0,
                        std::int64_t end_mask = 0, std::int64_t ellipsis_mask = 0,
                        std::int64_t new_axis_mask = 0, std::int64_t shrink_axis_mask = 0) {
  return strided_slice_spec{std::move(begin), std::move(end), std::move(strides), begin_mask,
                            end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask};
}

} // namespace

TEST_CASE("StridedSlice infers numpy's shapes, unknown where a sliced size is unknown",
          "[graph][strided_slice]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, shape({8, -1, 5}), "x");
  // x[2:7:2]: 3 of 8 rows; the other axes whole.
  CHECK(ops::strided_slice(x, {2}, {7}, {2}).shape() == shape({3, -1, 5}));
  // x[-1, :, ::-2]: the first axis goes, the unknown one stays unknown, 3 of 5 backwards.
  CHECK(ops::strided_slice(x, spec({-1, 0, 0}, {0, 0, 0}, {1, 1, -2}, 6, 6, 0, 0, 1)).shape() ==
        shape({-1, 3}));
  // x[..., None, 1]: an ellipsis over two axes, a new axis, the last taken at 1.
  CHECK(ops::strided_slice(x, spec({0, 0, 1}, {0, 0, 2}, {1, 1, 1}, 0, 0, 1, 2, 4)).shape() ==
        shape({8, -1, 1}));
  // Bounds past the ends clamp; a reversed range is empty.
  CHECK(ops::strided_slice(x, {-100}, {100}).shape() == shape({8, -1, 5}));
  CHECK(ops::strided_slice(x, {6}, {2}).shape() == shape({0, -1, 5}));
  // An index into an unknown dimension is checked when the step runs.
  CHECK(ops::strided_slice(x, spec({0, 9}, {0, 10}, {1, 1}, 1, 1, 0, 0, 2)).shape() == shape({8, 5}));
  auto unknown = ops::placeholder(g, dtype::int32, tensor_shape::unknown(), "u");
  auto of_unknown = ops::strided_slice(unknown, {1}, {2});
  CHECK_FALSE(of_unknown.shape().rank_known());
  CHECK(of_unknown.type() == dtype::int32);
  CHECK(g.at(of_unknown.node_id).op == "StridedSlice");
  CHECK(g.status().ok());
}

TEST_CASE("StridedSlice errors name the node, the entry and the input shape", "[graph][strided_slice]") {
  auto expect_error = [](const strided_slice_spec& s, const std::string& text) {
    graph g;
    auto x = ops::placeholder(g, dtype::float32, shape({3, 4}), "x");
    ops::strided_slice(x, s, "pick");
    REQUIRE_FALSE(g.status().ok());
    CHECK(g.status().code() == errc::invalid_argument);
    CHECK_THAT(g.status().message(), Contains("StridedSlice 'pick'") && Contains(text));
  };
  expect_error(spec({0, 5}, {0, 6}, {1, 1}, 0, 0, 0, 0, 2),
               "entry 1 (dimension 1 of input shape [3,4]): index 5 is out of bounds");
  expect_error(spec({-4}, {-3}, {1}, 0, 0, 0, 0, 1), "index -4 is out of bounds");
  expect_error(spec({0}, {2}, {0}), "entry 0 (dimension 0 of input shape [3,4]) has stride 0");
  expect_error(spec({0, 0}, {0, 0}, {1, 1}, 0, 0, 3), "at most one ellipsis");
  expect_error(spec({0, 0, 0}, {1, 1, 1}, {1, 1, 1}), "3 indices for input shape [3,4] of rank 2");
  expect_error(spec({0, 0}, {1}, {1, 1}), "must have one length");
}

TEST_CASE("StridedSlice's gradient is StridedSliceGrad of x's shape, and its gradient a slice",
          "[graph][strided_slice]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, shape({-1, 6}), "x");
  auto y = ops::strided_slice(x, spec({1, 0}, {0, 5}, {2, 1}, 0, 0, 0, 0, 0));
  auto dx = gradients(ops::reduce_sum(y), {x});
  REQUIRE(dx.size() == 1);
  REQUIRE(g.status().ok());
  auto& grad = g.at(dx[0].node_id);
  CHECK(grad.op == "StridedSliceGrad");
  CHECK(dx[0].shape() == shape({-1, 6}));
  CHECK(strided_slice_spec::of(grad).strides == std::vector<std::int64_t>{2, 1});
  // The gradient of the gradient with respect to its dy slices again.
  auto dy = g.output_of(grad.inputs[1].node_id, grad.inputs[1].index);
  auto ddy = gradients(ops::reduce_sum(dx[0] * dx[0]), {dy});
  REQUIRE(g.status().ok());
  REQUIRE(ddy[0].valid());
  CHECK(ddy[0].shape() == y.shape());
  auto bad = ops::strided_slice_grad(x, ops::placeholder(g, dtype::float32, shape({2, 2}), "dy"),
                                     spec({0}, {1}, {1}), "bad_grad");
  REQUIRE_FALSE(g.status().ok());
  CHECK_THAT(g.status().message(), Contains("StridedSliceGrad 'bad_grad': dy has shape [2,2] but the "
                                            "slice of [?,6] has shape [?,6]"));
  (void)bad;
}

TEST_CASE("a graph drops the nodes of a failed build and stays usable", "[graph][strided_slice]") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, shape({3, 4}), "x");
  auto before = g.size();
  auto bad = ops::strided_slice(x, spec({5}, {6}, {1}, 0, 0, 0, 0, 1), "bad");
  // What was built on the failed node goes with it.
  ops::neg(bad, "uses_bad");
  REQUIRE_FALSE(g.status().ok());
  REQUIRE(g.discard_failed_nodes());
  CHECK(g.status().ok());
  CHECK(g.size() == before);
  CHECK(g.find("bad") < 0);
  CHECK(g.find("uses_bad") < 0);
  auto good = ops::strided_slice(x, {1}, {2}, {}, "good");
  CHECK(good.shape() == shape({1, 4}));
  CHECK(g.status().ok());
  CHECK(g.discard_failed_nodes());  // nothing to discard

  // A failure inside a while loop's body cannot be undone: the context holds its nodes.
  ops::while_loop([](const std::vector<output>& v) { return ops::less(v[0], 3.0); },
                  [](const std::vector<output>& v) {
                    return std::vector<output>{ops::strided_slice(v[0], {0}, {1})};
                  },
                  {ops::constant(g, 0.0f)});
  REQUIRE_FALSE(g.status().ok());
  CHECK_FALSE(g.discard_failed_nodes());
  CHECK_FALSE(g.status().ok());
}

#pragma once
/// Shared by the serialization tests: a sample graph that uses every attr kind and the usual
/// building features, and a node-by-node comparison of two graphs.
///   graph g; build_sample_graph(g);
///   graph h; REQUIRE(deserialize_graph(bytes.data(), bytes.size(), h).ok());
///   require_same_graph(g, h);

#include "graph/graph.hpp"
#include "graph/ops.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace actorflow::test {

/// Constants of every dtype, placeholders with partial and unknown shapes, variables with
/// initializers, matmuls with transpose attrs, reductions with axes, a two-output op, name and
/// device scopes, control dependencies, a graph seed, an assigned device, an empty tensor attr
/// and a text attr with an embedded NUL.
inline void build_sample_graph(graph& g) {
  g.seed = 1234;
  auto f32 = ops::constant(
    g, tensor::from_vector<float>({1.5f, -2.f, 3.25f, 0.f, 1e-30f, -0.f}, {2, 3}), "f32");
  auto f64 = ops::constant(g, 2.5, "f64");
  auto i32 = ops::constant(g, tensor::from_vector<std::int32_t>({-7, 0, 2147483647}), "i32");
  auto i64 = ops::constant(g, std::int64_t{1} << 40, "i64");
  auto flags = ops::constant(g, tensor::from_vector<bool>({true, false, true, true}, {2, 2}), "flags");
  auto x = ops::placeholder(g, dtype::float32, {-1, 3}, "x");
  ops::placeholder(g, dtype::int64, tensor_shape::unknown(), "anything");
  output v_read;
  {
    auto scope = g.name_scope("layer");
    auto device = g.device("/job:worker/task:1/device:CPU:0");
    auto w = ops::variable(g, ops::zeros(g, {3, 4}), "w");
    auto y = ops::matmul(x, w);
    auto z = ops::matmul(y, w, false, true, "back");
    ops::reduce_sum(z, {1}, true);
    ops::reduce_mean(z, {-1, 0});
    ops::reduce_max(y, {});
  }
  {
    auto device = g.device("/gpu:0");
    auto v = ops::variable(g, 3.f, "v");
    v_read = v * 4.0;
  }
  {
    auto deps = g.control_dependencies({v_read, flags});
    ops::no_op(g, "after");
  }
  auto xent = ops::softmax_cross_entropy_with_logits(f32, f32);
  ops::identity(g.output_of(xent.node_id, 1), "backprop");
  ops::cast(i32, dtype::float64);
  ops::argmax(f32, 1);
  ops::reshape(f32, {3, -1});
  ops::equal(i64, i64);
  ops::random_uniform(g, {2, 2}, 0.0, 1.0, dtype::float32, 7);
  ops::add(f64, f64);
  ops::global_variables_initializer(g);
  g.at(0).assigned_device = "/job:localhost/replica:0/task:0/device:CPU:0";
  g.at(1).attrs["empty_tensor"] = tensor{dtype::int32, tensor_shape{2, -1}, std::shared_ptr<buffer>{}};
  g.at(1).attrs["note"] = std::string{"text with a \0 inside", 20};
  g.at(1).attrs["ratio"] = 0.125;
  g.at(1).attrs["count"] = std::int64_t{-3};
}

inline bool same_tensor(const tensor& a, const tensor& b) {
  if (a.is_initialized() != b.is_initialized() || a.type() != b.type() || a.shape() != b.shape())
    return false;
  if (!a.is_initialized())
    return true;
  return a.bytes() == b.bytes() && std::memcmp(a.raw_data(), b.raw_data(), a.bytes()) == 0;
}

inline bool same_attr(const attr_value& a, const attr_value& b) {
  if (a.index() != b.index())
    return false;
  return std::visit(
    [&](const auto& x) {
      using T = std::decay_t<decltype(x)>;
      const auto& y = std::get<T>(b);
      if constexpr (std::is_same_v<T, tensor>)
        return same_tensor(x, y);
      else if constexpr (std::is_same_v<T, double>)
        return std::memcmp(&x, &y, sizeof x) == 0; // bit-exact, NaN included
      else
        return x == y;
    },
    a);
}

/// Checks that `b` has the same nodes (in id order), variables and seed as `a`.
inline void require_same_graph(const graph& a, const graph& b) {
  REQUIRE(a.size() == b.size());
  for (int i = 0; i < static_cast<int>(a.size()); ++i) {
    auto& x = a.at(i);
    auto& y = b.at(i);
    INFO("node " << i << " '" << x.name << "'");
    CHECK(y.id == i);
    CHECK(x.name == y.name);
    CHECK(x.op == y.op);
    CHECK(x.inputs == y.inputs);
    CHECK(x.control_inputs == y.control_inputs);
    CHECK(x.requested_device == y.requested_device);
    CHECK(x.assigned_device == y.assigned_device);
    CHECK(x.output_types == y.output_types);
    CHECK(x.output_shapes == y.output_shapes);
    CHECK(x.kernel_type == y.kernel_type);
    REQUIRE(x.attrs.size() == y.attrs.size());
    for (auto& [key, value] : x.attrs) {
      INFO("attr '" << key << "'");
      REQUIRE(y.attrs.count(key) == 1);
      CHECK(same_attr(value, y.attrs.at(key)));
    }
    CHECK(b.find(x.name) == i);
  }
  REQUIRE(a.global_variables().size() == b.global_variables().size());
  for (std::size_t i = 0; i < a.global_variables().size(); ++i) {
    auto& v = a.global_variables()[i];
    auto& w = b.global_variables()[i];
    CHECK(w.ref.owner == &b);
    for (auto [p, q] : {std::pair{v.ref, w.ref}, std::pair{v.read, w.read},
                        std::pair{v.initializer, w.initializer}}) {
      CHECK(p.valid() == q.valid());
      CHECK(p.node_id == q.node_id);
      CHECK(p.index == q.index);
    }
  }
  CHECK(a.seed == b.seed);
}

} // namespace actorflow::test

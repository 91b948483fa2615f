// Numpy broadcasting as the GPU's elementwise kernels compute it (devices/cuda/
// broadcast_index.hpp): the same index arithmetic the kernels run, checked on the CPU against
// the definition, element by element, for random shapes.
#include "devices/cuda/broadcast_index.hpp"

#include <catch2/catch.hpp>

#include <random>
#include <vector>

using namespace actorflow;
using namespace actorflow::cuda;

namespace {

/// Offset in a tensor of `shape` of the output element at `coordinates` (the output's rank),
/// by the definition: trailing dimensions align, size-1 dimensions repeat.
std::int64_t broadcast_offset(const tensor_shape& shape, const std::vector<std::int64_t>& coordinates) {
  auto lead = static_cast<int>(coordinates.size()) - shape.rank();
  std::int64_t offset = 0;
  for (int i = 0; i < shape.rank(); ++i) {
    auto d = shape.dim(i);
    offset = offset * d + (d == 1 ? 0 : coordinates[static_cast<std::size_t>(i + lead)]);
  }
  return offset;
}

/// Every output element's operand offsets, by the definition and by operand_offsets.
void require_offsets_match(const tensor_shape& a, const tensor_shape& b) {
  INFO("shapes " << a.to_string() << " and " << b.to_string());
  auto out = broadcast_shapes(a, b);
  REQUIRE(out.ok());
  auto s = make_broadcast_strides(a, b);
  REQUIRE(s.ok());
  REQUIRE(s->count == out->num_elements());
  std::vector<std::int64_t> coordinates(static_cast<std::size_t>(out->rank()), 0);
  for (std::int64_t i = 0; i < out->num_elements(); ++i) {
    std::int64_t ia = -1;
    std::int64_t ib = -1;
    operand_offsets(*s, i, ia, ib);
    INFO("output element " << i);
    REQUIRE(ia == broadcast_offset(a, coordinates));
    REQUIRE(ib == broadcast_offset(b, coordinates));
    for (auto d = out->rank() - 1; d >= 0; --d) {
      auto& c = coordinates[static_cast<std::size_t>(d)];
      if (++c < out->dim(d))
        break;
      c = 0;
    }
  }
}

} // namespace

TEST_CASE("broadcast operand offsets agree with numpy broadcasting for random shapes",
          "[cuda][broadcast]") {
  std::uint32_t seed = 4242;
  INFO("seed " << seed);
  std::mt19937 engine{seed};
  std::uniform_int_distribution<int> rank{0, 5};
  std::uniform_int_distribution<std::int64_t> dim{1, 3};
  std::bernoulli_distribution broadcast{0.35};
  for (int trial = 0; trial < 300; ++trial) {
    auto out_rank = rank(engine);
    std::vector<std::int64_t> out_dims;
    for (int i = 0; i < out_rank; ++i)
      out_dims.push_back(dim(engine));
    // Each operand: a suffix of the output's dimensions, some of them replaced by 1.
    auto operand = [&] {
      std::uniform_int_distribution<int> drop{0, out_rank};
      std::vector<std::int64_t> dims(out_dims.begin() + drop(engine), out_dims.end());
      for (auto& d : dims)
        if (broadcast(engine))
          d = 1;
      return tensor_shape{dims};
    };
    require_offsets_match(operand(), operand());
  }
}

TEST_CASE("broadcasting merges dimensions that broadcast alike", "[cuda][broadcast]") {
  // A bias row over a batch: two merged dimensions, the bias repeating along the first.
  auto bias = make_broadcast_strides(tensor_shape{4, 3, 5}, tensor_shape{5});
  REQUIRE(bias.ok());
  CHECK(bias->rank == 2);
  CHECK(bias->dims[0] == 12);
  CHECK(bias->dims[1] == 5);
  CHECK(bias->a_strides[1] == 1);
  CHECK(bias->b_strides[0] == 0);
  // Same shapes: one flat dimension.
  auto same = make_broadcast_strides(tensor_shape{2, 3, 4}, tensor_shape{2, 3, 4});
  REQUIRE(same.ok());
  CHECK(same->rank == 1);
  CHECK(same->count == 24);
  // Scalars: nothing to index.
  auto scalar = make_broadcast_strides(tensor_shape{}, tensor_shape{});
  REQUIRE(scalar.ok());
  CHECK(scalar->count == 1);
  require_offsets_match(tensor_shape{3, 1}, tensor_shape{1, 4});
  require_offsets_match(tensor_shape{}, tensor_shape{2, 3});
  require_offsets_match(tensor_shape{2, 0, 3}, tensor_shape{3});
}

TEST_CASE("shapes that do not broadcast are refused with both shapes named", "[cuda][broadcast]") {
  auto s = make_broadcast_strides(tensor_shape{2, 3}, tensor_shape{4});
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code() == errc::invalid_argument);
  CHECK(s.error().message().find("[2,3]") != std::string::npos);
  CHECK(s.error().message().find("[4]") != std::string::npos);
}

TEST_CASE("broadcasts needing more merged dimensions than the kernels take are refused",
          "[cuda][broadcast]") {
  // Alternating broadcasts cannot merge: 18 dimensions stay 18.
  std::vector<std::int64_t> a;
  std::vector<std::int64_t> b;
  for (int i = 0; i < 18; ++i) {
    a.push_back(i % 2 == 0 ? 2 : 1);
    b.push_back(i % 2 == 0 ? 1 : 2);
  }
  auto s = make_broadcast_strides(tensor_shape{a}, tensor_shape{b});
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code() == errc::invalid_argument);
  CHECK(s.error().message().find("merged dimensions") != std::string::npos);
}

// Reductions over any axes as the GPU's kernels index them (devices/cuda/reduction_plan.hpp):
// the same offset arithmetic the kernels run, checked on the CPU against a direct reduction for
// random shapes and axes.
#include "devices/cuda/reduction_plan.hpp"

#include <catch2/catch.hpp>

#include <random>
#include <vector>

using namespace actorflow;
using namespace actorflow::cuda;

namespace {

/// Sums of x (x[i] = i + 1) over the `reduced` dimensions, in output order, by the definition.
std::vector<std::int64_t> direct_sums(const tensor_shape& shape, const std::vector<bool>& reduced) {
  std::int64_t outputs = 1;
  for (int i = 0; i < shape.rank(); ++i)
    if (!reduced[static_cast<std::size_t>(i)])
      outputs *= shape.dim(i);
  std::vector<std::int64_t> sums(static_cast<std::size_t>(outputs), 0);
  std::vector<std::int64_t> coordinates(static_cast<std::size_t>(shape.rank()), 0);
  for (std::int64_t i = 0; i < shape.num_elements(); ++i) {
    std::int64_t o = 0;
    for (int d = 0; d < shape.rank(); ++d)
      if (!reduced[static_cast<std::size_t>(d)])
        o = o * shape.dim(d) + coordinates[static_cast<std::size_t>(d)];
    sums[static_cast<std::size_t>(o)] += i + 1;
    for (auto d = shape.rank() - 1; d >= 0; --d) {
      auto& c = coordinates[static_cast<std::size_t>(d)];
      if (++c < shape.dim(d))
        break;
      c = 0;
    }
  }
  return sums;
}

/// The same sums through the plan, as the kernels walk it.
std::vector<std::int64_t> planned_sums(const reduction_plan& p) {
  std::vector<std::int64_t> sums;
  for (std::int64_t o = 0; o < p.out_count; ++o) {
    std::int64_t sum = 0;
    auto base = output_base(p, o);
    for (std::int64_t r = 0; r < p.reduced_count; ++r)
      sum += base + reduced_offset(p, r) + 1;
    sums.push_back(sum);
  }
  return sums;
}

} // namespace

TEST_CASE("reduction plans visit exactly the elements of each output for random shapes and axes",
          "[cuda][reduction]") {
  std::uint32_t seed = 777;
  INFO("seed " << seed);
  std::mt19937 engine{seed};
  std::uniform_int_distribution<int> rank{0, 5};
  std::uniform_int_distribution<std::int64_t> dim{1, 4};
  std::bernoulli_distribution pick{0.5};
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::int64_t> dims;
    std::vector<bool> reduced;
    auto r = rank(engine);
    for (int i = 0; i < r; ++i) {
      dims.push_back(dim(engine));
      reduced.push_back(pick(engine));
    }
    tensor_shape shape{dims};
    INFO("shape " << shape.to_string() << ", trial " << trial);
    auto plan = make_reduction_plan(shape, reduced);
    REQUIRE(plan.ok());
    CHECK(plan->out_count * plan->reduced_count == shape.num_elements());
    CHECK(planned_sums(*plan) == direct_sums(shape, reduced));
  }
}

TEST_CASE("reduction plans merge neighbouring axes of a kind and say whether the inner one is kept",
          "[cuda][reduction]") {
  // Mean over the batch of [batch, features]: outputs read neighbouring memory.
  auto columns = make_reduction_plan(tensor_shape{64, 10}, {true, false});
  REQUIRE(columns.ok());
  CHECK(columns->inner_kept);
  CHECK(columns->kept_rank == 1);
  CHECK(columns->reduced_rank == 1);
  CHECK(columns->reduced_strides[0] == 10);
  // Sum over the last two axes: one reduced group of 12 contiguous elements.
  auto rows = make_reduction_plan(tensor_shape{5, 3, 4}, {false, true, true});
  REQUIRE(rows.ok());
  CHECK_FALSE(rows->inner_kept);
  CHECK(rows->reduced_rank == 1);
  CHECK(rows->reduced_dims[0] == 12);
  CHECK(rows->reduced_strides[0] == 1);
  CHECK(rows->kept_strides[0] == 12);
  // Only size-1 axes reduced: every output is one element.
  auto none = make_reduction_plan(tensor_shape{3, 1}, {false, true});
  REQUIRE(none.ok());
  CHECK(none->reduced_count == 1);
  CHECK(none->out_count == 3);
  // Everything reduced: one output.
  auto all = make_reduction_plan(tensor_shape{2, 3}, {true, true});
  REQUIRE(all.ok());
  CHECK(all->out_count == 1);
  CHECK(all->reduced_count == 6);
}

TEST_CASE("reductions alternating axes more often than the kernels take are refused",
          "[cuda][reduction]") {
  std::vector<std::int64_t> dims(18, 2);
  std::vector<bool> reduced;
  for (int i = 0; i < 18; ++i)
    reduced.push_back(i % 2 == 0);
  auto plan = make_reduction_plan(tensor_shape{dims}, reduced);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.error().code() == errc::invalid_argument);
}

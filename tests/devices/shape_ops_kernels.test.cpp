// Transpose against an index-by-index reference, and Shape, Size and Rank (graph/shape_ops.hpp).
// Tagged [kernels]: they run on the CPU, on the test device, and on a GPU where there is one.
#include "support/kernel_test_util.hpp"

#include "devices/strided_layout.hpp"

#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

using namespace actorflow;
using namespace actorflow::testing;

namespace {

node transpose_node(dtype type, std::vector<std::int64_t> perm) {
  return make_node("Transpose", "t", type, {{"perm", std::move(perm)}});
}

/// x [dims] transposed by perm, element by element: out[j0, ..., jk] = x[i] where i's axis
/// perm[a] is j_a. Values as doubles (every test value is a small integer, exact in each dtype).
std::vector<double> reference_transpose(const std::vector<double>& x, const std::vector<std::int64_t>& dims,
                                        const std::vector<std::int64_t>& perm) {
  auto rank = dims.size();
  std::vector<std::int64_t> in_strides(rank, 1);
  for (auto k = rank; k-- > 1;)
    in_strides[k - 1] = in_strides[k] * dims[k];
  std::vector<std::int64_t> out_dims(rank);
  for (std::size_t a = 0; a < rank; ++a)
    out_dims[a] = dims[static_cast<std::size_t>(perm[a])];
  std::vector<double> out(x.size());
  for (std::size_t flat = 0; flat < out.size(); ++flat) {
    auto rest = static_cast<std::int64_t>(flat);
    std::int64_t source = 0;
    for (auto a = rank; a-- > 0;) {
      auto j = rest % out_dims[a];
      rest /= out_dims[a];
      source += j * in_strides[static_cast<std::size_t>(perm[a])];
    }
    out[flat] = x[static_cast<std::size_t>(source)];
  }
  return out;
}

/// 0, 1, 2, ... as a tensor of `type` (bool: alternating).
tensor counting(dtype type, const std::vector<std::int64_t>& dims) {
  tensor t{type, tensor_shape{dims}};
  visit_dtype(type, [&](auto zero) {
    using T = decltype(zero);
    for (std::int64_t i = 0; i < t.num_elements(); ++i)
      t.data<T>()[i] = static_cast<T>(std::is_same<T, bool>::value ? i % 3 == 1 : i);
    return 0;
  });
  return t;
}

tensor_shape permuted(const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& perm) {
  std::vector<std::int64_t> out;
  for (auto p : perm)
    out.push_back(dims[static_cast<std::size_t>(p)]);
  return tensor_shape{out};
}

} // namespace

TEST_CASE("Transpose matches an index-by-index reference for every dtype, rank and permutation",
          "[kernels][transpose]") {
  kernel_test_env env;
  struct transpose_case {
    std::vector<std::int64_t> dims;
    std::vector<std::int64_t> perm;
  };
  std::vector<transpose_case> cases{
    {{3, 4}, {1, 0}},          {{2, 3, 4}, {2, 0, 1}},    {{2, 3, 4}, {1, 2, 0}},
    {{2, 3, 4}, {0, 2, 1}},    {{2, 3, 4}, {2, 1, 0}},    {{2, 1, 3, 1}, {3, 2, 0, 1}},
    {{2, 3, 2, 5}, {0, 3, 1, 2}}, {{5}, {0}},             {{0, 3}, {1, 0}},
    {{2, 2, 3, 2, 2}, {4, 1, 0, 3, 2}},
    // Beyond one 32 x 32 tile of the tiled path, and not multiples of it.
    {{70, 45}, {1, 0}},        {{3, 37, 50}, {0, 2, 1}},  {{33, 2, 65}, {2, 1, 0}},
  };
  for (auto type : all_dtypes())
    for (auto& c : cases) {
      INFO(to_string(type) << " " << tensor_shape{c.dims}.to_string() << " by perm "
                           << tensor_shape{c.perm}.to_string());
      auto x = counting(type, c.dims);
      auto out = env.run_ok(transpose_node(type, c.perm), {x});
      CHECK(out.type() == type);
      require_near(out, permuted(c.dims, c.perm), reference_transpose(as_doubles(x), c.dims, c.perm), 0.0);
    }
}

TEST_CASE("Transpose without perm reverses the axes and of a scalar is the scalar",
          "[kernels][transpose]") {
  kernel_test_env env;
  auto x = counting(dtype::float32, {2, 3, 4});
  auto out = env.run_ok(transpose_node(dtype::float32, {}), {x});
  require_near(out, tensor_shape{4, 3, 2}, reference_transpose(as_doubles(x), {2, 3, 4}, {2, 1, 0}), 0.0);
  auto scalar = env.run_ok(transpose_node(dtype::int32, {}), {tensor::scalar(std::int32_t{7})});
  require_near(scalar, tensor_shape{}, {7}, 0.0);
}

TEST_CASE("Transpose of large tensors is exact on the parallel path", "[kernels][transpose]") {
  kernel_test_env env;
  // 2^18 elements: above the parallel threshold, so blocks start mid-row.
  std::vector<std::int64_t> dims{64, 32, 128};
  auto x = counting(dtype::float64, dims);
  for (auto perm : std::vector<std::vector<std::int64_t>>{{2, 0, 1}, {1, 0, 2}, {0, 2, 1}}) {
    INFO("perm " << tensor_shape{perm}.to_string());
    auto out = env.run_ok(transpose_node(dtype::float64, perm), {x});
    require_near(out, permuted(dims, perm), reference_transpose(as_doubles(x), dims, perm), 0.0);
  }
}

TEST_CASE("a Transpose that moves only axes of extent 1 shares its input's buffer",
          "[kernels][transpose]") {
  kernel_test_env env;
  auto x = counting(dtype::float32, {1, 6, 1});
  auto out = env.run_ok(transpose_node(dtype::float32, {2, 1, 0}), {x});
  CHECK(out.shape() == tensor_shape{1, 6, 1});
  CHECK(env.last_output_forwards_input(0, 0));
  auto row = env.run_ok(transpose_node(dtype::float32, {1, 0}), {counting(dtype::float32, {5, 1})});
  CHECK(row.shape() == tensor_shape{1, 5});
  CHECK(env.last_output_forwards_input(0, 0));
  require_near(row, tensor_shape{1, 5}, {0, 1, 2, 3, 4}, 0.0);
}

TEST_CASE("a Transpose perm that does not fit the run-time rank fails naming the perm",
          "[kernels][transpose]") {
  kernel_test_env env;
  auto r = env.run(transpose_node(dtype::float32, {1, 0}), {counting(dtype::float32, {2, 3, 4})});
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.code() == errc::invalid_argument);
  CHECK_THAT(r.status.message(), Catch::Contains("perm [1,0] has 2 entries for an input of rank 3"));
}

TEST_CASE("transpose layouts merge the axes that stay together", "[devices][transpose]") {
  auto layout = make_transpose_layout(tensor_shape{2, 3, 4, 5}, {0, 2, 3, 1});
  REQUIRE(layout.ok());
  CHECK(layout->out_shape == tensor_shape{2, 4, 5, 3});
  // Axes 2 and 3 stay adjacent: [2, 20, 3] at strides [60, 1, 20].
  CHECK(layout->extents == std::vector<std::int64_t>{2, 20, 3});
  CHECK(layout->in_strides == std::vector<std::int64_t>{60, 1, 20});
  CHECK_FALSE(layout->moves_nothing());
  auto identity = make_transpose_layout(tensor_shape{2, 3}, {0, 1});
  REQUIRE(identity.ok());
  CHECK(identity->moves_nothing());
  auto bad = make_transpose_layout(tensor_shape{2, 3}, {0, 0});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message(), Catch::Contains("names axis 0 twice"));
}

TEST_CASE("Shape, Size and Rank read the run-time shape for every dtype", "[kernels][shape_of]") {
  kernel_test_env env;
  for (auto type : all_dtypes()) {
    INFO(to_string(type));
    auto x = counting(type, {2, 0, 3});
    auto dims = env.run_ok(make_node("Shape", "s", type, {{"out_type", dtype::int32}}, {dtype::int32}), {x});
    CHECK(dims.type() == dtype::int32);
    require_near(dims, tensor_shape{3}, {2, 0, 3}, 0.0);
    auto wide = env.run_ok(make_node("Shape", "s64", type, {{"out_type", dtype::int64}}, {dtype::int64}), {x});
    CHECK(wide.type() == dtype::int64);
    require_near(wide, tensor_shape{3}, {2, 0, 3}, 0.0);

    auto y = counting(type, {4, 5});
    auto count = env.run_ok(make_node("Size", "n", type, {{"out_type", dtype::int32}}, {dtype::int32}), {y});
    require_near(count, tensor_shape{}, {20}, 0.0);
    auto rank = env.run_ok(make_node("Rank", "r", type, {}, {dtype::int32}), {y});
    CHECK(rank.type() == dtype::int32);
    require_near(rank, tensor_shape{}, {2}, 0.0);
    auto scalar = counting(type, {});
    require_near(env.run_ok(make_node("Shape", "s0", type, {}, {dtype::int32}), {scalar}),
                 tensor_shape{0}, {}, 0.0);
    require_near(env.run_ok(make_node("Size", "n0", type, {}, {dtype::int32}), {scalar}),
                 tensor_shape{}, {1}, 0.0);
  }
}

TEST_CASE("Shape refuses an out_type other than int32 and int64", "[kernels][shape_of]") {
  kernel_test_env env;
  auto made = kernel_registry::global().create(
    make_node("Shape", "s", dtype::float32, {{"out_type", dtype::float32}}), env.dev().type());
  REQUIRE_FALSE(made.ok());
  CHECK_THAT(made.error().message(), Catch::Contains("'s'") && Catch::Contains("out_type must be int32 or int64"));
}

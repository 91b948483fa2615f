// MatMul with every transpose combination against a naive float64 product.
#include "support/kernel_test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

constexpr std::uint32_t seed = 4242;

/// op(a) op(b) in float64, where op transposes when asked.
std::vector<double> naive_matmul(const tensor& a, const tensor& b, bool ta, bool tb) {
  auto va = as_doubles(a);
  auto vb = as_doubles(b);
  auto ar = a.shape().dim(0), ac = a.shape().dim(1);
  auto br = b.shape().dim(0), bc = b.shape().dim(1);
  auto m = ta ? ac : ar, k = ta ? ar : ac, n = tb ? br : bc;
  auto at = [&](std::int64_t i, std::int64_t j) { return ta ? va[j * ac + i] : va[i * ac + j]; };
  auto bt = [&](std::int64_t i, std::int64_t j) { return tb ? vb[j * bc + i] : vb[i * bc + j]; };
  std::vector<double> c(static_cast<std::size_t>(m * n), 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t p = 0; p < k; ++p)
        s += at(i, p) * bt(p, j);
      c[static_cast<std::size_t>(i * n + j)] = s;
    }
  return c;
}

template <class T>
void check_matmul(std::int64_t m, std::int64_t k, std::int64_t n, bool ta, bool tb,
                  double tolerance) {
  INFO("dtype " << to_string(dtype_of<T>()) << ", m=" << m << " k=" << k << " n=" << n
                << ", transpose_a=" << ta << ", transpose_b=" << tb << ", seed " << seed);
  kernel_test_env env;
  test_random random{seed};
  tensor a = std::is_floating_point_v<T> ? random.uniform<T>(ta ? tensor_shape{k, m} : tensor_shape{m, k})
                                         : random.integers<T>(ta ? tensor_shape{k, m} : tensor_shape{m, k}, -9, 9);
  tensor b = std::is_floating_point_v<T> ? random.uniform<T>(tb ? tensor_shape{n, k} : tensor_shape{k, n})
                                         : random.integers<T>(tb ? tensor_shape{n, k} : tensor_shape{k, n}, -9, 9);
  auto out = env.run_ok(make_node("MatMul", "mm", dtype_of<T>(),
                                  {{"transpose_a", ta}, {"transpose_b", tb}}),
                        {a, b});
  require_near(out, tensor_shape{m, n}, naive_matmul(a, b, ta, tb), tolerance);
}

} // namespace

TEST_CASE("MatMul matches a naive product for every transpose combination", "[kernels][matmul]") {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_matmul<float>(5, 7, 3, ta, tb, 1e-5);
      check_matmul<float>(64, 130, 33, ta, tb, 1e-5);
      check_matmul<double>(17, 9, 11, ta, tb, 1e-12);
      check_matmul<std::int32_t>(4, 6, 5, ta, tb, 0.0);
      check_matmul<std::int64_t>(3, 8, 2, ta, tb, 0.0);
    }
}

TEST_CASE("MatMul handles degenerate sizes", "[kernels][matmul]") {
  check_matmul<float>(1, 1, 1, false, false, 1e-6);
  check_matmul<float>(1, 50, 1, false, true, 1e-5);
  kernel_test_env env;
  // An empty inner dimension gives zeros, as for an empty sum.
  tensor a{dtype::float32, {2, 0}};
  tensor b{dtype::float32, {0, 3}};
  auto out = env.run_ok(make_node("MatMul", "mm", dtype::float32), {a, b});
  CHECK(out.shape() == tensor_shape{2, 3});
  CHECK(out.to_vector<float>() == std::vector<float>(6, 0.f));
}

TEST_CASE("MatMul rejects size-incompatible operands naming both shapes", "[kernels][matmul]") {
  kernel_test_env env;
  tensor a{dtype::float32, {2, 3}};
  tensor b{dtype::float32, {4, 5}};
  auto r = env.run(make_node("MatMul", "mm", dtype::float32), {a, b});
  CHECK(r.status.code() == errc::invalid_argument);
  CHECK_THAT(r.status.message(), Catch::Contains("[2,3]") && Catch::Contains("[4,5]"));
  tensor v{dtype::float32, {3}};
  CHECK(env.run(make_node("MatMul", "mm", dtype::float32), {a, v}).status.code() ==
        errc::invalid_argument);
}

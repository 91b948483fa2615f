// MatMul's row-major product as the column-major GEMM cuBLAS computes
// (devices/cuda/gemm_args.hpp), checked against a plain product on the CPU: a column-major
// reference GEMM given the mapped arguments must produce the row-major result.
#include "devices/cuda/gemm_args.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

using namespace actorflow::cuda;

namespace {

/// What cuBLAS's gemm computes (alpha 1, beta 0), column-major, in float64.
void reference_column_major_gemm(const column_major_gemm& g, const std::vector<double>& first,
                                 const std::vector<double>& second, std::vector<double>& out) {
  for (std::int64_t i = 0; i < g.m; ++i)
    for (std::int64_t j = 0; j < g.n; ++j) {
      double sum = 0;
      for (std::int64_t l = 0; l < g.k; ++l) {
        auto x = g.transpose_first ? first[static_cast<std::size_t>(l + i * g.ld_first)]
                                   : first[static_cast<std::size_t>(i + l * g.ld_first)];
        auto y = g.transpose_second ? second[static_cast<std::size_t>(j + l * g.ld_second)]
                                    : second[static_cast<std::size_t>(l + j * g.ld_second)];
        sum += x * y;
      }
      out[static_cast<std::size_t>(i + j * g.ld_out)] = sum;
    }
}

/// Row-major [rows, cols] matrix element.
double at(const std::vector<double>& m, std::int64_t cols, std::int64_t r, std::int64_t c) {
  return m[static_cast<std::size_t>(r * cols + c)];
}

} // namespace

TEST_CASE("the column-major GEMM of a row-major MatMul computes the same product for every transpose",
          "[cuda][matmul]") {
  std::uint32_t seed = 20260507;
  INFO("seed " << seed);
  std::mt19937 engine{seed};
  std::uniform_real_distribution<double> value{-1, 1};
  std::uniform_int_distribution<std::int64_t> size{1, 7};
  for (int trial = 0; trial < 40; ++trial) {
    bool transpose_a = trial % 2 == 1;
    bool transpose_b = trial / 2 % 2 == 1;
    auto m = size(engine);
    auto n = size(engine);
    auto k = size(engine);
    INFO("transpose_a " << transpose_a << ", transpose_b " << transpose_b << ", m " << m
                        << ", n " << n << ", k " << k);
    // Stored shapes: A is [m, k] or [k, m], B is [k, n] or [n, k].
    auto a_cols = transpose_a ? m : k;
    auto b_cols = transpose_b ? k : n;
    std::vector<double> a(static_cast<std::size_t>(m * k));
    std::vector<double> b(static_cast<std::size_t>(k * n));
    for (auto& x : a)
      x = value(engine);
    for (auto& x : b)
      x = value(engine);

    auto g = column_major_gemm_for(transpose_a, transpose_b, m, n, k, a_cols, b_cols);
    std::vector<double> c(static_cast<std::size_t>(m * n), std::nan(""));
    reference_column_major_gemm(g, b, a, c);

    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double expected = 0;
        for (std::int64_t l = 0; l < k; ++l)
          expected += (transpose_a ? at(a, a_cols, l, i) : at(a, a_cols, i, l)) *
                      (transpose_b ? at(b, b_cols, j, l) : at(b, b_cols, l, j));
        INFO("element [" << i << ", " << j << "]");
        CHECK(at(c, n, i, j) == Approx(expected).margin(1e-12));
      }
  }
}

TEST_CASE("the mapped GEMM's leading dimensions are the stored row lengths", "[cuda][matmul]") {
  auto g = column_major_gemm_for(false, false, 2, 5, 3, 3, 5);
  CHECK(g.m == 5);
  CHECK(g.n == 2);
  CHECK(g.k == 3);
  CHECK(g.ld_first == 5);
  CHECK(g.ld_second == 3);
  CHECK(g.ld_out == 5);
  CHECK_FALSE(g.transpose_first);
  CHECK_FALSE(g.transpose_second);
  auto t = column_major_gemm_for(true, true, 2, 5, 3, 2, 3);
  CHECK(t.transpose_first);
  CHECK(t.transpose_second);
  CHECK(t.ld_first == 3);
  CHECK(t.ld_second == 2);
}

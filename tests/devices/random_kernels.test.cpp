// RandomUniform, RandomStandardNormal and TruncatedNormal: reproducible with seeds, fresh
// numbers on every run, values in range, plausible moments.
#include "support/kernel_test_util.hpp"

#include <cmath>

using namespace actorflow;
using namespace actorflow::testing;

namespace {

node random_node(const std::string& op, dtype type, std::int64_t seed, std::int64_t seed2,
                 std::vector<std::int64_t> shape = {100, 50}) {
  return make_node(op, "random", type,
                   {{"shape", shape}, {"dtype", type}, {"seed", seed}, {"seed2", seed2}});
}

struct moments {
  double mean = 0;
  double variance = 0;
};

moments moments_of(const std::vector<double>& v) {
  moments m;
  for (double x : v)
    m.mean += x;
  m.mean /= static_cast<double>(v.size());
  for (double x : v)
    m.variance += (x - m.mean) * (x - m.mean);
  m.variance /= static_cast<double>(v.size());
  return m;
}

const std::vector<std::string> random_ops{"RandomUniform", "RandomStandardNormal", "TruncatedNormal"};

} // namespace

TEST_CASE("random kernels with the same seeds produce the same sequence",
          "[kernels][random]") {
  kernel_test_env env;
  for (auto& op : random_ops)
    for (auto type : {dtype::float32, dtype::float64}) {
      INFO(op << " " << to_string(type) << ", seeds 87654321 and 5");
      auto n = random_node(op, type, 87654321, 5);
      auto first = env.make_kernel(n);
      auto second = env.make_kernel(n);
      auto a1 = env.run(*first, n, {});
      auto a2 = env.run(*first, n, {});
      auto b1 = env.run(*second, n, {});
      auto b2 = env.run(*second, n, {});
      REQUIRE(a1.status.ok());
      CHECK(as_doubles(a1.outputs[0]) == as_doubles(b1.outputs[0]));
      CHECK(as_doubles(a2.outputs[0]) == as_doubles(b2.outputs[0]));
      // Each run continues the sequence instead of repeating it.
      CHECK(as_doubles(a1.outputs[0]) != as_doubles(a2.outputs[0]));

      auto other = random_node(op, type, 87654321, 6);
      CHECK(as_doubles(env.run(other, {}).outputs[0]) != as_doubles(a1.outputs[0]));
    }
}

TEST_CASE("random kernels without seeds differ between kernels", "[kernels][random]") {
  kernel_test_env env;
  auto n = random_node("RandomUniform", dtype::float32, 0, 0);
  CHECK(as_doubles(env.run(n, {}).outputs[0]) != as_doubles(env.run(n, {}).outputs[0]));
}

TEST_CASE("RandomUniform lies between 0 (inclusive) and 1 (exclusive) with the uniform mean and variance", "[kernels][random]") {
  kernel_test_env env;
  for (auto type : {dtype::float32, dtype::float64}) {
    INFO(to_string(type) << ", seeds 11 and 0");
    auto out = env.run_ok(random_node("RandomUniform", type, 11, 0, {200, 500}), {});
    CHECK(out.shape() == tensor_shape{200, 500});
    auto v = as_doubles(out);
    for (double x : v)
      REQUIRE((x >= 0.0 && x < 1.0));
    auto m = moments_of(v);
    CHECK(m.mean == Approx(0.5).margin(0.01));
    CHECK(m.variance == Approx(1.0 / 12).margin(0.005));
  }
}

TEST_CASE("RandomStandardNormal has mean 0 and variance 1", "[kernels][random]") {
  kernel_test_env env;
  INFO("seeds 3 and 4");
  auto out = env.run_ok(random_node("RandomStandardNormal", dtype::float32, 3, 4, {100000}), {});
  auto m = moments_of(as_doubles(out));
  CHECK(m.mean == Approx(0.0).margin(0.02));
  CHECK(m.variance == Approx(1.0).margin(0.03));
}

TEST_CASE("TruncatedNormal stays within two standard deviations", "[kernels][random]") {
  kernel_test_env env;
  for (auto type : {dtype::float32, dtype::float64}) {
    INFO(to_string(type) << ", seeds 21 and 22");
    auto out = env.run_ok(random_node("TruncatedNormal", type, 21, 22, {100000}), {});
    auto v = as_doubles(out);
    for (double x : v)
      REQUIRE(std::abs(x) < 2.0);
    auto m = moments_of(v);
    CHECK(m.mean == Approx(0.0).margin(0.02));
    // The variance of a standard normal truncated to (-2, 2) is about 0.774.
    CHECK(m.variance == Approx(0.774).margin(0.03));
  }
}

TEST_CASE("random kernels need a fully defined shape", "[kernels][random]") {
  auto made = kernel_registry::global().create(
    random_node("RandomUniform", dtype::float32, 1, 1, {-1, 3}), "CPU");
  CHECK_FALSE(made.ok());
}

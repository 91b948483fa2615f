// MatMul with every transpose combination against a naive float64 product.
#include "devices/cpu/blas_kernels.hpp"
#include "support/kernel_test_util.hpp"

#include <cctype>
#include <fstream>
#include <sstream>

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

namespace {

bool same_name(std::string a, std::string b) {
  for (auto* s : {&a, &b})
    for (auto& c : *s)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return a == b;
}

/// The words of /proc/cpuinfo's first "flags" line: the kernel's own view of the CPU.
std::string kernel_cpu_flags() {
  std::ifstream info{"/proc/cpuinfo"};
  std::string line;
  while (std::getline(info, line))
    if (line.rfind("flags", 0) == 0)
      return " " + line.substr(line.find(':') + 1) + " ";
  return {};
}

/// Puts back the choice this process made at its start, whatever a test set.
struct restore_blas_core {
  ~restore_blas_core() { set_blas_core(blas_kernels().running); }
};

} // namespace

TEST_CASE("the CPU's features read from CPUID agree with the kernel's flags", "[blas]") {
  const auto& cpu = detect_cpu_features();
  auto flags = kernel_cpu_flags();
  REQUIRE_FALSE(flags.empty());
  INFO(cpu.summary() << "\nkernel:" << flags);
  auto has = [&](const char* flag) { return flags.find(std::string{" "} + flag + " ") != std::string::npos; };
  CHECK(cpu.sse4_2 == has("sse4_2"));
  CHECK(cpu.avx == has("avx"));
  CHECK(cpu.avx2 == has("avx2"));
  CHECK(cpu.fma == has("fma"));
  CHECK(cpu.avx512f == has("avx512f"));
  CHECK(cpu.avx512bw == has("avx512bw"));
  CHECK(cpu.avx512vl == has("avx512vl"));
  CHECK(cpu.avx512_bf16 == has("avx512_bf16"));
  CHECK(cpu.amx_tile == has("amx_tile"));
  CHECK(cpu.summary().find(" family " + std::to_string(cpu.family) + " model ") != std::string::npos);
}

TEST_CASE("with OpenBLAS's own detection made wrong (Prescott), actorflow still runs GEMMs on the widest kernels this CPU has", "[blas][matmul]") {
  restore_blas_core restore;
  const auto& cpu = detect_cpu_features();
  // What OpenBLAS 0.3.21 does by itself on a CPU model newer than it (family 6 model 207).
  REQUIRE(set_blas_core("Prescott"));
  REQUIRE(running_blas_core() == "Prescott");
  auto choice = choose_blas_kernels(cpu, "");
  INFO(choice.summary);
  CHECK(choice.library_chose == "Prescott");
  CHECK(choice.problem.empty());
  CHECK(same_name(choice.running, widest_blas_core(cpu)));
  CHECK(same_name(running_blas_core(), choice.running));
  if (cpu.avx512_core())
    CHECK(same_name(choice.running, "SkylakeX"));   // Cooperlake only when forced
  else if (cpu.avx2 && cpu.fma)
    CHECK((same_name(choice.running, "Haswell") || same_name(choice.running, "Zen")));
  CHECK(choice.summary.find("OpenBLAS chose Prescott") != std::string::npos);
  CHECK(choice.summary.find("the widest kernels this CPU runs") != std::string::npos);
  // The kernels switched to compute what float64 says.
  for (bool ta : {false, true}) {
    check_matmul<float>(64, 130, 33, ta, !ta, 1e-5);
    check_matmul<double>(17, 9, 11, ta, ta, 1e-12);
  }
}

TEST_CASE("ACTORFLOW_BLAS_CORE forces a core type this CPU runs, and one it cannot run or that does not exist is refused with the reason", "[blas][matmul]") {
  restore_blas_core restore;
  const auto& cpu = detect_cpu_features();
  auto forced = choose_blas_kernels(cpu, "prescott");
  INFO(forced.summary);
  CHECK(forced.problem.empty());
  CHECK(running_blas_core() == "Prescott");
  CHECK(forced.summary.find("forced by ACTORFLOW_BLAS_CORE") != std::string::npos);
  check_matmul<float>(64, 130, 33, false, true, 1e-5);

  auto unknown = choose_blas_kernels(cpu, "Pentium4000");
  INFO(unknown.summary);
  CHECK(unknown.problem.find("ACTORFLOW_BLAS_CORE=Pentium4000 is not a core type") != std::string::npos);
  CHECK(same_name(running_blas_core(), widest_blas_core(cpu)));

  // A core that needs more than this CPU has, where there is one.
  for (auto& core : blas_core_types())
    if (!cpu_runs_blas_core(cpu, core)) {
      auto refused = choose_blas_kernels(cpu, core);
      INFO(refused.summary);
      CHECK(refused.problem.find("needs instructions this CPU lacks") != std::string::npos);
      CHECK(same_name(running_blas_core(), widest_blas_core(cpu)));
      break;
    }
}

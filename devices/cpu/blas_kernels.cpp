#include "devices/cpu/blas_kernels.hpp"
#include "devices/cpu/onednn_conv.hpp"

#include <cblas.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <optional>

// OpenBLAS's dynamic dispatcher (DYNAMIC_ARCH builds, as Debian's): the table of kernels in
// use, its name, and the functions that choose it (reading OPENBLAS_CORETYPE) and drop it.
extern "C" {
char* gotoblas_corename(void);
void gotoblas_dynamic_init(void);
void gotoblas_dynamic_quit(void);
}

namespace actorflow {

namespace {

struct core_type {
  const char* name;
  bool (*runs)(const cpu_features&);
};

/// Narrowest first. Zen's kernels are Haswell's with AMD's block sizes; Cooperlake's are
/// SkylakeX's plus BF16 GEMMs, chosen only when forced (widest_blas_core). (Debian's 0.3.21 has
/// no Sapphire Rapids core: AMX is unused.)
const core_type core_types[] = {
  {"Prescott", [](const cpu_features& c) { return c.sse3; }},
  {"Core2", [](const cpu_features& c) { return c.ssse3; }},
  {"Penryn", [](const cpu_features& c) { return c.sse4_1; }},
  {"Nehalem", [](const cpu_features& c) { return c.sse4_2; }},
  {"Sandybridge", [](const cpu_features& c) { return c.avx; }},
  {"Haswell", [](const cpu_features& c) { return c.avx2 && c.fma; }},
  {"Zen", [](const cpu_features& c) { return c.avx2 && c.fma; }},
  {"SkylakeX", [](const cpu_features& c) { return c.avx512_core(); }},
  {"Cooperlake", [](const cpu_features& c) { return c.avx512_core() && c.avx512_bf16; }},
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

/// Index in core_types, or -1.
int rank_of(const std::string& core) {
  auto wanted = lower(core);
  for (int i = 0; i < static_cast<int>(std::size(core_types)); ++i)
    if (lower(core_types[i].name) == wanted)
      return i;
  return -1;
}

/// How wide a core's vectors are, for comparing OpenBLAS's choice with ours: Zen and Haswell
/// are as wide; SkylakeX and Cooperlake too for float32 and float64.
int width_of(const std::string& core) {
  auto i = rank_of(core);
  if (i < 0)
    return -1;
  std::string name = core_types[i].name;
  if (name == "Cooperlake" || name == "SkylakeX")
    return 512;
  if (name == "Haswell" || name == "Zen" || name == "Sandybridge")
    return 256;
  return 128;
}

std::string openblas_version() {
  std::string config = openblas_get_config();
  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..."
  auto end = config.find(' ', config.find(' ') + 1);
  return config.substr(0, end);
}

} // namespace

std::vector<std::string> blas_core_types() {
  std::vector<std::string> out;
  for (auto& c : core_types)
    out.emplace_back(c.name);
  return out;
}

bool cpu_runs_blas_core(const cpu_features& cpu, const std::string& core) {
  auto i = rank_of(core);
  return i >= 0 && core_types[i].runs(cpu);
}

std::string widest_blas_core(const cpu_features& cpu) {
  std::string widest = "Prescott";
  for (auto& c : core_types)
    if (c.runs(cpu))
      widest = c.name;
  // An AMD CPU without AVX-512 gets Zen's block sizes, an Intel one Haswell's.
  if (widest == "Zen" && cpu.vendor != "AuthenticAMD")
    widest = "Haswell";
  // Cooperlake adds BF16 GEMMs, which actorflow never calls (bf16 runs on oneDNN), and its float
  // kernels, as fast, sum in another order than SkylakeX's, the core OpenBLAS itself picks on
  // the AVX-512 CPUs it knows: training then rounds differently from machine to machine (two
  // apps tests' float32 trajectories parted by 1e-4 within 50 steps on an AMD family 26 CPU
  // with Cooperlake, not with SkylakeX). One float kernel for every AVX-512 CPU.
  if (widest == "Cooperlake")
    widest = "SkylakeX";
  return widest;
}

std::string running_blas_core() {
  const char* name = gotoblas_corename();
  return name == nullptr ? std::string{} : std::string{name};
}

bool set_blas_core(const std::string& core) {
  std::optional<std::string> before;
  if (const char* set = std::getenv("OPENBLAS_CORETYPE"))
    before = set;
  ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  if (before)
    ::setenv("OPENBLAS_CORETYPE", before->c_str(), 1);
  else
    ::unsetenv("OPENBLAS_CORETYPE");
  return lower(running_blas_core()) == lower(core);
}

blas_kernel_choice choose_blas_kernels(const cpu_features& cpu, const std::string& forced) {
  blas_kernel_choice choice;
  choice.library_chose = running_blas_core();
  choice.widest = widest_blas_core(cpu);
  choice.forced = forced;
  std::string wanted;
  if (!forced.empty()) {
    if (rank_of(forced) < 0)
      choice.problem = "ACTORFLOW_BLAS_CORE=" + forced + " is not a core type of this BLAS";
    else if (!cpu_runs_blas_core(cpu, forced))
      choice.problem = "ACTORFLOW_BLAS_CORE=" + forced + " needs instructions this CPU lacks";
    else
      wanted = core_types[rank_of(forced)].name;
  }
  if (wanted.empty() && width_of(choice.library_chose) < width_of(choice.widest))
    wanted = choice.widest;
  // OpenBLAS picked an unknown name (a newer build): trust it unless forced.
  if (!wanted.empty() && lower(wanted) != lower(choice.library_chose) && !set_blas_core(wanted)) {
    choice.problem += (choice.problem.empty() ? "" : "; ") + std::string{"OpenBLAS refused core type "} + wanted;
    set_blas_core(choice.library_chose);
  }
  choice.running = running_blas_core();
  choice.summary = "cpu: " + cpu.summary() + "; gemm: " + openblas_version() + " " + choice.running;
  if (lower(choice.running) == lower(choice.library_chose))
    choice.summary += " (OpenBLAS's own choice";
  else
    choice.summary += " (OpenBLAS chose " + choice.library_chose;
  if (!choice.forced.empty() && choice.problem.empty())
    choice.summary += "; forced by ACTORFLOW_BLAS_CORE)";
  else if (width_of(choice.running) == width_of(choice.widest))
    choice.summary += "; the widest kernels this CPU runs)";
  else
    choice.summary += "; narrower than this CPU's " + choice.widest + ")";
  if (!choice.problem.empty())
    choice.summary += "; " + choice.problem;
  // The float32 convolutions' library (devices/cpu/onednn_conv.hpp), said on the same line.
  choice.summary += "; conv: " + (onednn_conv_wanted() ? onednn_version()
                                                       : std::string{"im2col + GEMM (ACTORFLOW_CPU_CONV=gemm)"});
  return choice;
}

const blas_kernel_choice& blas_kernels() {
  static const blas_kernel_choice choice = [] {
    const char* forced = std::getenv("ACTORFLOW_BLAS_CORE");
    return choose_blas_kernels(detect_cpu_features(), forced == nullptr ? "" : forced);
  }();
  return choice;
}

} // namespace actorflow

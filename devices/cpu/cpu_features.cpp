#include "devices/cpu/cpu_features.hpp"

#include <cpuid.h>

#include <cstdint>
#include <cstring>

namespace actorflow {

namespace {

struct registers {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

registers cpuid(unsigned leaf, unsigned subleaf = 0) {
  registers r;
  if (!__get_cpuid_count(leaf, subleaf, &r.a, &r.b, &r.c, &r.d))
    r = {};
  return r;
}

bool bit(unsigned word, int n) { return ((word >> n) & 1u) != 0; }

/// The OS's XCR0: which register states it saves on a context switch.
std::uint64_t saved_states() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

cpu_features detect() {
  cpu_features f;
  auto vendor = cpuid(0);
  char name[13] = {};
  std::memcpy(name, &vendor.b, 4);
  std::memcpy(name + 4, &vendor.d, 4);
  std::memcpy(name + 8, &vendor.c, 4);
  f.vendor = name;
  unsigned max_leaf = vendor.a;

  auto basic = cpuid(1);
  int base_family = static_cast<int>((basic.a >> 8) & 0xf);
  int base_model = static_cast<int>((basic.a >> 4) & 0xf);
  f.family = base_family == 0xf ? base_family + static_cast<int>((basic.a >> 20) & 0xff) : base_family;
  f.model = (base_family == 0x6 || base_family == 0xf)
              ? base_model + (static_cast<int>((basic.a >> 16) & 0xf) << 4)
              : base_model;
  f.sse3 = bit(basic.c, 0);
  f.ssse3 = bit(basic.c, 9);
  f.fma = bit(basic.c, 12);
  f.sse4_1 = bit(basic.c, 19);
  f.sse4_2 = bit(basic.c, 20);
  bool osxsave = bit(basic.c, 27);
  bool avx_bit = bit(basic.c, 28);

  std::uint64_t xcr0 = osxsave ? saved_states() : 0;
  bool ymm_saved = (xcr0 & 0x6) == 0x6;      // SSE and AVX state
  bool zmm_saved = (xcr0 & 0xe6) == 0xe6;    // plus opmask, ZMM0-15 upper halves, ZMM16-31
  bool tiles_saved = (xcr0 & 0x60000) == 0x60000; // XTILECFG and XTILEDATA

  f.avx = avx_bit && ymm_saved;
  f.fma = f.fma && f.avx;
  if (max_leaf >= 7) {
    auto ext = cpuid(7, 0);
    f.avx2 = bit(ext.b, 5) && f.avx;
    f.avx512f = bit(ext.b, 16) && zmm_saved;
    f.avx512dq = bit(ext.b, 17) && f.avx512f;
    f.avx512cd = bit(ext.b, 28) && f.avx512f;
    f.avx512bw = bit(ext.b, 30) && f.avx512f;
    f.avx512vl = bit(ext.b, 31) && f.avx512f;
    f.avx512_vnni = bit(ext.c, 11) && f.avx512f;
    f.avx512_fp16 = bit(ext.d, 23) && f.avx512f;
    f.amx_bf16 = bit(ext.d, 22) && tiles_saved;
    f.amx_tile = bit(ext.d, 24) && tiles_saved;
    f.amx_int8 = bit(ext.d, 25) && tiles_saved;
    if (ext.a >= 1)
      f.avx512_bf16 = bit(cpuid(7, 1).a, 5) && f.avx512f;
  }

  if (cpuid(0x80000000).a >= 0x80000004) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      auto r = cpuid(0x80000002 + i);
      std::memcpy(brand + 16 * i, &r, 16);
    }
    f.brand = brand;
    auto first = f.brand.find_first_not_of(' ');
    f.brand = first == std::string::npos ? std::string{} : f.brand.substr(first);
    while (!f.brand.empty() && f.brand.back() == ' ')
      f.brand.pop_back();
  }
  return f;
}

} // namespace

std::string cpu_features::summary() const {
  std::string s = vendor + " family " + std::to_string(family) + " model " + std::to_string(model);
  if (!brand.empty())
    s += " (" + brand + ")";
  s += ":";
  auto add = [&](bool has, const char* name) {
    if (has)
      s += std::string{" "} + name;
  };
  add(sse4_2, "SSE4.2");
  add(avx, "AVX");
  add(avx2, "AVX2");
  add(fma, "FMA");
  if (avx512f) {
    s += " AVX-512 (F";
    add(avx512cd, "CD");
    add(avx512bw, "BW");
    add(avx512dq, "DQ");
    add(avx512vl, "VL");
    add(avx512_vnni, "VNNI");
    add(avx512_bf16, "BF16");
    add(avx512_fp16, "FP16");
    s += ")";
  }
  if (amx_tile) {
    s += " AMX (";
    std::string kinds;
    if (amx_bf16)
      kinds += "BF16";
    if (amx_int8)
      kinds += kinds.empty() ? "INT8" : " INT8";
    s += kinds + ")";
  }
  return s;
}

const cpu_features& detect_cpu_features() {
  static const cpu_features features = detect();
  return features;
}

} // namespace actorflow

// How much of a GPU the allocator takes (devices/cuda/gpu_memory.hpp): plain arithmetic, so it
// is checked here on any machine, with or without CUDA.
#include "devices/cuda/gpu_memory.hpp"

#include <catch2/catch.hpp>

using namespace actorflow;
using namespace actorflow::cuda;

namespace {

constexpr std::size_t mib = std::size_t{1} << 20;
constexpr std::size_t gib = std::size_t{1} << 30;

} // namespace

TEST_CASE("by default a GPU allocator takes the free memory less TensorFlow's reserve",
          "[cuda][memory]") {
  // 5% of 10 GiB (512 MiB) is more than 300 MiB.
  CHECK(gpu_memory_limit(10 * gib, 16 * gib, 0) == 10 * gib - 512 * mib);
  // A fraction of 1 or more means the default too.
  CHECK(gpu_memory_limit(10 * gib, 16 * gib, 1) == 10 * gib - 512 * mib);
  CHECK(gpu_memory_limit(10 * gib, 16 * gib, 1.5) == 10 * gib - 512 * mib);
  CHECK(gpu_memory_limit(10 * gib, 16 * gib, -0.5) == 10 * gib - 512 * mib);
  // 5% of 4 GiB is less than 300 MiB; an empty H200 (141 GiB free) keeps 7.05 GiB.
  CHECK(gpu_memory_reserve(4 * gib) == 300 * mib);
  CHECK(gpu_memory_reserve(141 * gib) == 141 * gib / 20);
  // Below 2 GiB free, 225 MiB.
  CHECK(gpu_memory_reserve(1 * gib) == 225 * mib);
}

TEST_CASE("a nearly full GPU keeps half of what is free in reserve", "[cuda][memory]") {
  CHECK(gpu_memory_limit(400 * mib, 16 * gib, 0) == 200 * mib);
  CHECK(gpu_memory_limit(0, 16 * gib, 0) == 0);
  CHECK(gpu_memory_limit(450 * mib, 16 * gib, 0) == 225 * mib);
  CHECK(gpu_memory_limit(500 * mib, 16 * gib, 0) == 275 * mib);
}

TEST_CASE("per_process_gpu_memory_fraction takes that share of the whole card, at most what is free",
          "[cuda][memory]") {
  CHECK(gpu_memory_limit(15 * gib, 16 * gib, 0.25) == 4 * gib);
  CHECK(gpu_memory_limit(15 * gib, 16 * gib, 0.5) == 8 * gib);
  // Another process holds most of the card: asking for more than is free would fail outright.
  CHECK(gpu_memory_limit(3 * gib, 16 * gib, 0.5) == 3 * gib);
}

TEST_CASE("the GPU allocator's options carry the limit, the growth choice and the card's memory",
          "[cuda][memory]") {
  memory_space space{"/device:GPU:0"};
  gpu_options options;
  options.per_process_gpu_memory_fraction = 0.5;
  options.allow_growth = true;
  auto o = gpu_bfc_options(12 * gib, 16 * gib, options, &space);
  CHECK(o.memory_limit == 8 * gib);
  CHECK(o.allow_growth);
  CHECK(o.space == &space);

  auto defaults = gpu_bfc_options(12 * gib, 16 * gib, gpu_options{}, &space);
  CHECK(defaults.memory_limit == 12 * gib - 12 * gib / 20);
  CHECK_FALSE(defaults.allow_growth);
}

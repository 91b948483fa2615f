// oneDNN takes every convolution the CNN trains with (no silent fall back to im2col + GEMM),
// and leaves the input gradient of a 1-channel image to it; the values themselves are checked
// by conv_kernel.test.cpp against float64 loops.
#include "devices/cpu/onednn_conv.hpp"

#include <catch2/catch.hpp>

#include <vector>

using namespace actorflow;

TEST_CASE("oneDNN runs the CNN's convolutions and the gradients its training needs", "[conv][onednn]") {
  INFO(onednn_version());
  CHECK(onednn_version().rfind("oneDNN ", 0) == 0);
  struct shape {
    std::int64_t batch, h, w, channels, k, filters;
  };
  for (auto sh : {shape{32, 28, 28, 1, 5, 16}, shape{32, 12, 12, 16, 5, 32}}) {
    conv_sizes s;
    s.batch = sh.batch, s.channels = sh.channels, s.filters = sh.filters;
    auto g = conv_geometry::make(sh.h, sh.w, sh.k, sh.k, 1, 1, "VALID");
    REQUIRE(g.ok());
    s.g = *g;
    std::vector<float> x(static_cast<std::size_t>(sh.batch * sh.h * sh.w * sh.channels), 0.5f);
    std::vector<float> filter(static_cast<std::size_t>(sh.k * sh.k * sh.channels * sh.filters), 0.25f);
    std::vector<float> y(static_cast<std::size_t>(sh.batch * s.positions() * sh.filters), -1.f);
    std::vector<float> dx(x.size(), -1.f), dfilter(filter.size(), -1.f);
    INFO("channels " << sh.channels);
    REQUIRE(onednn_convolution(onednn_conv_pass::forward, s, x.data(), filter.data(), nullptr, y.data()));
    // Every output is a sum of k*k*channels products of 0.5 * 0.25.
    CHECK(y.front() == Approx(0.125 * sh.k * sh.k * sh.channels));
    CHECK(y.back() == Approx(0.125 * sh.k * sh.k * sh.channels));
    // The images' own gradient (1 channel) stays on im2col + GEMM, which runs it faster.
    bool input = onednn_convolution(onednn_conv_pass::input, s, nullptr, filter.data(), y.data(), dx.data());
    CHECK(input == (sh.channels >= 4));
    if (input)
      CHECK(dx.front() == Approx(0.25 * sh.filters * y.front())); // a corner: one window covers it
    else
      CHECK(dx.front() == -1.f); // left alone
    REQUIRE(onednn_convolution(onednn_conv_pass::filter, s, x.data(), nullptr, y.data(), dfilter.data()));
    CHECK(dfilter.front() == Approx(0.5 * y.front() * sh.batch * s.positions()));
  }
}

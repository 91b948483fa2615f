#include "graph/metrics.hpp"

#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace actorflow;

namespace {
bool has_line(const std::string& page, const std::string& line) {
  return page.find("\n" + line + "\n") != std::string::npos || page.rfind(line + "\n", 0) == 0;
}
} // namespace

TEST_CASE("a disabled registry counts nothing and an enabled one counts every add") {
  metrics_registry registry;
  auto& steps = registry.counter("af_steps_total", "Steps.", {{"outcome", "ok"}});
  steps.add(5);
  CHECK(steps.value() == 0);
  registry.set_enabled(true);
  steps.add();
  steps.add(2);
  CHECK(steps.value() == 3);
  // The same name and labels are the same series.
  CHECK(&registry.counter("af_steps_total", "Steps.", {{"outcome", "ok"}}) == &steps);
  CHECK(&registry.counter("af_steps_total", "Steps.", {{"outcome", "error"}}) != &steps);
}

TEST_CASE("the registry renders families in Prometheus's text format, labels escaped") {
  metrics_registry registry;
  registry.set_enabled(true);
  registry.counter("af_bytes_total", "Bytes sent.", {{"peer", "10.0.0.1:2222"}, {"channel", "caf"}}).add(1024);
  registry.counter("af_bytes_total", "Bytes sent.", {{"peer", "say \"hi\"\\"}, {"channel", "bulk"}}).add(7);
  registry.gauge("af_open", "Open things.").set(3);
  auto page = registry.render();
  CHECK(page.rfind("# HELP af_bytes_total Bytes sent.\n# TYPE af_bytes_total counter\n", 0) == 0);
  CHECK(has_line(page, "af_bytes_total{peer=\"10.0.0.1:2222\",channel=\"caf\"} 1024"));
  CHECK(has_line(page, "af_bytes_total{peer=\"say \\\"hi\\\"\\\\\",channel=\"bulk\"} 7"));
  CHECK(has_line(page, "# TYPE af_open gauge"));
  CHECK(has_line(page, "af_open 3"));
  // One HELP and TYPE per family.
  CHECK(page.find("# HELP af_bytes_total", 1) == std::string::npos);
}

TEST_CASE("a histogram renders cumulative buckets, a +Inf bucket, its sum and count") {
  metrics_registry registry;
  registry.set_enabled(true);
  auto& latency = registry.histogram("af_step_seconds", "Step time.", {}, {0.01, 0.1, 1});
  for (double v : {0.005, 0.05, 0.05, 0.5, 3.0})
    latency.observe(v);
  CHECK(latency.count() == 5);
  CHECK(latency.sum() == Approx(3.605));
  auto page = registry.render();
  CHECK(has_line(page, "# TYPE af_step_seconds histogram"));
  CHECK(has_line(page, "af_step_seconds_bucket{le=\"0.01\"} 1"));
  CHECK(has_line(page, "af_step_seconds_bucket{le=\"0.1\"} 3"));
  CHECK(has_line(page, "af_step_seconds_bucket{le=\"1\"} 4"));
  CHECK(has_line(page, "af_step_seconds_bucket{le=\"+Inf\"} 5"));
  CHECK(has_line(page, "af_step_seconds_sum 3.605"));
  CHECK(has_line(page, "af_step_seconds_count 5"));
}

TEST_CASE("a name used as two kinds, or a histogram with other bounds, is refused") {
  metrics_registry registry;
  registry.counter("af_x_total", "X.");
  CHECK_THROWS_AS(registry.gauge("af_x_total", "X."), std::logic_error);
  registry.histogram("af_h_seconds", "H.", {}, {1, 2});
  CHECK_THROWS_AS(registry.histogram("af_h_seconds", "H.", {{"a", "b"}}, {1, 3}), std::logic_error);
}

TEST_CASE("a collector reports at every render while its handle lives, beside the series") {
  metrics_registry registry;
  registry.gauge("af_mem_bytes", "Memory.", {{"allocator", "registered"}}).set(1);
  int calls = 0;
  {
    auto handle = registry.collect([&](metric_sink& out) {
      ++calls;
      out.gauge("af_mem_bytes", "Memory.", {{"allocator", "collected"}}, 4096);
    });
    auto page = registry.render();
    CHECK(calls == 1);
    CHECK(has_line(page, "af_mem_bytes{allocator=\"registered\"} 1"));
    CHECK(has_line(page, "af_mem_bytes{allocator=\"collected\"} 4096"));
    auto type_line = page.find("# TYPE af_mem_bytes gauge");
    REQUIRE(type_line != std::string::npos);
    CHECK(type_line == page.rfind("# TYPE af_mem_bytes gauge"));
  }
  auto page = registry.render();
  CHECK(calls == 1);
  CHECK(page.find("collected") == std::string::npos);
}

TEST_CASE("counters and histograms add up across threads") {
  metrics_registry registry;
  registry.set_enabled(true);
  auto& c = registry.counter("af_c_total", "C.");
  auto& h = registry.histogram("af_h_seconds", "H.");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.add();
        h.observe(0.001);
      }
    });
  for (auto& t : threads)
    t.join();
  CHECK(c.value() == 40000);
  CHECK(h.count() == 40000);
  CHECK(h.sum() == Approx(40.0));
}

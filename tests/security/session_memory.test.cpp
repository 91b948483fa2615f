// The per-session memory cap: a session's steps on a device may hold at most its limit in the
// tensors their kernels allocate, and a task caps every session on it
// (ACTORFLOW_SESSION_MEMORY_BYTES), whatever a client asks for.
#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "support/processes.hpp"

#include <catch2/catch.hpp>

#include <chrono>

using namespace actorflow;
using namespace actorflow::testing;
using namespace std::chrono_literals;

namespace {

/// a = 4 MiB of ones; b = a + 1 needs another 4 MiB while a is still held (8 MiB at once).
struct eight_mib_step {
  graph g;
  output total;
  eight_mib_step() {
    auto a = ops::fill(g, {std::int64_t{1} << 20}, ops::constant(g, 1.f), "a");
    auto b = ops::add(a, ops::constant(g, 1.f), "b");
    total = ops::reduce_sum(b, {}, false, "total");
  }
};

void check_refused_at_b(const status& outcome, const std::string& limit_text) {
  INFO(outcome.to_string());
  CHECK(outcome.code() == errc::resource_exhausted);
  CHECK(outcome.message().find("'b'") != std::string::npos);
  CHECK(outcome.message().find("cannot allocate 4.0 MiB") != std::string::npos);
  CHECK(outcome.message().find("limit of " + limit_text) != std::string::npos);
}

} // namespace

TEST_CASE("a step over its session's memory limit fails naming the node, and the limit frees as tensors die", "[security][memory]") {
  eight_mib_step step;
  session_options tight;
  tight.memory_limit_bytes = std::size_t{6} << 20;
  session capped{step.g, tight};
  auto refused = capped.run({step.total});
  REQUIRE_FALSE(refused.ok());
  check_refused_at_b(refused.error(), "6.0 MiB");

  // 10 MiB holds one step at a time; ten steps in a row pass only if each returns its bytes.
  session_options roomy;
  roomy.memory_limit_bytes = std::size_t{10} << 20;
  session enough{step.g, roomy};
  for (int i = 0; i < 10; ++i) {
    auto r = enough.run({step.total});
    REQUIRE(r.ok());
    CHECK(r->at(0).scalar_value<float>() == Approx(2.0 * (1 << 20)));
  }
}

TEST_CASE("a worker's ACTORFLOW_SESSION_MEMORY_BYTES caps every session on it, whatever the client asks", "[security][memory]") {
  auto port = free_loopback_port();
  REQUIRE(port != 0);
  auto address = "127.0.0.1:" + std::to_string(port);
  child_process worker{ACTORFLOW_WORKER_BINARY,
                       {"--cluster", "worker=" + address, "--job", "worker", "--threads", "1"},
                       true,
                       {"ACTORFLOW_SESSION_MEMORY_BYTES=" + std::to_string(std::size_t{6} << 20)}};
  REQUIRE(worker.wait_for_line("serving on", 20000ms).has_value());

  eight_mib_step step;
  for (std::size_t asked : {std::size_t{0}, std::size_t{64} << 20}) {
    session_options options;
    options.target = "caf://" + address;
    options.timeout_seconds = 10;
    options.memory_limit_bytes = asked;
    session s{step.g, options};
    auto refused = s.run({step.total});
    REQUIRE_FALSE(refused.ok());
    check_refused_at_b(refused.error(), "6.0 MiB");
  }
  // A step under the cap runs on the same worker.
  graph small;
  auto sum = ops::reduce_sum(ops::fill(small, {1024}, ops::constant(small, 2.f)));
  session_options options;
  options.target = "caf://" + address;
  options.timeout_seconds = 10;
  session s{small, options};
  auto r = s.run({sum});
  REQUIRE(r.ok());
  CHECK(r->at(0).scalar_value<float>() == Approx(2048));
}

// Strangers knocking on a secured cluster while it trains. Each refused attempt must cost only
// the stranger's own connection: a TLS handshake with a certificate of another CA, a BASP
// header or a line of text over plain TCP, and a stop sent from a CAF node of its own that
// holds none of the cluster's secrets. Synchronous between-graph training with two workers is
// deterministic (a mean of two gradients does not depend on their order, one thread each), so
// an attacked run must print the very losses and accuracy of a run in peace.
#include "actors/bulk_socket.hpp"
#include "actors/protocols/task.hpp"
#include "actors/protocols/wire.hpp"
#include "actors/transport_guard.hpp"
#include "security/attack_util.hpp"
#include "support/processes.hpp"
#include "support/temp_dir.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <algorithm>
#include <string>
#include <thread>
#include <vector>

using namespace actorflow;
using namespace actorflow::testing;
using namespace std::chrono_literals;

namespace {

/// What a stranger can send: nothing of it may reach a member's other connections.
struct stranger {
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> node;
  std::shared_ptr<ssl_ctx_st> tls;
  int refused = 0; // attempts the target closed (or never let through) within the bound

  /// With the certificates of another CA in `other_ca_dir`; none (empty) for a token cluster.
  explicit stranger(const std::string& other_ca_dir) {
    auto own = other_ca_dir.empty() ? transport_security{}
                                    : tls_of(other_ca_dir, "intruder", other_ca_dir, 5000);
    use_guarded_transport(config, own);
    add_actorflow_message_types(config);
    node = std::make_unique<caf::actor_system>(config);
    if (!other_ca_dir.empty()) {
      auto context = bulk_detail::make_tls_context(own, false);
      REQUIRE(context.ok());
      tls = *context;
    }
  }

  /// A fresh plain connection that has sent `bytes`; the target is to hang up on it.
  int plain(std::uint16_t port, const std::vector<std::uint8_t>& bytes) {
    int fd = connect_raw(port);
    ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL); // the target may have closed already
    return fd;
  }

  /// A TLS handshake with this stranger's certificate, then a BASP header if it gets that far
  /// (under TLS 1.3 the client's side of the handshake ends before the server has judged it).
  /// True when the target closed the connection without sending the stranger a byte.
  bool other_ca_handshake(std::uint16_t port) {
    int fd = connect_raw(port);
    auto session = bulk_detail::start_tls(tls.get(), fd, false, 5000ms, 5000ms);
    bool closed = true;
    if (session.ok()) {
      auto header = basp_header(/*client_handshake*/ 1, 64);
      std::size_t written = 0;
      (void)bulk_detail::write_all_tls(session->get(), header.data(), header.size(), written,
                                       "the target");
      char byte = 0;
      std::size_t got = 0;
      bool stalled = false;
      closed = !bulk_detail::read_exact(fd, &byte, 1, got, 15000ms, stalled, session->get());
      session->reset();
    }
    ::close(fd);
    return closed;
  }

  /// A stop from a CAF node of its own: true when the handshake was refused, so that it could
  /// not be sent.
  bool stop(std::uint16_t port) {
    auto task = reach_published_actor(*node, "127.0.0.1", port, 15);
    if (!task)
      return true;
    caf::anon_send(caf::actor_cast<caf::actor>(task->actor), protocol::stop_atom::value);
    return false;
  }

  /// `rounds` attempts of every kind at every port, all at once: a plain text line or BASP
  /// header waits for the rest of a token preamble until the handshake timeout (10 s), and one
  /// after the other they would take minutes. Counts the attempts refused within 15 s.
  void attack(const std::vector<std::uint16_t>& ports, int rounds) {
    std::vector<int> plain_connections;
    std::vector<std::future<bool>> stops;
    for (int r = 0; r < rounds; ++r)
      for (auto port : ports) {
        plain_connections.push_back(plain(port, basp_header(/*client_handshake*/ 1, 1u << 30)));
        plain_connections.push_back(plain(port, {'h', 'e', 'l', 'l', 'o', '\n'}));
        stops.push_back(std::async(std::launch::async, [this, port] { return stop(port); }));
        if (tls)
          refused += other_ca_handshake(port) ? 1 : 0;
      }
    auto deadline = std::chrono::steady_clock::now() + 15s;
    for (int fd : plain_connections) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
      refused += closed_within(fd, std::max(left, 1ms)) ? 1 : 0;
      ::close(fd);
    }
    for (auto& s : stops)
      refused += s.get() ? 1 : 0;
  }

  int kinds() const { return tls ? 4 : 3; }
};

/// The chief's progress lines ("step N ... loss X", without the rate, which is noise) and its
/// test accuracy line.
std::string progress_of(const std::string& output) {
  std::istringstream lines{output};
  std::string line, kept;
  while (std::getline(lines, line)) {
    if (line.rfind("step ", 0) == 0)
      kept += line.substr(0, line.find("  examples/s")) + "\n";
    else if (line.rfind("test accuracy: ", 0) == 0)
      kept += line + "\n";
  }
  return kept;
}

/// A mutual-TLS sync between-graph run of 1 ps and 2 workers (as the README's block, with
/// --sync). With `attack_rounds`, a stranger makes that many rounds of attempts at all three
/// tasks once the chief has printed its first step. Returns the chief's progress.
std::string run_between_graph(const std::string& dir, const std::string& certs,
                              const std::string& other, int attack_rounds) {
  tls_between_graph_run run{certs, dir + "/out" + std::to_string(attack_rounds) + "-",
                            {"--sync", "--epochs", "3"}};
  auto& ps = *run.ps;
  auto& chief = run.chief;
  auto& second = run.second;
  std::string output;
  if (attack_rounds > 0) {
    auto first = chief->wait_for_line("step ", 120000ms);
    REQUIRE(first);
    output = *first + "\n";
    stranger intruder{other};
    std::vector<std::uint16_t> ports;
    for (auto& a : run.addresses)
      ports.push_back(port_of(a));
    intruder.attack(ports, attack_rounds);
    // Every attempt was refused, and all of them came while the cluster trained.
    CHECK(intruder.refused == attack_rounds * intruder.kinds() * static_cast<int>(ports.size()));
    CHECK_FALSE(chief->exited());
    CHECK(chief->wait_exit(0ms) == -1);
  }
  output += chief->read_all_lines(240000ms);
  auto chief_code = chief->wait_exit(20000ms);
  auto second_code = second->wait_exit(60000ms);
  auto ps_code = ps.wait_exit(30000ms);
  auto logs = chief->stderr_text() + second->stderr_text() + ps.stderr_text();
  INFO("chief: " << chief->ending(chief_code) << "\n" << output);
  INFO("logs:\n" << logs);
  CHECK(chief_code == 0);
  CHECK(second_code == 0);
  CHECK(ps_code == 0);
  // No member lost another, and none gave up waiting.
  for (auto trouble : {"lost", "unreachable", "timed out", "request_timeout", "failed:"})
    CHECK(logs.find(trouble) == std::string::npos);
  return progress_of(output);
}

} // namespace

TEST_CASE("20 hostile attempts of each kind during a mutual-TLS sync run leave its progress lines and accuracy as in a run without them", "[security][tls]") {
  actorflow::test::temp_dir dir;
  auto certs = dir.path() + "/cluster";
  auto other = dir.path() + "/other";
  make_certificates(certs, {"ps0", "worker0", "worker1"});
  make_certificates(other, {"intruder"});
  auto in_peace = run_between_graph(dir.path(), certs, other, 0);
  auto attacked = run_between_graph(dir.path(), certs, other, 20);
  REQUIRE(in_peace.find("test accuracy: ") != std::string::npos);
  CHECK(attacked == in_peace);
}

namespace {

/// The classic example's cluster (4 tasks) secured by mutual TLS or by a token: a long session
/// trains through 20 rounds of attempts at every task; then new sessions, each registering its
/// partitions on every task again, come at once and finish within a bound well under the 10 s
/// request timeout that a disturbed task made them wait.
void sessions_register_after_attempts(bool with_tls) {
  actorflow::test::temp_dir dir;
  auto certs = dir.path() + "/cluster";
  auto other = dir.path() + "/other";
  auto token_file = dir.path() + "/token";
  std::ofstream{token_file} << "a token only this cluster knows\n";
  if (with_tls) {
    make_certificates(certs, {"canshu0", "canshu1", "gongzuo0", "gongzuo1", "client"});
    make_certificates(other, {"intruder"});
  }
  auto secrets = [&](const std::string& name) {
    return with_tls ? tls_flags(certs, name) : std::vector<std::string>{"--token-file", token_file};
  };
  cluster_processes cluster{ACTORFLOW_WORKER_BINARY,
                            {{"canshu", 2}, {"gongzuo", 2}},
                            1,
                            [&](const std::string& job, int task) {
                              return secrets(job + std::to_string(task));
                            }};
  REQUIRE(cluster.ready());
  std::vector<std::string> client_environment;
  if (with_tls)
    client_environment = tls_environment(certs, "client", certs);
  else
    client_environment = {"ACTORFLOW_CLUSTER_TOKEN_FILE=" + token_file};
  auto classic = [&](const std::string& steps) {
    return std::make_unique<child_process>(
      ACTORFLOW_EXAMPLE_BINARY,
      std::vector<std::string>{"--target", "caf://" + cluster.address(2), "--cluster",
                               cluster.spec_json(), "--steps", steps},
      true, client_environment);
  };
  std::vector<std::uint16_t> ports;
  for (std::size_t i = 0; i < 4; ++i)
    ports.push_back(port_of(cluster.address(i)));

  auto running = classic("100000");
  REQUIRE(running->wait_for_line("0 ", 30000ms)); // "step w b" lines
  stranger intruder{with_tls ? other : std::string{}};
  intruder.attack(ports, 20);
  CHECK(intruder.refused == 20 * intruder.kinds() * 4);
  CHECK_FALSE(running->exited());
  for (int i = 0; i < 3; ++i) {
    auto started = std::chrono::steady_clock::now();
    auto next = classic("300");
    auto output = next->read_all_lines(60000ms);
    auto code = next->wait_exit(10000ms);
    auto took = std::chrono::steady_clock::now() - started;
    INFO("session " << i << ": " << next->ending(code) << "\n" << output << next->stderr_text());
    CHECK(code == 0);
    CHECK(output.find("299 ") != std::string::npos);
    CHECK(took < 8s);
  }
  // The long session was never disturbed: it still steps, then stops when asked.
  running->signal(SIGTERM);
  auto rest = running->read_all_lines(20000ms);
  running->wait_exit(10000ms);
  auto log = running->stderr_text();
  INFO("long session:\n" << rest << log);
  CHECK(rest.find('\n') != std::string::npos);
  CHECK(log.find("timeout") == std::string::npos);
  CHECK(log.find("unreachable") == std::string::npos);
  CHECK(cluster.stop());
}

} // namespace

TEST_CASE("after 20 hostile attempts of each kind at every task of a mutual-TLS cluster, the next sessions register and train at once", "[security][tls]") {
  sessions_register_after_attempts(true);
}

TEST_CASE("after 20 hostile attempts of each kind at every task of a cluster with a token, the next sessions register and train at once", "[security]") {
  sessions_register_after_attempts(false);
}

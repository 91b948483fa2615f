// A peer that goes away costs its own connection, nothing more. TLS writes to a closed
// connection fail with EPIPE in a process whose SIGPIPE is at its default disposition (checked
// in a child: this program again, on hidden test cases, so that a SIGPIPE ends the child and
// not the test run); a TLS connection's end leaves no error behind for the next connection on
// its thread; and the README's mutual-TLS between-graph run ends with every process exiting 0.
#include "actors/bulk_channel.hpp"
#include "actors/bulk_socket.hpp"
#include "security/attack_util.hpp"
#include "support/processes.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <future>
#include <memory>
#include <pthread.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace actorflow;
using namespace actorflow::testing;
using namespace std::chrono_literals;

namespace {

/// Where the parent put the certificates for the hidden cases (they do nothing without it).
constexpr const char* certs_variable = "ACTORFLOW_SIGPIPE_TEST_CERTS";

/// The certificate directory of a hidden case, after checking that the case means something:
/// SIGPIPE at its default disposition and not blocked on this thread. Empty outside a child.
std::string child_certificates() {
  const char* dir = std::getenv(certs_variable);
  if (dir == nullptr)
    return {};
  struct sigaction now {};
  REQUIRE(::sigaction(SIGPIPE, nullptr, &now) == 0);
  REQUIRE(now.sa_handler == SIG_DFL);
  sigset_t mask;
  REQUIRE(pthread_sigmask(SIG_SETMASK, nullptr, &mask) == 0);
  REQUIRE(sigismember(&mask, SIGPIPE) == 0);
  return dir;
}

/// Both ends of a Unix stream socket pair with mutual TLS (ps0 accepting, worker0 connecting),
/// each waiting at most its `stall` in a read or write: writing to one whose peer has closed
/// fails with EPIPE at once, without waiting for a reset.
struct tls_pair {
  int fds[2] = {-1, -1};
  std::shared_ptr<ssl_st> accepted, connected;

  explicit tls_pair(const std::string& certs, std::chrono::milliseconds accepted_stall = 5000ms,
                    std::chrono::milliseconds connected_stall = 5000ms) {
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
    auto server_context = bulk_detail::make_tls_context(tls_of(certs, "ps0", certs, 5000), true);
    auto client_context = bulk_detail::make_tls_context(tls_of(certs, "worker0", certs, 5000), false);
    REQUIRE(server_context.ok());
    REQUIRE(client_context.ok());
    // The handshake needs both sides at once; the accepting side on a thread of its own.
    auto server = std::async(std::launch::async, [&] {
      return bulk_detail::start_tls(server_context->get(), fds[0], true, 5000ms, accepted_stall);
    });
    auto client = bulk_detail::start_tls(client_context->get(), fds[1], false, 5000ms,
                                         connected_stall);
    auto accepting = server.get();
    REQUIRE(client.ok());
    REQUIRE(accepting.ok());
    connected = *client;
    accepted = *accepting;
  }
  ~tls_pair() {
    accepted.reset();
    connected.reset();
    for (int fd : fds)
      if (fd >= 0)
        ::close(fd);
  }
  void close_accepted() {
    accepted.reset();
    ::close(fds[0]);
    fds[0] = -1;
  }
};

} // namespace

TEST_CASE("sigpipe child: a TLS write to a connection its peer closed fails with EPIPE", "[.][sigpipe_child]") {
  auto certs = child_certificates();
  if (certs.empty())
    return;
  tls_pair pair{certs};
  pair.close_accepted();
  std::vector<char> data(64 << 10, 'x');
  std::size_t written = 0;
  auto s = bulk_detail::write_all_tls(pair.connected.get(), data.data(), data.size(), written,
                                      "its peer");
  INFO(s.message());
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("Broken pipe") != std::string::npos);
}

TEST_CASE("sigpipe child: a TLS read that meets its own shutdown answers with an alert that fails with EPIPE", "[.][sigpipe_child]") {
  auto certs = child_certificates();
  if (certs.empty())
    return;
  tls_pair pair{certs};
  // What a bulk endpoint does to its readers when it stops: OpenSSL then sends the peer an
  // alert about the unexpected end, into a socket shut for writing.
  ::shutdown(pair.fds[0], SHUT_RDWR);
  char byte = 0;
  std::size_t got = 0;
  bool stalled = false;
  CHECK_FALSE(bulk_detail::read_exact(pair.fds[0], &byte, 1, got, 5000ms, stalled,
                                      pair.accepted.get()));
  CHECK_FALSE(stalled);
}

TEST_CASE("sigpipe child: a TLS bulk endpoint destroyed with a sender's connection open leaves the process alive", "[.][sigpipe_child]") {
  auto certs = child_certificates();
  if (certs.empty())
    return;
  std::atomic<int> delivered{0};
  auto listening = bulk_endpoint::listen(
    "127.0.0.1", [&](std::int64_t, std::string, tensor) {
      ++delivered;
      return status{};
    },
    {}, tls_of(certs, "ps0", certs, 5000));
  REQUIRE(listening.ok());
  auto address = (*listening)->address();
  bulk_sender sender{tls_of(certs, "worker0", certs, 5000)};
  auto send_one = [&] {
    std::promise<status> written;
    sender.send(address, 1, "a;b;x:0", tensor::from_vector<float>({1.f, 2.f}),
                [&](const status& s) { written.set_value(s); });
    return written.get_future().get();
  };
  REQUIRE(send_one().ok());
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (delivered == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  REQUIRE(delivered == 1);
  // The reader waits on the kept connection for the next frame; the endpoint shuts it down.
  listening->reset();
  // The sender notices the closed connection and finds nobody listening.
  CHECK_FALSE(send_one().ok());
  sender.close();
}

TEST_CASE("a TLS write or alert into a closed connection fails with EPIPE and leaves alive a process whose SIGPIPE is at its default", "[security][tls][sigpipe]") {
  actorflow::test::temp_dir dir;
  auto certs = dir.path() + "/cluster";
  make_certificates(certs, {"ps0", "worker0"});
  char self[4096] = {};
  auto length = ::readlink("/proc/self/exe", self, sizeof self - 1);
  REQUIRE(length > 0);
  child_process child{std::string{self, static_cast<std::size_t>(length)}, {"[sigpipe_child]"},
                      true, {std::string{certs_variable} + "=" + certs}};
  auto output = child.read_all_lines(60000ms);
  auto code = child.wait_exit(10000ms);
  INFO(output << child.stderr_text());
  CHECK(child.exit_signal() == 0);
  REQUIRE(code == 0);
  CHECK(output.find("All tests passed") != std::string::npos);
  CHECK(output.find("in 3 test cases") != std::string::npos);
}

TEST_CASE("the README's mutual-TLS between-graph run of 1 ps and 2 workers ends with every process exiting 0", "[security][tls][sigpipe]") {
  actorflow::test::temp_dir dir;
  auto certs = dir.path() + "/certs";
  make_certificates(certs, {"ps0", "worker0", "worker1"});
  tls_between_graph_run run{certs, dir.path() + "/out", {"--epochs", "1"}};
  auto& ps = *run.ps;
  auto& chief = run.chief;
  auto& second = run.second;
  auto output = chief->read_all_lines(240000ms);
  auto chief_code = chief->wait_exit(20000ms);
  auto second_code = second->wait_exit(60000ms);
  // The ps ends by itself once both workers have finished: no signal is sent.
  auto ps_code = ps.wait_exit(30000ms);
  auto ps_log = ps.stderr_text();
  INFO("chief: " << chief->ending(chief_code) << "\n" << output << chief->stderr_text());
  INFO("worker 1: " << second->ending(second_code) << "\n" << second->stderr_text());
  INFO("ps: " << ps.ending(ps_code) << "\n" << ps_log);
  CHECK(chief_code == 0);
  CHECK(second_code == 0);
  CHECK(ps_code == 0);
  CHECK(ps_log.find("all 2 tasks of job 'worker' finished; stopping") != std::string::npos);
  auto at = output.rfind("test accuracy: ");
  REQUIRE(at != std::string::npos);
  CHECK(std::stod(output.substr(at + 15)) > 0.75);
}


TEST_CASE("a TLS connection that ended badly leaves no error behind for the next one on its thread", "[security][tls]") {
  actorflow::test::temp_dir dir;
  auto certs = dir.path() + "/cluster";
  make_certificates(certs, {"ps0", "worker0"});
  // Two connections open at once, as on a multiplexer thread. Their writes wait (SO_SNDTIMEO,
  // 100 ms at a time) while the peer does not read.
  tls_pair gone{certs};
  tls_pair next{certs, 5000ms, 100ms};
  // OpenSSL keeps errors per thread, and SSL_get_error says SSL_ERROR_SSL while any is queued.
  // A read meeting a peer that left without close_notify queues "unexpected eof".
  gone.close_accepted();
  char byte = 0;
  std::size_t got = 0;
  bool stalled = false;
  CHECK_FALSE(bulk_detail::read_exact(gone.fds[1], &byte, 1, got, 5000ms, stalled,
                                      gone.connected.get()));
  // The other connection's writes on this thread wait until its reader starts a second later;
  // a wait is no failure.
  std::vector<char> data(std::size_t{4} << 20, 'x');
  auto reader = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(1s);
    std::vector<char> into(data.size());
    std::size_t got = 0;
    bool stalled = false;
    return bulk_detail::read_exact(next.fds[0], into.data(), into.size(), got, 5000ms, stalled,
                                   next.accepted.get());
  });
  std::size_t written = 0;
  auto s = bulk_detail::write_all_tls(next.connected.get(), data.data(), data.size(), written,
                                      "its peer");
  INFO(s.message());
  CHECK(s.ok());
  CHECK(reader.get());
}

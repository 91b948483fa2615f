// Who can reach --metrics-port (apps/support/metrics_http.hpp), on real processes: it listens
// where the task does (the kernel's table of listening sockets says), with a cluster token it
// wants the bearer token, with TLS it speaks HTTPS only and to clients of the cluster CA, and a
// TLS file it cannot use stops the program at start.
#include "support/processes.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <httplib.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace actorflow;
using namespace actorflow::test;
using namespace actorflow::testing;
using namespace std::chrono_literals;

namespace {

/// The IPv4 addresses ("127.0.0.1", "0.0.0.0") that sockets listen on at `port`, from the
/// kernel's table (/proc/net/tcp: "0100007F:1F90" is 127.0.0.1:8080, the address's bytes in
/// memory order); an IPv6 listener shows as "ipv6".
std::set<std::string> listening_addresses(std::uint16_t port) {
  std::set<std::string> out;
  for (auto [table, v6] : {std::pair{"/proc/net/tcp", false}, std::pair{"/proc/net/tcp6", true}}) {
    std::ifstream in{table};
    std::string line;
    std::getline(in, line); // the header
    while (std::getline(in, line)) {
      std::istringstream fields{line};
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      auto colon = local.rfind(':');
      if (state != "0A" || colon == std::string::npos ||
          std::stoul(local.substr(colon + 1), nullptr, 16) != port)
        continue;
      if (v6) {
        out.insert("ipv6");
        continue;
      }
      auto address = static_cast<std::uint32_t>(std::stoul(local.substr(0, colon), nullptr, 16));
      std::uint8_t bytes[4];
      std::memcpy(bytes, &address, 4);
      out.insert(std::to_string(bytes[0]) + "." + std::to_string(bytes[1]) + "." +
                 std::to_string(bytes[2]) + "." + std::to_string(bytes[3]));
    }
  }
  return out;
}

/// A program started with --metrics-port `port` and `args`, once it said where its metrics are;
/// the addresses it then listens on at `port`.
std::set<std::string> metrics_listeners(const std::string& binary, std::vector<std::string> args,
                                        std::uint16_t port) {
  args.insert(args.end(), {"--metrics-port", std::to_string(port)});
  child_process program{binary, args};
  INFO(binary << " did not say where its metrics are");
  REQUIRE(program.wait_for_line("metrics on", 20s));
  return listening_addresses(port);
}

/// A cluster CA and certificates for `names` in `dir`; each certificate also names 127.0.0.1,
/// as an HTTPS client checks.
void make_certificates(const std::string& dir, const std::vector<std::string>& names) {
  std::vector<std::string> args{dir};
  args.insert(args.end(), names.begin(), names.end());
  child_process script{ACTORFLOW_CERT_SCRIPT, args, true, {"ACTORFLOW_CERT_SAN=IP:127.0.0.1"}};
  REQUIRE(script.wait_exit(60s) == 0);
}

std::string spec_on(const std::string& host, std::uint16_t port) {
  return "ps=" + host + ":" + std::to_string(port);
}

} // namespace

// Not "--metrics-port ..." first: ctest passes the name to the program, which would take it
// for a flag.
TEST_CASE("the metrics endpoint (--metrics-port) listens where the process's task does, on "
          "loopback for a process that is no task, and on every interface only when asked to",
          "[metrics]") {
  // 127.0.0.2 is loopback too, and no default anyone would pick: listening there is following
  // the spec. Ports are drawn afresh for every program.
  auto port = [] { return free_loopback_port(); };
  auto m = port();
  CHECK(metrics_listeners(ACTORFLOW_WORKER_BINARY,
                          {"--cluster", spec_on("127.0.0.2", port()), "--job", "ps"}, m) ==
        std::set<std::string>{"127.0.0.2"});
  m = port();
  CHECK(metrics_listeners(ACTORFLOW_WORKER_BINARY,
                          {"--cluster", spec_on("127.0.0.2", port()), "--job", "ps", "--bind", "0.0.0.0"},
                          m) == std::set<std::string>{"0.0.0.0"});
  m = port();
  CHECK(metrics_listeners(ACTORFLOW_MASTER_BINARY, {"--port", std::to_string(port())}, m) ==
        std::set<std::string>{"127.0.0.1"});
  // A between-graph worker's task at 127.0.0.2 (its ps never comes: it waits, serving metrics).
  m = port();
  auto between = "ps=127.0.0.1:" + std::to_string(port()) + ";worker=127.0.0.2:" + std::to_string(port());
  CHECK(metrics_listeners(ACTORFLOW_TRAIN_BINARY,
                          {"--cluster", between, "--job", "worker", "--task", "0", "--threads", "1"},
                          m) == std::set<std::string>{"127.0.0.2"});
  temp_dir dir;
  m = port();
  CHECK(metrics_listeners(ACTORFLOW_TRAIN_BINARY,
                          {"--local", "--model", "linreg", "--steps", "100000", "--threads", "1",
                           "--output-dir", dir.path()},
                          m) == std::set<std::string>{"127.0.0.1"});
}

TEST_CASE("with a cluster token --metrics-port answers 401 without the bearer token or with "
          "another, and the page with it", "[metrics]") {
  temp_dir dir;
  auto token_file = dir.path() + "/token";
  std::ofstream{token_file} << "a token only this cluster knows\n";
  auto metrics_port = free_loopback_port();
  child_process worker{ACTORFLOW_WORKER_BINARY,
                       {"--cluster", spec_on("127.0.0.1", free_loopback_port()), "--job", "ps",
                        "--token-file", token_file, "--metrics-port", std::to_string(metrics_port)}};
  REQUIRE(worker.wait_for_line("metrics on http://127.0.0.1:", 20s));
  // The page has the task's series once its devices exist.
  REQUIRE(worker.wait_for_line("serving on", 20s));
  httplib::Client client{"127.0.0.1", metrics_port};
  client.set_connection_timeout(5);
  client.set_read_timeout(5);
  auto get = [&](const std::string& path, const httplib::Headers& headers) {
    auto response = client.Get(path.c_str(), headers);
    REQUIRE(response);
    return *response;
  };

  auto without = get("/metrics", {});
  CHECK(without.status == 401);
  CHECK(without.get_header_value("WWW-Authenticate").rfind("Bearer", 0) == 0);
  CHECK(without.body.find("actorflow_") == std::string::npos);
  for (std::string wrong : {"Bearer a token only this cluster know", "Bearer a token only this cluster knows!",
                            "Bearer ", "Basic YTpi", "a token only this cluster knows",
                            "Bearera token only this cluster knows"}) {
    INFO(wrong);
    auto refused = get("/metrics", {{"Authorization", wrong}});
    CHECK(refused.status == 401);
    CHECK(refused.body.find("actorflow_") == std::string::npos);
  }
  // Other paths too: nothing is answered without the token.
  CHECK(get("/", {}).status == 401);

  auto with = get("/metrics", {{"Authorization", "Bearer a token only this cluster knows"}});
  CHECK(with.status == 200);
  CHECK(with.body.find("# TYPE actorflow_") != std::string::npos);
  // The scheme's name is case-insensitive (RFC 7235).
  CHECK(get("/metrics", {{"Authorization", "bearer a token only this cluster knows"}}).status == 200);
  CHECK(get("/elsewhere", {{"Authorization", "Bearer a token only this cluster knows"}}).status == 404);
}

TEST_CASE("with TLS --metrics-port serves HTTPS with the task's certificate to clients of the "
          "cluster CA, and nothing over plain HTTP", "[metrics]") {
  temp_dir dir;
  auto certs = dir.path() + "/certs", other = dir.path() + "/other";
  make_certificates(certs, {"ps0", "scraper"});
  make_certificates(other, {"intruder"});
  auto metrics_port = free_loopback_port();
  child_process worker{ACTORFLOW_WORKER_BINARY,
                       {"--cluster", spec_on("127.0.0.1", free_loopback_port()), "--job", "ps",
                        "--tls-cert", certs + "/ps0.pem", "--tls-key", certs + "/ps0.key",
                        "--tls-ca", certs + "/ca.pem", "--metrics-port", std::to_string(metrics_port)}};
  REQUIRE(worker.wait_for_line("metrics on https://127.0.0.1:" + std::to_string(metrics_port) + "/metrics", 20s));
  REQUIRE(worker.wait_for_line("serving on", 20s));
  // A TLS write to a connection the other side has closed raises SIGPIPE; this process must
  // see EPIPE instead (the worker above was started before, with the default disposition).
  struct ignored_sigpipe {
    void (*before)(int) = std::signal(SIGPIPE, SIG_IGN);
    ~ignored_sigpipe() { std::signal(SIGPIPE, before); }
  } sigpipe;

  // What a client with `cert` (none when empty) that trusts `ca` gets: the status, 0 for none.
  auto fetch = [&](const std::string& cert_dir, const std::string& cert, const std::string& ca_dir) {
    auto client = cert.empty() ? std::make_unique<httplib::SSLClient>("127.0.0.1", metrics_port)
                               : std::make_unique<httplib::SSLClient>("127.0.0.1", metrics_port,
                                                                      cert_dir + "/" + cert + ".pem",
                                                                      cert_dir + "/" + cert + ".key");
    client->set_ca_cert_path((ca_dir + "/ca.pem").c_str());
    client->enable_server_certificate_verification(true);
    client->set_connection_timeout(5);
    client->set_read_timeout(5);
    auto response = client->Get("/metrics");
    return std::pair{response ? response->status : 0, response ? response->body : std::string{}};
  };
  auto [status, page] = fetch(certs, "scraper", certs);
  CHECK(status == 200);
  CHECK(page.find("# TYPE actorflow_") != std::string::npos);
  // No client certificate, or one of another CA: refused in the handshake.
  CHECK(fetch(certs, "", certs).first == 0);
  CHECK(fetch(other, "intruder", certs).first == 0);
  // The server's certificate is the task's: a client trusting another CA refuses it.
  CHECK(fetch(certs, "scraper", other).first == 0);

  httplib::Client plain{"127.0.0.1", metrics_port};
  plain.set_connection_timeout(5);
  plain.set_read_timeout(5);
  auto answered = plain.Get("/metrics");
  CHECK_FALSE((answered && answered->status == 200));
  CHECK_FALSE((answered && answered->body.find("actorflow_") != std::string::npos));
}

TEST_CASE("a TLS certificate or key --metrics-port cannot use stops the program at start with "
          "exit code 2 and a line naming the file", "[metrics]") {
  temp_dir dir;
  auto certs = dir.path() + "/certs";
  make_certificates(certs, {"ps0", "other"});
  auto garbage = dir.path() + "/garbage.pem";
  std::ofstream{garbage} << "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n";
  struct bad_files {
    std::string cert, key, at_fault;
  };
  for (auto& bad : {bad_files{garbage, certs + "/ps0.key", garbage},
                    bad_files{certs + "/ps0.pem", garbage, garbage},
                    bad_files{certs + "/ps0.pem", certs + "/other.key", certs + "/other.key"}}) {
    std::vector<std::string> tls{"--tls-cert", bad.cert, "--tls-key", bad.key, "--tls-ca", certs + "/ca.pem",
                                 "--metrics-port", std::to_string(free_loopback_port())};
    auto with = [&](std::vector<std::string> args) {
      args.insert(args.end(), tls.begin(), tls.end());
      return args;
    };
    for (auto& [binary, args] :
         std::vector<std::pair<std::string, std::vector<std::string>>>{
           {ACTORFLOW_WORKER_BINARY, with({"--cluster", spec_on("127.0.0.1", free_loopback_port()), "--job", "ps"})},
           {ACTORFLOW_MASTER_BINARY, with({})},
           {ACTORFLOW_TRAIN_BINARY, with({"--local", "--model", "linreg", "--output-dir", dir.path() + "/out"})}}) {
      child_process program{binary, args};
      auto code = program.wait_exit(20s);
      auto said = program.stderr_text();
      INFO(binary << " with " << bad.cert << " and " << bad.key << ": " << said);
      CHECK(code == 2);
      CHECK(said.find(bad.at_fault) != std::string::npos);
      CHECK_FALSE(program.read_all_lines(1s).find("metrics on") != std::string::npos);
    }
  }
}

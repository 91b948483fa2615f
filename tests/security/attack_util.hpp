#pragma once
/// What the attack tests send: raw loopback connections, BASP headers, and waits for the
/// peer to hang up.

#include "actors/bulk_channel.hpp"
#include "actors/transport_security.hpp"
#include "support/processes.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace actorflow::testing {

/// A connection to `port` on loopback, required to succeed.
inline int connect_raw(std::uint16_t port) {
  int fd = connect_to_loopback(port);
  REQUIRE(fd >= 0);
  return fd;
}

/// The port of "host:port".
inline std::uint16_t port_of(const std::string& address) {
  return static_cast<std::uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
}

/// A raw connection to the bulk endpoint at `port` that it let in (its welcome byte read,
/// within 10 s).
inline int welcomed_connection(std::uint16_t port) {
  int fd = connect_raw(port);
  pollfd p{fd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, 10000) == 1);
  std::uint8_t welcome = 0;
  REQUIRE(::recv(fd, &welcome, 1, 0) == 1);
  REQUIRE(welcome == bulk_welcome);
  return fd;
}

/// Reads (and drops) what the peer sends until it closes the connection; false when it is
/// still open after `limit`. `received` counts the bytes.
inline bool closed_within(int fd, std::chrono::milliseconds limit, std::size_t* received = nullptr) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0)
      continue;
    char buffer[4096];
    auto n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0)
      return true;
    if (received != nullptr)
      *received += static_cast<std::size_t>(n);
  }
}

/// A BASP header (CAF 0.17: 32 bytes, integers in network order) announcing `payload_len`.
inline std::vector<std::uint8_t> basp_header(std::uint8_t operation, std::uint32_t payload_len) {
  std::vector<std::uint8_t> bytes(32, 0);
  bytes[0] = operation;
  auto big_endian = htonl(payload_len);
  std::memcpy(bytes.data() + 4, &big_endian, 4);
  return bytes;
}

inline void send_all(int fd, const std::vector<std::uint8_t>& bytes) {
  REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(bytes.size()));
}

/// A cluster CA with certificates for `names` in `dir` (deploy/tls/make-cluster-certs.sh).
inline void make_certificates(const std::string& dir, const std::vector<std::string>& names) {
  std::vector<std::string> args{dir};
  args.insert(args.end(), names.begin(), names.end());
  child_process script{ACTORFLOW_CERT_SCRIPT, args};
  REQUIRE(script.wait_exit(std::chrono::seconds(60)) == 0);
}

/// The TLS flags of a program that is `name` of the cluster whose certificates are in `dir`.
inline std::vector<std::string> tls_flags(const std::string& dir, const std::string& name) {
  return {"--tls-cert", dir + "/" + name + ".pem", "--tls-key", dir + "/" + name + ".key",
          "--tls-ca", dir + "/ca.pem"};
}

/// The same as environment variables (ACTORFLOW_TLS_*), for programs without TLS flags.
inline std::vector<std::string> tls_environment(const std::string& dir, const std::string& name,
                                                const std::string& ca_dir) {
  return {"ACTORFLOW_TLS_CERT=" + dir + "/" + name + ".pem",
          "ACTORFLOW_TLS_KEY=" + dir + "/" + name + ".key", "ACTORFLOW_TLS_CA=" + ca_dir + "/ca.pem"};
}

/// The same as transport settings: `name`'s certificate and key from `dir`, trusting the CA in
/// `ca_dir`, with a handshake bound of `handshake_timeout_ms`.
inline transport_security tls_of(const std::string& dir, const std::string& name,
                                 const std::string& ca_dir, std::int64_t handshake_timeout_ms) {
  transport_security s;
  s.tls_certificate = dir + "/" + name + ".pem";
  s.tls_key = dir + "/" + name + ".key";
  s.tls_ca = ca_dir + "/ca.pem";
  s.handshake_timeout_ms = handshake_timeout_ms;
  return s;
}

/// The README's mutual-TLS between-graph run on loopback: 1 ps (actorflow-worker, serving when
/// constructed) and 2 workers (actorflow-train with `worker_flags`, worker 1 started first),
/// with the certificates ps0, worker0 and worker1 in `certs`; worker k writes to
/// `output_prefix` + k.
struct tls_between_graph_run {
  std::vector<std::string> addresses; // ps, worker 0, worker 1
  std::unique_ptr<child_process> ps, chief, second;

  tls_between_graph_run(const std::string& certs, const std::string& output_prefix,
                        const std::vector<std::string>& worker_flags) {
    for (int i = 0; i < 3; ++i)
      addresses.push_back("127.0.0.1:" + std::to_string(free_loopback_port()));
    auto spec = "ps=" + addresses[0] + ";worker=" + addresses[1] + "," + addresses[2];
    auto with_tls = [&](std::vector<std::string> args, const std::string& name) {
      for (auto& flag : tls_flags(certs, name))
        args.push_back(flag);
      return args;
    };
    ps = std::make_unique<child_process>(
      ACTORFLOW_WORKER_BINARY,
      with_tls({"--cluster", spec, "--job", "ps", "--task", "0", "--threads", "1"}, "ps0"));
    REQUIRE(ps->wait_for_line("serving on", std::chrono::seconds(20)));
    auto worker = [&](int task) {
      std::vector<std::string> args{"--cluster", spec, "--job", "worker", "--task",
                                    std::to_string(task), "--threads", "1", "--output-dir",
                                    output_prefix + std::to_string(task)};
      args.insert(args.end(), worker_flags.begin(), worker_flags.end());
      return std::make_unique<child_process>(ACTORFLOW_TRAIN_BINARY,
                                             with_tls(args, "worker" + std::to_string(task)));
    };
    second = worker(1);
    chief = worker(0);
  }
};

} // namespace actorflow::testing

#pragma once
/// What the attack tests send: raw loopback connections, BASP headers, and waits for the
/// peer to hang up.

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
#include <string>
#include <vector>

namespace actorflow::testing {

/// A connection to `port` on loopback, required to succeed.
inline int connect_raw(std::uint16_t port) {
  int fd = connect_to_loopback(port);
  REQUIRE(fd >= 0);
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

} // namespace actorflow::testing

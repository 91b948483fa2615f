#pragma once
/// Raw loopback TCP (or the bulk channel's TLS code alone) between two threads: the baseline the
/// transfer benchmarks (bench_ps_bandwidth, bench_allreduce) measure in their own run.
///   double mbps = bench::raw_loopback_mbps(64 << 20, 16);
///   double each_way = bench::raw_loopback_duplex_mbps(64 << 20, 8);   // both ways at once

#include "bench_util.hpp"

#include "actors/bulk_socket.hpp"
#include "actors/transport_security.hpp"

#include <arpa/inet.h>
#include <chrono>
#include <cstdio>
#include <memory>
#include <netinet/in.h>
#include <optional>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace bench {

/// A socket listening on a free loopback port, its address in `address`; -1 on error (errno
/// says why).
inline int listen_on_loopback(sockaddr_in& address) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  address = sockaddr_in{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
      ::listen(listener, 1) != 0) {
    if (listener >= 0)
      ::close(listener);
    return -1;
  }
  return listener;
}

/// Raw loopback TCP: MB/s (1e6 bytes) of `bytes` sent `raw_rounds` times from one thread to
/// another with large write() calls, median of three runs; 0 on error.
/// With `server` and `client` (TLS settings of two members of one cluster CA), the same through
/// the bulk channel's own TLS code (bulk_detail: same contexts, ciphers and calls) and nothing
/// else of actorflow: the most TLS gives on this machine, beside which the _tls figures stand.
inline double raw_loopback_mbps(std::size_t bytes, int raw_rounds,
                                const actorflow::transport_security* server = nullptr,
                                const actorflow::transport_security* client = nullptr) {
  using namespace actorflow::bulk_detail;
  std::shared_ptr<ssl_ctx_st> server_context, client_context;
  if (server != nullptr) {
    auto made_server = make_tls_context(*server, true);
    auto made_client = make_tls_context(*client, false);
    if (!made_server || !made_client) {
      std::fprintf(stderr, "raw tls: %s\n",
                   (!made_server ? made_server.error() : made_client.error()).to_string().c_str());
      return 0;
    }
    server_context = *made_server;
    client_context = *made_client;
  }
  const auto handshake = std::chrono::seconds(10);
  // TLS on `fd` when `context` is set (an empty one for plain TCP); nothing when it failed.
  auto tls_on = [&](ssl_ctx_st* context, int fd,
                    bool accepting) -> std::optional<std::shared_ptr<ssl_st>> {
    if (context == nullptr)
      return std::shared_ptr<ssl_st>{};
    auto started = start_tls(context, fd, accepting, handshake, handshake);
    if (!started) {
      std::fprintf(stderr, "raw tls: %s\n", started.error().to_string().c_str());
      return std::nullopt;
    }
    return *started;
  };
  std::vector<double> runs;
  for (int run = 0; run < 3; ++run) {
    sockaddr_in address{};
    int listener = listen_on_loopback(address);
    if (listener < 0) {
      std::perror("raw tcp: listen");
      return 0;
    }
    const std::size_t total = bytes * static_cast<std::size_t>(raw_rounds);
    std::size_t received = 0;
    std::thread receiver{[&] {
      int fd = ::accept(listener, nullptr, nullptr);
      if (fd < 0)
        return;
      auto tls = tls_on(server_context.get(), fd, true);
      if (!tls) {
        ::close(fd);
        return;
      }
      std::vector<char> buffer(bytes);
      bool stalled = false;
      for (std::size_t got = 0; received < total; received += got)
        if (!read_exact(fd, buffer.data(), buffer.size(), got, handshake, stalled, tls->get()))
          break;
      ::close(fd);
    }};
    int sender = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(sender, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      std::perror("raw tcp: connect");
      ::close(listener);
      ::shutdown(sender, SHUT_RDWR);
      receiver.detach();
      return 0;
    }
    set_tcp_options(sender);
    auto tls = tls_on(client_context.get(), sender, false);
    if (!tls) {
      ::close(sender);
      ::close(listener);
      receiver.join();
      return 0;
    }
    std::vector<char> payload(bytes, 1);
    auto seconds = bench::time_seconds([&] {
      for (int round = 0; round < raw_rounds; ++round) {
        if (*tls) {
          std::size_t written = 0;
          if (!write_all_tls(tls->get(), payload.data(), payload.size(), written, "raw tls").ok())
            return;
          continue;
        }
        for (std::size_t sent = 0; sent < payload.size();) {
          auto n = ::write(sender, payload.data() + sent, payload.size() - sent);
          if (n <= 0)
            return;
          sent += static_cast<std::size_t>(n);
        }
      }
      receiver.join();
    });
    if (receiver.joinable())
      receiver.join();
    ::close(sender);
    ::close(listener);
    if (received != total) {
      std::fprintf(stderr, "raw tcp: received %zu of %zu bytes\n", received, total);
      return 0;
    }
    runs.push_back(static_cast<double>(bytes) / (seconds / raw_rounds) / 1e6);
  }
  return bench::median(runs);
}

/// Raw loopback TCP both ways at once, as a 2-member ring all-reduce moves its data: one
/// connection, each end writing `bytes` x `rounds` with large write() calls while it reads as
/// much from the other; MB/s (1e6 bytes) of the slower direction, median of three runs; 0 on
/// error. On a machine with fewer cores than these four threads, the kernel's copies of both
/// directions share them: the most a 2-member all-reduce can move each way.
inline double raw_loopback_duplex_mbps(std::size_t bytes, int rounds) {
  std::vector<double> runs;
  for (int run = 0; run < 3; ++run) {
    sockaddr_in address{};
    int listener = listen_on_loopback(address);
    if (listener < 0) {
      std::perror("raw tcp duplex: listen");
      return 0;
    }
    int dialled = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(dialled, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      std::perror("raw tcp duplex: connect");
      ::close(listener);
      ::close(dialled);
      return 0;
    }
    int accepted = ::accept(listener, nullptr, nullptr);
    ::close(listener);
    if (accepted < 0) {
      ::close(dialled);
      return 0;
    }
    actorflow::bulk_detail::set_tcp_options(dialled);
    actorflow::bulk_detail::set_tcp_options(accepted);
    const std::size_t total = bytes * static_cast<std::size_t>(rounds);
    // Per end: seconds until its reader had everything.
    double seconds[2] = {0, 0};
    std::size_t received[2] = {0, 0};
    auto started = std::chrono::steady_clock::now();
    auto end = [&](int which, int fd) {
      std::thread writer{[&, fd] {
        std::vector<char> payload(bytes, 1);
        for (int round = 0; round < rounds; ++round)
          for (std::size_t sent = 0; sent < payload.size();) {
            auto n = ::write(fd, payload.data() + sent, payload.size() - sent);
            if (n <= 0)
              return;
            sent += static_cast<std::size_t>(n);
          }
      }};
      std::vector<char> buffer(bytes);
      while (received[which] < total) {
        auto n = ::read(fd, buffer.data(), buffer.size());
        if (n <= 0)
          break;
        received[which] += static_cast<std::size_t>(n);
      }
      seconds[which] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      writer.join();
    };
    std::thread other{[&] { end(1, accepted); }};
    end(0, dialled);
    other.join();
    ::close(dialled);
    ::close(accepted);
    if (received[0] != total || received[1] != total) {
      std::fprintf(stderr, "raw tcp duplex: received %zu and %zu of %zu bytes\n", received[0],
                   received[1], total);
      return 0;
    }
    runs.push_back(static_cast<double>(total) / std::max(seconds[0], seconds[1]) / 1e6);
  }
  return bench::median(runs);
}

} // namespace bench

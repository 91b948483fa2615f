// The bulk channel's sockets (actors/bulk_socket.hpp): connect with a bound, read with
// bounded waits, notice a peer's hang-up.
#include "actors/bulk_socket.hpp"

#include "actors/cluster_spec.hpp"

#include <arpa/inet.h>
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <fcntl.h>

namespace actorflow::bulk_detail {

std::string system_error(const char* what) { return std::string{what} + ": " + std::strerror(errno); }

/// Waits until `fd` has bytes (or its end) to read; false after `timeout` without any.
bool wait_readable(int fd, std::chrono::milliseconds timeout) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    auto ready = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(timeout.count(), INT_MAX)));
    if (ready > 0)
      return true;
    if (ready == 0)
      return false;
    if (errno != EINTR)
      return true; // let recv report the error
  }
}

/// Reads exactly `size` bytes, each wait for more bounded by `stall`; `got` says how many
/// arrived before an end, error or stall (`stalled` set).
bool read_exact(int fd, void* data, std::size_t size, std::size_t& got,
                std::chrono::milliseconds stall, bool& stalled) {
  auto* p = static_cast<char*>(data);
  got = 0;
  stalled = false;
  while (got < size) {
    if (!wait_readable(fd, stall)) {
      stalled = true;
      return false;
    }
    auto n = ::recv(fd, p + got, size - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (n == 0) {
      return false;
    } else if (errno != EINTR) {
      return false;
    }
  }
  return true;
}

/// Whether the peer of a connection it never writes to has closed it: any readable state (an
/// end, a reset) means so.
bool peer_hung_up(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void set_no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/// A connected TCP socket to host:port, or an error; registers the socket in `fd_slot` (under
/// `mutex`) before connecting so that a concurrent shutdown can cut the connect short.
result<int> connect_to(const std::string& address, std::mutex& mutex, int& fd_slot,
                       const bool& closing) {
  auto split = parse_host_port(address);
  if (!split)
    return split.error();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  auto port = std::to_string(split->port);
  if (int rc = ::getaddrinfo(split->host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return make_error(errc::unavailable, "cannot resolve '" + split->host + "': " + ::gai_strerror(rc));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard{found, ::freeaddrinfo};
  std::string last_error = "no address";
  for (auto* a = found; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      last_error = system_error("socket");
      continue;
    }
    {
      std::lock_guard<std::mutex> lock{mutex};
      if (closing) {
        ::close(fd);
        return make_error(errc::unavailable, "bulk sender closed");
      }
      fd_slot = fd;
    }
    auto forget = [&] {
      std::lock_guard<std::mutex> lock{mutex};
      fd_slot = -1;
      ::close(fd);
    };
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int ready;
      do
        ready = ::poll(&p, 1, connect_timeout_ms);
      while (ready < 0 && errno == EINTR);
      if (ready == 0) {
        last_error = "connect: timed out after " + std::to_string(connect_timeout_ms) + " ms";
        forget();
        continue;
      }
      int error = 0;
      socklen_t length = sizeof error;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
      if (ready < 0 || error != 0) {
        errno = ready < 0 ? errno : error;
        last_error = system_error("connect");
        forget();
        continue;
      }
      rc = 0;
    }
    if (rc != 0) {
      last_error = system_error("connect");
      forget();
      continue;
    }
    int flags = ::fcntl(fd, F_GETFL, 0);
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    set_no_delay(fd);
    return fd;
  }
  return make_error(errc::unavailable, last_error);
}


} // namespace actorflow::bulk_detail

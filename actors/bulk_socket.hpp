#pragma once
/// The bulk channel's socket helpers, shared by its endpoint and sender (internal to actors/).
///   auto fd = bulk_detail::connect_to("127.0.0.1:4000", mutex, slot, closing);
///   if (!bulk_detail::read_exact(fd, buf, n, got, 30s, stalled)) ...

#include "graph/status.hpp"

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>

namespace actorflow::bulk_detail {

/// Connecting to an endpoint that does not answer fails after this long.
inline constexpr int connect_timeout_ms = 10000;

/// "<what>: <strerror(errno)>".
std::string system_error(const char* what);

/// Waits until `fd` has bytes (or its end) to read; false after `timeout` without any.
bool wait_readable(int fd, std::chrono::milliseconds timeout);

/// Reads exactly `size` bytes, each wait for more bounded by `stall`; `got` says how many
/// arrived before an end, error or stall (`stalled` set).
bool read_exact(int fd, void* data, std::size_t size, std::size_t& got,
                std::chrono::milliseconds stall, bool& stalled);

/// Whether the peer of a connection this side never reads from has closed it.
bool peer_hung_up(int fd);

void set_no_delay(int fd);

/// A connected TCP socket to host:port, or an error; registers the socket in `fd_slot` (under
/// `mutex`) before connecting so that a concurrent shutdown can cut the connect short.
result<int> connect_to(const std::string& address, std::mutex& mutex, int& fd_slot,
                       const bool& closing);

} // namespace actorflow::bulk_detail

#pragma once
/// The bulk channel's socket helpers, shared by its endpoint and sender (internal to actors/).
///   auto fd = bulk_detail::connect_to("127.0.0.1:4000", mutex, slot, closing);
///   if (!bulk_detail::read_exact(fd, buf, n, got, 30s, stalled)) ...

#include "actors/transport_security.hpp"
#include "graph/status.hpp"

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

struct ssl_st;
struct ssl_ctx_st;

namespace actorflow::bulk_detail {

/// Connecting to an endpoint that does not answer fails after this long.
inline constexpr int connect_timeout_ms = 10000;

/// A connection whose sent bytes stay unacknowledged this long is aborted by the kernel
/// (TCP_USER_TIMEOUT): a peer cut off by the network is then noticed, and a later connection
/// to it is a fresh one instead of a write queued behind the dead one's retransmissions.
inline constexpr int unacknowledged_timeout_ms = 15000;

/// TCP_USER_TIMEOUT of unacknowledged_timeout_ms on `fd` (every CAF and bulk connection).
void abort_when_unacknowledged(int fd);

/// "<what>: <strerror(errno)>".
std::string system_error(const char* what);

/// Waits until `fd` has bytes (or its end) to read, or `tls` has decrypted bytes buffered;
/// false after `timeout` without any.
bool wait_readable(int fd, std::chrono::milliseconds timeout, ssl_st* tls = nullptr);

/// Reads exactly `size` bytes (through `tls` when given), each wait for more bounded by
/// `stall`; `got` says how many arrived before an end, error or stall (`stalled` set).
bool read_exact(int fd, void* data, std::size_t size, std::size_t& got,
                std::chrono::milliseconds stall, bool& stalled, ssl_st* tls = nullptr);

/// Writes all `size` bytes through `tls`, counting in `written`; an error names `address`.
status write_all_tls(ssl_st* tls, const void* data, std::size_t size, std::size_t& written,
                     const std::string& address);

/// The TLS context of one side of the bulk channel under `security` (mutual: this process's
/// certificate, peers' checked against the cluster CA); null when it asks for no TLS. Errors
/// name the file at fault.
result<std::shared_ptr<ssl_ctx_st>> make_tls_context(const transport_security& security,
                                                     bool accepting);

/// TLS on connected, blocking `fd`, the handshake bounded by `timeout`; reads then wait at most
/// `stall` inside a record. Its writes (records, handshake, alerts) pass MSG_NOSIGNAL: a closed
/// connection fails them with EPIPE on any thread, never raising SIGPIPE. An error says why the
/// peer was refused (its certificate); resource_exhausted when a connecting side was refused
/// by an endpoint at its connection cap (bulk_full instead of a handshake).
result<std::shared_ptr<ssl_st>> start_tls(ssl_ctx_st* context, int fd, bool accepting,
                                          std::chrono::milliseconds timeout,
                                          std::chrono::milliseconds stall);

/// OpenSSL's read buffer on the bulk channel: several 16 KiB records per recv.
inline constexpr std::size_t tls_read_buffer_bytes = std::size_t{64} << 10;

/// Whether this kernel offers the 'tls' upper-layer protocol (kernel TLS): it is listed in
/// /proc/sys/net/ipv4/tcp_available_ulp.
bool kernel_offers_tls();

/// Whether the kernel encrypts the records `tls` sends (OpenSSL handed them to kernel TLS).
bool kernel_encrypts(ssl_st* tls);

/// Says once per process, on stderr and why, that TLS records are encrypted in user space,
/// when `tls` (after its handshake) does not send through kernel TLS; start_tls calls it.
/// Any thread.
void note_record_layer(ssl_st* tls);

/// How many times note_record_layer has said so: 0 or 1 (for tests).
std::size_t user_space_tls_notes();

/// Whether the peer of a connection this side never reads from has closed it.
bool peer_hung_up(int fd);

/// The address of a connected socket's peer without its port ("10.0.0.2"); "a peer" when the
/// socket has none.
std::string peer_host(int fd);

/// TCP_NODELAY (frames go out whole at once) and abort_when_unacknowledged.
void set_tcp_options(int fd);

/// TCP_CORK on `fd` (partial segments wait) or off (what waits goes out now).
void set_corked(int fd, bool corked);

/// A connected TCP socket to host:port, or an error; registers the socket in `fd_slot` (under
/// `mutex`) before connecting so that a concurrent shutdown can cut the connect short.
result<int> connect_to(const std::string& address, std::mutex& mutex, int& fd_slot,
                       const bool& closing);

} // namespace actorflow::bulk_detail

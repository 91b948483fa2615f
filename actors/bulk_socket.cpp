// The bulk channel's sockets (actors/bulk_socket.hpp): connect with a bound, read with
// bounded waits, notice a peer's hang-up.
#include "actors/bulk_socket.hpp"

#include "actors/bulk_channel.hpp"
#include "actors/cluster_spec.hpp"
#include "actors/sigpipe.hpp"

#include <caf/io/network/native_socket.hpp>

#include <arpa/inet.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
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

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace actorflow::bulk_detail {

std::string system_error(const char* what) { return std::string{what} + ": " + std::strerror(errno); }

bool wait_readable(int fd, std::chrono::milliseconds timeout, ssl_st* tls) {
  // Records OpenSSL has read ahead (decrypted or not) need no poll.
  if (tls != nullptr && SSL_has_pending(tls) == 1)
    return true;
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

bool read_exact(int fd, void* data, std::size_t size, std::size_t& got,
                std::chrono::milliseconds stall, bool& stalled, ssl_st* tls) {
  auto* p = static_cast<char*>(data);
  got = 0;
  stalled = false;
  while (got < size) {
    if (!wait_readable(fd, stall, tls)) {
      stalled = true;
      return false;
    }
    if (tls != nullptr) {
      auto want = static_cast<int>(std::min<std::size_t>(size - got, INT_MAX));
      // SSL_get_error reads this thread's error queue, which an earlier connection may have
      // left filled: without this a would-block would read as a failure.
      ERR_clear_error();
      errno = 0;
      auto n = SSL_read(tls, p + got, want);
      auto read_errno = errno;
      if (n > 0) {
        got += static_cast<std::size_t>(n);
        continue;
      }
      auto error = SSL_get_error(tls, n);
      // SO_RCVTIMEO (start_tls sets it to the stall bound) ran out inside a record: the socket
      // BIO reports that as "want read", and the part of the record OpenSSL holds keeps
      // SSL_has_pending true, so waiting again would spin on the same stall forever.
      auto timed_out = read_errno == EAGAIN || read_errno == EWOULDBLOCK;
      if ((error == SSL_ERROR_WANT_READ || error == SSL_ERROR_SYSCALL) && timed_out) {
        stalled = true;
        return false;
      }
      if (error == SSL_ERROR_WANT_READ || (error == SSL_ERROR_SYSCALL && read_errno == EINTR))
        continue;
      errno = read_errno;
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

void set_tcp_options(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  abort_when_unacknowledged(fd);
}

void set_corked(int fd, bool corked) {
  int on = corked ? 1 : 0;
  ::setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof on);
}

void abort_when_unacknowledged(int fd) {
  unsigned int limit = unacknowledged_timeout_ms;
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &limit, sizeof limit);
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
    set_tcp_options(fd);
    return fd;
  }
  return make_error(errc::unavailable, last_error);
}


status write_all_tls(ssl_st* tls, const void* data, std::size_t size, std::size_t& written,
                     const std::string& address) {
  auto* p = static_cast<const char*>(data);
  std::size_t done = 0;
  while (done < size) {
    auto want = static_cast<int>(std::min<std::size_t>(size - done, std::size_t{1} << 30));
    ERR_clear_error(); // as in read_exact
    auto n = SSL_write(tls, p + done, want);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      written += static_cast<std::size_t>(n);
      continue;
    }
    auto error = SSL_get_error(tls, n);
    if (error == SSL_ERROR_WANT_WRITE || (error == SSL_ERROR_SYSCALL && errno == EINTR))
      continue;
    return make_error(errc::unavailable, "writing (TLS) to bulk endpoint " + address + " after " +
                                           std::to_string(written) + " bytes: " +
                                           (error == SSL_ERROR_SYSCALL ? std::strerror(errno)
                                                                        : "TLS error " + std::to_string(error)));
  }
  return {};
}

namespace {

std::string tls_errors() {
  std::string out;
  while (auto code = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    out += (out.empty() ? "" : "; ") + std::string{text};
  }
  return out.empty() ? std::string{"no detail"} : out;
}

/// Under kernel TLS the socket BIO's own write must run: it sends records other than
/// application data (alerts, key updates) with their type in a control message, which a plain
/// send would turn into application data. It writes with write(2), so SIGPIPE is blocked on
/// this thread for the call, and one it raised is taken back before the mask is restored.
int kernel_tls_write(BIO* bio, const char* data, int size) {
  int n = 0, write_errno = 0;
  {
    sigpipe_blocked during_write;
    n = BIO_meth_get_write(BIO_s_socket())(bio, data, size);
    write_errno = errno;
  }
  errno = write_errno; // the unblocking may have touched errno
  return n;
}

/// OpenSSL's socket BIO writes with write(2), which raises SIGPIPE when the connection is
/// closed for writing (the peer went, or our own shutdown: a reader's SSL_read that then meets
/// the end answers with an alert). This BIO sends with MSG_NOSIGNAL, like the plain path, on
/// whatever thread writes; everything else is the socket BIO's.
int send_without_sigpipe(BIO* bio, const char* data, int size) {
#ifndef OPENSSL_NO_KTLS
  if (BIO_get_ktls_send(bio) != 0)
    return kernel_tls_write(bio, data, size);
#endif
  int fd = -1;
  BIO_get_fd(bio, &fd);
  errno = 0;
  auto n = static_cast<int>(::send(fd, data, static_cast<std::size_t>(size), MSG_NOSIGNAL));
  BIO_clear_retry_flags(bio);
  if (n <= 0 && BIO_sock_should_retry(n) != 0)
    BIO_set_retry_write(bio);
  return n;
}

/// The socket BIO with send_without_sigpipe; made once, kept until exit (null when OpenSSL
/// could not make it).
BIO_METHOD* socket_method_without_sigpipe() {
  static BIO_METHOD* method = [] {
    const BIO_METHOD* socket = BIO_s_socket();
    auto* made = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                              "socket without SIGPIPE");
    if (made == nullptr)
      return made;
    BIO_meth_set_write(made, send_without_sigpipe);
    BIO_meth_set_read(made, BIO_meth_get_read(socket));
    BIO_meth_set_puts(made, BIO_meth_get_puts(socket));
    BIO_meth_set_ctrl(made, BIO_meth_get_ctrl(socket));
    BIO_meth_set_create(made, BIO_meth_get_create(socket));
    BIO_meth_set_destroy(made, BIO_meth_get_destroy(socket));
    return made;
  }();
  return method;
}

void set_receive_timeout(int fd, std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/// The first byte a connecting side's handshake read, so that a failed handshake can tell an
/// endpoint's bulk_full (sent in the clear before TLS) from a refusal by TLS.
struct first_byte {
  bool seen = false;
  std::uint8_t value = 0;
};

long note_first_byte(BIO* bio, int operation, const char* data, std::size_t, int, long, int rc,
                     std::size_t* processed) {
  auto* first = reinterpret_cast<first_byte*>(BIO_get_callback_arg(bio));
  if (first != nullptr && !first->seen && operation == (BIO_CB_READ | BIO_CB_RETURN) && rc > 0 &&
      processed != nullptr && *processed > 0) {
    first->seen = true;
    first->value = static_cast<std::uint8_t>(data[0]);
  }
  return rc;
}

} // namespace

result<std::shared_ptr<ssl_ctx_st>> make_tls_context(const transport_security& security,
                                                     bool accepting) {
  if (!security.tls())
    return std::shared_ptr<ssl_ctx_st>{};
  std::shared_ptr<ssl_ctx_st> context{SSL_CTX_new(accepting ? TLS_server_method() : TLS_client_method()),
                                      SSL_CTX_free};
  if (!context)
    return make_error(errc::internal, "bulk channel: cannot make a TLS context: " + tls_errors());
  auto* ctx = context.get();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (SSL_CTX_use_certificate_chain_file(ctx, security.tls_certificate.c_str()) != 1)
    return make_error(errc::invalid_argument, "bulk channel: cannot load TLS certificate '" +
                                                security.tls_certificate + "': " + tls_errors());
  if (SSL_CTX_use_PrivateKey_file(ctx, security.tls_key.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1)
    return make_error(errc::invalid_argument, "bulk channel: cannot load TLS key '" +
                                                security.tls_key + "': " + tls_errors());
  if (SSL_CTX_load_verify_locations(ctx, security.tls_ca.c_str(), nullptr) != 1)
    return make_error(errc::invalid_argument, "bulk channel: cannot load TLS CA '" +
                                                security.tls_ca + "': " + tls_errors());
  // Mutual: each side's certificate must chain to the cluster CA.
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  // No session tickets: the sender tells a closed kept connection by its socket turning
  // readable, which a ticket arriving after the handshake would fake.
  SSL_CTX_set_num_tickets(ctx, 0);
  // AES-128-GCM first: the bulk channel's cost is the cipher's throughput.
  SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
  // No SSL_MODE_RELEASE_BUFFERS: a busy connection would free and allocate them per record.
  SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY);
  // Reads whole socket buffers rather than one record header and body at a time, several
  // records per recv where they have arrived: the default buffer holds one, so each 16 KiB
  // record cost a recv (and mostly a poll). Measured over 512 MiB of raw TLS: 32794 recvs
  // with the default, 23565 with 64 KiB (the reader mostly waits for the writer); 1 MiB
  // cost twice the user time (cache misses).
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_default_read_buffer_len(ctx, tls_read_buffer_bytes);
  // Kernel TLS where the kernel has it: records are then encrypted in the kernel (its tls
  // upper-layer protocol), and OpenSSL falls back to user space by itself where it has not;
  // note_record_layer says which once.
  SSL_CTX_set_options(ctx, SSL_OP_ENABLE_KTLS);
  return context;
}

result<std::shared_ptr<ssl_st>> start_tls(ssl_ctx_st* context, int fd, bool accepting,
                                          std::chrono::milliseconds timeout,
                                          std::chrono::milliseconds stall) {
  std::shared_ptr<ssl_st> tls{SSL_new(context), SSL_free};
  auto* method = socket_method_without_sigpipe();
  BIO* socket = tls && method != nullptr ? BIO_new(method) : nullptr;
  if (socket == nullptr)
    return make_error(errc::internal, "bulk channel: cannot start TLS: " + tls_errors());
  BIO_set_fd(socket, fd, BIO_NOCLOSE);
  // The session owns the BIO from here (one reference for both directions).
  SSL_set_bio(tls.get(), socket, socket);
  set_receive_timeout(fd, timeout);
  first_byte first;
  if (!accepting) {
    BIO_set_callback_arg(socket, reinterpret_cast<char*>(&first));
    BIO_set_callback_ex(socket, note_first_byte);
  }
  ERR_clear_error();
  auto rc = accepting ? SSL_accept(tls.get()) : SSL_connect(tls.get());
  if (!accepting) {
    BIO_set_callback_ex(socket, nullptr);
    BIO_set_callback_arg(socket, nullptr);
  }
  if (rc != 1 && first.seen && first.value == bulk_full) {
    ERR_clear_error();
    return make_error(errc::resource_exhausted, "its connection cap is full");
  }
  if (rc != 1) {
    auto why = tls_errors();
    if (auto verified = SSL_get_verify_result(tls.get()); verified != X509_V_OK)
      why = std::string{"the peer's certificate is not of the cluster CA ("} +
            X509_verify_cert_error_string(verified) + ")";
    return make_error(errc::permission_denied, "TLS handshake failed: " + why);
  }
  set_receive_timeout(fd, stall);
  note_record_layer(tls.get());
  return tls;
}

bool kernel_offers_tls() {
  std::ifstream available{"/proc/sys/net/ipv4/tcp_available_ulp"};
  std::string name;
  while (available >> name)
    if (name == "tls")
      return true;
  return false;
}

bool kernel_encrypts(ssl_st* tls) {
#ifndef OPENSSL_NO_KTLS
  return BIO_get_ktls_send(SSL_get_wbio(tls)) != 0;
#else
  (void)tls;
  return false;
#endif
}

namespace {
std::atomic<std::size_t> user_space_notes{0};
} // namespace

std::size_t user_space_tls_notes() { return user_space_notes.load(); }

void note_record_layer(ssl_st* tls) {
  if (kernel_encrypts(tls))
    return;
  static std::once_flag once;
  std::call_once(once, [] {
    auto why = kernel_offers_tls()
                 ? std::string{"OpenSSL did not hand this connection's records to the kernel (its "
                               "build, the cipher or the version)"}
                 : std::string{"this kernel offers no 'tls' upper-layer protocol "
                               "(/proc/sys/net/ipv4/tcp_available_ulp)"};
    std::cerr << "actorflow: bulk channel: kernel TLS unavailable: " + why +
                   "; TLS records are encrypted in user space\n"
              << std::flush;
    ++user_space_notes;
  });
}

std::string peer_host(int fd) {
  auto host = caf::io::network::remote_addr_of_fd(fd);
  return host ? *host : std::string{"a peer"};
}

} // namespace actorflow::bulk_detail

// The bulk channel's sending side (actors/bulk_channel.hpp): a connection, writer and queue
// per destination.
#include "actors/bulk_channel.hpp"

#include "actors/bulk_socket.hpp"
#include "actors/traffic_metrics.hpp"

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

namespace actorflow {

using namespace bulk_detail;

namespace {

/// Why an endpoint at its connection cap refused this process (it said so with bulk_full).
status refused_at_cap(const std::string& address) {
  return make_error(errc::resource_exhausted,
                    "bulk endpoint " + address + " refused this process: its task's bulk connection cap is full (" +
                      std::to_string(bulk_endpoint::max_connections) +
                      " connections open, none idle between frames long enough to make room)");
}

} // namespace


bulk_sender::bulk_sender(const transport_security& security, credits limits)
    : credits_(limits), handshake_timeout_ms_(security.handshake_timeout_ms) {
  if (security.token())
    preamble_ = make_token_preamble(security.cluster_token);
  auto context = make_tls_context(security, false);
  if (context)
    tls_context_ = std::move(*context);
  else
    tls_error_ = context.error();
}

bulk_sender::~bulk_sender() { close(); }

void bulk_sender::send(const std::string& address, std::int64_t step_id, std::string key,
                       tensor value, completion done) {
  destination* d = nullptr;
  {
    std::lock_guard<std::mutex> lock{mutex_};
    if (!closed_) {
      auto& slot = destinations_[address];
      if (!slot) {
        slot = std::make_unique<destination>();
        slot->address = address;
        slot->sent_bytes = &sent_to(address, "bulk");
        auto* raw = slot.get();
        slot->writer = std::thread{[this, raw] { write_loop(*raw); }};
      }
      d = slot.get();
      // Counted before mutex_ is let go: close() keeps d until its waiters have left.
      std::lock_guard<std::mutex> queue_lock{d->mutex};
      ++d->waiting;
    }
  }
  if (d == nullptr) {
    done(make_error(errc::unavailable, "bulk sender closed"));
    return;
  }
  auto bytes = static_cast<std::uint64_t>(value.bytes());
  status refused;
  {
    std::unique_lock<std::mutex> lock{d->mutex};
    bool fits = d->room.wait_for(lock, credits_.wait, [&] {
      return d->closing || d->queued_bytes == 0 || d->queued_bytes + bytes <= credits_.bytes;
    });
    --d->waiting;
    if (d->closing) {
      refused = make_error(errc::unavailable, "bulk sender closed before sending to " + address);
    } else if (!fits) {
      refused = make_error(errc::deadline_exceeded,
                           "bulk channel to " + address + ": no room for " + std::to_string(bytes) +
                             " bytes within " + std::to_string(credits_.wait.count()) + " ms (" +
                             std::to_string(d->queued_bytes) +
                             " bytes queued: the receiver reads too slowly or not at all)");
    } else {
      d->queued_bytes += bytes;
      auto peak = peak_queued_.load();
      while (d->queued_bytes > peak && !peak_queued_.compare_exchange_weak(peak, d->queued_bytes)) {
      }
      d->queue.push_back(item{step_id, std::move(key), std::move(value), std::move(done)});
      d->wake.notify_one();
    }
    // Under the lock: once it is let go, close() may destroy d.
    d->room.notify_all();
  }
  if (!refused.ok())
    done(refused);
}

void bulk_sender::close() {
  std::map<std::string, std::unique_ptr<destination>> destinations;
  {
    std::lock_guard<std::mutex> lock{mutex_};
    closed_ = true;
    destinations.swap(destinations_);
  }
  for (auto& [address, d] : destinations) {
    {
      std::lock_guard<std::mutex> lock{d->mutex};
      d->closing = true;
      if (d->fd >= 0)
        ::shutdown(d->fd, SHUT_RDWR);
    }
    d->wake.notify_one();
    d->room.notify_all();
  }
  for (auto& [address, d] : destinations) {
    d->writer.join();
    std::unique_lock<std::mutex> lock{d->mutex};
    d->room.notify_all();
    d->room.wait(lock, [&] { return d->waiting == 0; });
  }
}

void bulk_sender::write_loop(destination& d) {
  for (;;) {
    item it;
    {
      std::unique_lock<std::mutex> lock{d.mutex};
      d.wake.wait(lock, [&] { return d.closing || !d.queue.empty(); });
      if (d.closing)
        break;
      it = std::move(d.queue.front());
      d.queue.pop_front();
    }
    auto bytes = static_cast<std::uint64_t>(it.value.bytes());
    auto s = write_item(d, it);
    {
      // The frame is in the socket (or failed): its bytes no longer count against the credit.
      std::lock_guard<std::mutex> lock{d.mutex};
      d.queued_bytes -= bytes;
    }
    d.room.notify_all();
    if (s.ok()) {
      ++sent_;
    } else {
      // The stream may hold half a frame: start over on a new connection next time.
      drop_connection(d, -1);
    }
    // Drop our hold on the tensor before reporting, so the sender's memory is free by then.
    it.value = tensor{};
    it.done(s);
  }
  std::deque<item> left;
  {
    std::lock_guard<std::mutex> lock{d.mutex};
    left.swap(d.queue);
  }
  drop_connection(d, -1);
  for (auto& it : left)
    it.done(make_error(errc::unavailable, "bulk sender closed before sending to " + d.address));
}

status bulk_sender::write_item(destination& d, const item& it) {
  auto header = encode_bulk_frame_header(it.step_id, it.key, it.value);
  if (!header)
    return header.error();
  // A kept connection the endpoint has reset since (it restarted, or timed us out) fails on the
  // first write with nothing written: the frame then goes again, once, on a fresh connection.
  for (int attempt = 0;; ++attempt) {
    int fd;
    {
      std::lock_guard<std::mutex> lock{d.mutex};
      fd = d.fd;
    }
    bool reused = fd >= 0;
    if (reused && peer_hung_up(fd)) {
      // The endpoint closed it (idle too long, or restarted): a write would vanish into it.
      drop_connection(d, fd);
      reused = false;
    }
    if (!reused) {
      if (!tls_error_.ok())
        return tls_error_;
      auto connected = connect_to(d.address, d.mutex, d.fd, d.closing);
      if (!connected)
        return connected.error().with_context("cannot connect to bulk endpoint " + d.address);
      fd = *connected;
      if (tls_context_) {
        auto started = start_tls(tls_context_.get(), fd, false,
                                 std::chrono::milliseconds(handshake_timeout_ms_),
                                 bulk_endpoint_timeouts{}.stall);
        if (!started) {
          drop_connection(d, fd);
          if (started.error().code() == errc::resource_exhausted)
            return refused_at_cap(d.address);
          return started.error().with_context("bulk endpoint " + d.address);
        }
        std::lock_guard<std::mutex> lock{d.mutex};
        d.tls = std::move(*started);
      }
      if (preamble_)
        AF_RETURN_IF_ERROR(write_preamble(fd, d.tls.get(), d.address));
      if (auto s = await_welcome(fd, d.tls.get(), d.address); !s.ok()) {
        drop_connection(d, fd);
        return s;
      }
    }
    std::size_t written = 0;
    auto s = write_frame(fd, d.tls.get(), d.address, *header, it.value, written);
    d.sent_bytes->add(written);
    if (s.ok() || !reused || written > 0 || attempt > 0)
      return s;
    drop_connection(d, fd);
  }
}

void bulk_sender::drop_connection(destination& d, int fd) {
  std::lock_guard<std::mutex> lock{d.mutex};
  if (d.fd >= 0 && (fd < 0 || d.fd == fd)) {
    d.tls.reset();
    ::close(d.fd);
    d.fd = -1;
  }
}

status bulk_sender::await_welcome(int fd, ssl_st* tls, const std::string& address) const {
  std::uint8_t answer = 0;
  std::size_t got = 0;
  bool stalled = false;
  auto bound = std::chrono::milliseconds(handshake_timeout_ms_);
  errno = 0;
  auto answered = read_exact(fd, &answer, 1, got, bound, stalled, tls);
  if (answered && answer == bulk_welcome)
    return {};
  if (answered && answer == bulk_full)
    return refused_at_cap(address);
  // A refusal is an orderly close; a reset is a task that died (its kernel dropped the
  // connection it had not yet taken from its backlog).
  if (errno == ECONNRESET)
    return make_error(errc::unavailable, "bulk endpoint " + address +
                                           " reset the connection before letting this process "
                                           "in: its task has gone");
  if (stalled)
    return make_error(errc::unavailable, "bulk endpoint " + address + " did not let this process in within " +
                                           std::to_string(bound.count()) + " ms");
  return make_error(errc::permission_denied,
                    "bulk endpoint " + address +
                      " refused this process (it requires a cluster token or a TLS certificate "
                      "of its cluster CA that this process does not have)");
}

status bulk_sender::write_preamble(int fd, ssl_st* tls, const std::string& address) const {
  std::size_t written = 0;
  if (tls != nullptr)
    return write_all_tls(tls, preamble_->data(), preamble_->size(), written, address);
  while (written < preamble_->size()) {
    auto n = ::send(fd, preamble_->data() + written, preamble_->size() - written, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return make_error(errc::unavailable, "presenting the cluster token to bulk endpoint " +
                                             address + ": " + std::strerror(errno));
    written += static_cast<std::size_t>(n);
  }
  return {};
}

status bulk_sender::write_frame(int fd, ssl_st* tls, const std::string& address,
                                const std::vector<std::uint8_t>& header, const tensor& value,
                                std::size_t& written) {
  if (tls != nullptr) {
    // OpenSSL sends each 16 KiB record with its own send, and TCP_NODELAY makes each a
    // segment that wakes the receiver; corked, the kernel fills whole segments until the
    // frame's end uncorks it (fewer segments and wake-ups: 0.07-0.1 ns/B less CPU in a raw
    // TLS loopback probe, measured).
    set_corked(fd, true);
    auto s = write_all_tls(tls, header.data(), header.size(), written, address);
    if (s.ok())
      s = write_all_tls(tls, value.raw_data(), value.bytes(), written, address);
    set_corked(fd, false);
    return s;
  }
  iovec parts[2];
  parts[0].iov_base = const_cast<std::uint8_t*>(header.data());
  parts[0].iov_len = header.size();
  parts[1].iov_base = value.raw_data();
  parts[1].iov_len = value.bytes();
  std::size_t total = header.size() + value.bytes();
  while (written < total) {
    iovec left[2];
    int count = 0;
    auto skip = written;
    for (auto& part : parts) {
      if (skip >= part.iov_len) {
        skip -= part.iov_len;
        continue;
      }
      left[count].iov_base = static_cast<char*>(part.iov_base) + skip;
      left[count].iov_len = part.iov_len - skip;
      skip = 0;
      ++count;
    }
    msghdr message{};
    message.msg_iov = left;
    message.msg_iovlen = static_cast<decltype(message.msg_iovlen)>(count);
    auto n = ::sendmsg(fd, &message, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return make_error(errc::unavailable, "writing to bulk endpoint " + address + " after " +
                                             std::to_string(written) + " of " +
                                             std::to_string(total) + " bytes: " +
                                             std::strerror(errno));
    }
    written += static_cast<std::size_t>(n);
  }
  return {};
}

} // namespace actorflow

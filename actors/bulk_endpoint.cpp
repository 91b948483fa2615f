// The bulk channel's receiving side (actors/bulk_channel.hpp): listener, readers, budgets.
#include "actors/bulk_channel.hpp"

#include "actors/bulk_socket.hpp"
#include "actors/traffic_metrics.hpp"
#include "actors/tensor_header.hpp"

#include <arpa/inet.h>
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <cstdint>
#include <utility>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>
#include <fcntl.h>

namespace actorflow {

using namespace bulk_detail;

namespace {

/// Host memory for one large frame's tensor, grown as its bytes arrive. Address space is
/// reserved ahead (PROT_NONE, no memory), at most twice what arrived, and each chunk is made
/// writable just before its bytes are read into it, so only what arrived is ever backed. The
/// reservation is 2 MiB-aligned and asks for transparent huge pages, and a grown one takes the
/// arrived pages along with mremap (page tables move, bytes are not copied): reading 64 MiB
/// into 4 KiB pages took 16384 page faults, about half the receiving thread's CPU time
/// (measured, plain TCP), and huge pages need 32. Unmapped when dropped, unless handed to a
/// buffer.
class growing_buffer {
public:
  static constexpr std::size_t huge_page_bytes = std::size_t{2} << 20;

  /// Grows to at most `limit` bytes (the frame's size).
  explicit growing_buffer(std::size_t limit) : limit_(limit) {}
  ~growing_buffer() {
    if (capacity_ > 0)
      ::munmap(data_, capacity_);
  }
  growing_buffer(const growing_buffer&) = delete;
  growing_buffer& operator=(const growing_buffer&) = delete;

  /// Makes the first `bytes` (at most the limit) writable; false when the system has no room.
  bool grow_to(std::size_t bytes) {
    if (bytes <= committed_)
      return true;
    if (bytes > limit_)
      return false;
    if (bytes > capacity_ && !reserve(std::min(limit_, std::max(bytes, 2 * capacity_))))
      return false;
    // Whole huge pages where the reservation allows, so that the kernel can back them with one.
    auto end = std::min(capacity_, round_up(bytes));
    if (::mprotect(data_ + committed_, end - committed_, PROT_READ | PROT_WRITE) != 0)
      return false;
    // Advice only: without transparent huge pages it changes nothing.
    ::madvise(data_ + committed_, end - committed_, MADV_HUGEPAGE);
    committed_ = end;
    return true;
  }
  char* data() const { return data_; }

  /// A tensor buffer of the first `bytes` that owns the mapping from here on.
  std::shared_ptr<buffer> release(std::size_t bytes) {
    auto capacity = std::exchange(capacity_, 0);
    return std::make_shared<buffer>(data_, bytes, [capacity](void* p) { ::munmap(p, capacity); });
  }

private:
  static std::size_t round_up(std::size_t bytes) {
    return (bytes + huge_page_bytes - 1) & ~(huge_page_bytes - 1);
  }

  /// A new aligned reservation of `capacity` bytes, the committed pages moved into it.
  bool reserve(std::size_t capacity) {
    auto length = round_up(capacity);
    auto* base = static_cast<char*>(::mmap(nullptr, length + huge_page_bytes, PROT_NONE,
                                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    if (base == MAP_FAILED)
      return false;
    auto* aligned = reinterpret_cast<char*>(round_up(reinterpret_cast<std::uintptr_t>(base)));
    if (aligned > base)
      ::munmap(base, static_cast<std::size_t>(aligned - base));
    ::munmap(aligned + length, static_cast<std::size_t>(base + huge_page_bytes - aligned));
    if (committed_ > 0) {
      if (::mremap(data_, committed_, committed_, MREMAP_MAYMOVE | MREMAP_FIXED, aligned) == MAP_FAILED) {
        ::munmap(aligned, length);
        return false;
      }
      // What is left of the old reservation: its uncommitted tail.
      if (capacity_ > committed_)
        ::munmap(data_ + committed_, capacity_ - committed_);
    } else if (capacity_ > 0) {
      ::munmap(data_, capacity_);
    }
    data_ = aligned;
    capacity_ = length;
    return true;
  }

  std::size_t limit_;
  char* data_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t committed_ = 0;
};

/// Tells a connection refused at the connection cap why, without reading from it: the sender's
/// bytes (its token, its TLS hello) may already be there, and closing over unread bytes resets
/// the connection, which loses the reason at the sender.
void refuse_as_full(int fd) {
  ::send(fd, &bulk_full, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
  char drained[4096];
  while (::recv(fd, drained, sizeof drained, MSG_DONTWAIT) > 0) {
  }
  ::close(fd);
}

} // namespace


result<std::unique_ptr<bulk_endpoint>> bulk_endpoint::listen(const std::string& host,
                                                             deliver_function deliver,
                                                             timeouts limits,
                                                             const transport_security& security) {
  bulk_listen_address where;
  where.bind_host = host;
  return listen(where, std::move(deliver), limits, security);
}

result<std::unique_ptr<bulk_endpoint>> bulk_endpoint::listen(const bulk_listen_address& where,
                                                             deliver_function deliver,
                                                             timeouts limits,
                                                             const transport_security& security) {
  const auto& host = where.bind_host;
  auto requested_port = std::to_string(where.port);
  auto tls_context = make_tls_context(security, true);
  if (!tls_context)
    return tls_context.error();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), requested_port.c_str(), &hints, &found); rc != 0)
    return make_error(errc::unavailable,
                      "bulk endpoint: cannot resolve '" + host + "': " + ::gai_strerror(rc));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard{found, ::freeaddrinfo};
  std::string last_error = "no address";
  for (auto* a = found; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = system_error("socket");
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
      last_error = system_error("bind/listen");
      ::close(fd);
      continue;
    }
    auto port = bound.ss_family == AF_INET6
                  ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                  : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    const auto& advertised = where.advertised_host.empty() ? host : where.advertised_host;
    auto shown = advertised.find(':') != std::string::npos ? "[" + advertised + "]" : advertised;
    auto address = shown + ":" + std::to_string(port);
    std::unique_ptr<bulk_endpoint> endpoint{
      new bulk_endpoint(fd, std::move(address), std::move(deliver), limits, security)};
    endpoint->tls_context_ = std::move(*tls_context);
    return endpoint;
  }
  return make_error(errc::unavailable, "bulk endpoint: cannot listen on '" + host + "' port " +
                                         requested_port + ": " + last_error);
}

bulk_endpoint::bulk_endpoint(int listen_fd, std::string address, deliver_function deliver,
                             timeouts limits, const transport_security& security)
    : listen_fd_(listen_fd), address_(std::move(address)), deliver_(std::move(deliver)),
      limits_(limits), handshake_timeout_(security.handshake_timeout_ms) {
  if (security.token())
    preamble_ = make_token_preamble(security.cluster_token);
  acceptor_ = std::thread{[this] { accept_loop(); }};
}

bulk_endpoint::~bulk_endpoint() {
  stopping_ = true;
  // Wakes the acceptor blocked in accept() (Linux returns EINVAL after shutdown).
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  std::list<std::unique_ptr<connection>> connections;
  {
    std::lock_guard<std::mutex> lock{mutex_};
    connections.swap(connections_);
    for (auto& c : connections)
      ::shutdown(c->fd, SHUT_RDWR);
  }
  for (auto& c : connections) {
    c->reader.join();
    ::close(c->fd);
  }
}

bulk_endpoint::frame_share bulk_endpoint::begin_frame() {
  std::lock_guard<std::mutex> lock{budget_mutex_};
  frame_share share;
  share.ticket = next_ticket_++;
  frames_.insert(share.ticket);
  return share;
}

void bulk_endpoint::end_frame(const frame_share& share) {
  {
    std::lock_guard<std::mutex> lock{budget_mutex_};
    in_flight_ -= share.counted;
    oldest_beyond_ -= share.beyond;
    frames_.erase(share.ticket);
  }
  // Also wakes the frame that has become the oldest.
  budget_freed_.notify_all();
}

bool bulk_endpoint::take_budget(frame_share& share, std::uint64_t bytes) {
  std::unique_lock<std::mutex> lock{budget_mutex_};
  auto fits = [&] {
    return share.counted + bytes <= limits_.peer_in_flight_bytes &&
           in_flight_ + bytes <= limits_.in_flight_bytes;
  };
  // Wakes now and then to notice a stopping endpoint.
  while (!fits() && share.ticket != *frames_.begin()) {
    if (stopping_)
      return false;
    budget_freed_.wait_for(lock, std::chrono::milliseconds(100));
  }
  if (fits()) {
    share.counted += bytes;
    in_flight_ += bytes;
  } else {
    // The oldest frame: it goes on (someone must, or readers that each hold part of the
    // budget could wait for each other forever), on its own account.
    share.beyond += bytes;
    oldest_beyond_ += bytes;
  }
  peak_in_flight_ = std::max(peak_in_flight_, in_flight_ + oldest_beyond_);
  return true;
}

std::uint64_t bulk_endpoint::peak_bytes_in_flight() const {
  std::lock_guard<std::mutex> lock{budget_mutex_};
  return peak_in_flight_;
}

void bulk_endpoint::log(const std::string& line) const {
  std::cerr << "actorflow: bulk endpoint " + address_ + ": " + line + "\n" << std::flush;
}

void bulk_endpoint::accept_loop() {
  while (!stopping_) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (stopping_)
        return;
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors or memory: back off instead of spinning.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      log(system_error("accept") + "; no longer accepting");
      return;
    }
    set_tcp_options(fd);
    std::lock_guard<std::mutex> lock{mutex_};
    if (stopping_) {
      ::close(fd);
      return;
    }
    // Reap readers whose connection ended.
    for (auto i = connections_.begin(); i != connections_.end();) {
      if ((*i)->finished) {
        (*i)->reader.join();
        ::close((*i)->fd);
        i = connections_.erase(i);
      } else {
        ++i;
      }
    }
    if (connections_.size() >= max_connections && !make_room()) {
      log("refusing a connection: " + std::to_string(max_connections) +
          " already open, all let in and none idle between frames for " +
          std::to_string(limits_.evictable.count()) + " ms");
      refuse_as_full(fd);
      continue;
    }
    auto c = std::make_unique<connection>();
    c->fd = fd;
    c->accepted_at = std::chrono::steady_clock::now().time_since_epoch().count();
    auto* raw = c.get();
    c->reader = std::thread{[this, raw] {
      read_loop(*raw);
      raw->finished = true;
    }};
    connections_.push_back(std::move(c));
  }
}

bool bulk_endpoint::make_room() {
  // A peer not yet let in first, the one waiting longest: it has shown no right to a place.
  connection* unproven = nullptr;
  for (auto& c : connections_)
    if (!c->finished && !c->evicted && !c->admitted &&
        (unproven == nullptr || c->accepted_at < unproven->accepted_at))
      unproven = c.get();
  if (unproven != nullptr) {
    unproven->evicted = true;
    ::shutdown(unproven->fd, SHUT_RDWR);
    return true;
  }
  auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  auto bound = std::chrono::duration_cast<std::chrono::steady_clock::duration>(limits_.evictable).count();
  connection* oldest = nullptr;
  for (auto& c : connections_) {
    if (c->finished || c->evicted || !c->between_frames)
      continue;
    auto since = c->idle_since.load();
    if (now - since >= bound && (oldest == nullptr || since < oldest->idle_since.load()))
      oldest = c.get();
  }
  if (oldest == nullptr)
    return false;
  oldest->evicted = true;
  ::shutdown(oldest->fd, SHUT_RDWR);
  return true;
}

status bulk_endpoint::check_token(connection& c) {
  std::uint8_t presented[token_preamble_bytes];
  std::size_t got = 0;
  bool stalled = false;
  bool readable = wait_readable(c.fd, handshake_timeout_, c.tls.get());
  if (!readable || !read_exact(c.fd, presented, sizeof presented, got, handshake_timeout_,
                               stalled, c.tls.get())) {
    if (!readable || stalled)
      return make_error(errc::permission_denied,
                        "no cluster token within " + std::to_string(handshake_timeout_.count()) +
                          " ms (" + std::to_string(got) + " bytes)");
    return make_error(errc::permission_denied, "it closed the connection after " +
                                                 std::to_string(got) +
                                                 " bytes, before presenting the cluster token");
  }
  if (!preamble_matches(presented, *preamble_))
    return make_error(errc::permission_denied, "it did not present the cluster token");
  return {};
}

void bulk_endpoint::read_loop(connection& c) {
  if (tls_context_) {
    auto started = start_tls(tls_context_.get(), c.fd, true, handshake_timeout_, limits_.stall);
    if (!started) {
      if (!c.evicted && !stopping_)
        log("refusing a connection: " + started.error().message());
      ::shutdown(c.fd, SHUT_RDWR);
      return;
    }
    c.tls = std::move(*started);
  }
  if (preamble_) {
    if (auto s = check_token(c); !s.ok()) {
      if (!c.evicted && !stopping_)
        log("refusing a connection: " + s.message());
      ::shutdown(c.fd, SHUT_RDWR);
      return;
    }
  }
  // Tells the sender it was let in: without this, a sender refused after its TLS 1.3
  // handshake (the certificate is checked after the client finishes) or for its token would
  // see its writes succeed and its tensors vanish.
  std::size_t written = 0;
  auto welcomed = c.tls ? write_all_tls(c.tls.get(), &bulk_welcome, 1, written, "its sender")
                        : (::send(c.fd, &bulk_welcome, 1, MSG_NOSIGNAL) == 1
                             ? status{}
                             : make_error(errc::unavailable, system_error("send")));
  if (!welcomed.ok()) {
    ::shutdown(c.fd, SHUT_RDWR);
    return;
  }
  c.admitted = true;
  auto& received = received_from(peer_host(c.fd), "bulk");
  for (;;) {
    bool clean_end = false;
    auto s = read_frame(c, clean_end, received);
    if (c.evicted) {
      log("closed a connection idle between frames to make room for a new one");
      return;
    }
    if (clean_end || stopping_)
      return;
    if (!s.ok()) {
      log("closing a connection: " + s.message());
      ::shutdown(c.fd, SHUT_RDWR);
      return;
    }
  }
}

status bulk_endpoint::read_frame(connection& c, bool& clean_end, metric_counter& received) {
  auto fd = c.fd;
  c.idle_since = std::chrono::steady_clock::now().time_since_epoch().count();
  c.between_frames = true;
  auto* tls = c.tls.get();
  if (!wait_readable(fd, limits_.idle, tls))
    return make_error(errc::deadline_exceeded,
                      "idle for " + std::to_string(limits_.idle.count()) + " ms between frames");
  c.between_frames = false;
  auto stalled_after = [&](std::size_t got, const std::string& where) {
    return make_error(errc::deadline_exceeded,
                      "the sender stalled for " + std::to_string(limits_.stall.count()) +
                        " ms " + where + " after " + std::to_string(got) + " bytes");
  };
  std::uint8_t fixed[bulk_fixed_header_bytes];
  std::size_t got = 0;
  bool stalled = false;
  if (!read_exact(fd, fixed, sizeof fixed, got, limits_.stall, stalled, tls)) {
    if (stalled)
      return stalled_after(got, "inside a frame header");
    clean_end = got == 0;
    return make_error(errc::data_loss, "connection ended inside a frame header (" +
                                         std::to_string(got) + " bytes)");
  }
  auto size = bulk_frame_header_size(fixed, sizeof fixed);
  if (!size)
    return size.error();
  // Bounded by the checks above: at most the key limit plus 8 bytes per allowed dimension.
  std::vector<std::uint8_t> header(*size);
  std::memcpy(header.data(), fixed, sizeof fixed);
  if (!read_exact(fd, header.data() + sizeof fixed, header.size() - sizeof fixed, got,
                  limits_.stall, stalled, tls))
    return stalled ? stalled_after(sizeof fixed + got, "inside a frame header")
                   : make_error(errc::data_loss, "connection ended inside a frame header");
  auto h = decode_bulk_frame_header(header.data(), header.size());
  if (!h)
    return h.error();
  auto share = begin_frame();
  struct share_hold {
    bulk_endpoint& endpoint;
    const frame_share& share;
    // After delivery: the tensor's bytes count until its receiver has it.
    ~share_hold() { endpoint.end_frame(share); }
  } hold{*this, share};
  auto read = read_tensor(c, *h, share);
  if (!read)
    return read.error();
  auto value = std::move(*read);
  if (h->type == dtype::boolean)
    if (auto st = tensor_header::check_booleans(value.raw_data(), h->byte_count, 0); !st.ok())
      return st.with_context("tensor '" + h->key + "'");
  received.add(header.size() + h->byte_count);
  auto key = h->key;
  // Counted before delivery, so that whoever sees the tensor arrive also sees the count.
  ++received_;
  if (auto s = deliver_(h->step_id, std::move(h->key), std::move(value)); !s.ok())
    return s.with_context("tensor '" + key + "'");
  return {};
}

result<tensor> bulk_endpoint::read_tensor(connection& c, const bulk_frame_header& h,
                                          frame_share& share) {
  auto* tls = c.tls.get();
  std::size_t got = 0;
  bool stalled = false;
  auto failed = [&](std::uint64_t at) {
    return stalled ? make_error(errc::deadline_exceeded,
                                "the sender stalled for " + std::to_string(limits_.stall.count()) +
                                  " ms inside tensor '" + h.key + "' after " + std::to_string(at) +
                                  " bytes")
                   : make_error(errc::data_loss, "connection ended after " + std::to_string(at) +
                                                   " of " + std::to_string(h.byte_count) +
                                                   " bytes of '" + h.key + "'");
  };
  auto out_of_memory = [&] {
    return make_error(errc::resource_exhausted,
                      "out of memory receiving a tensor of " + std::to_string(h.byte_count) + " bytes");
  };
  auto size = static_cast<std::size_t>(h.byte_count);
  if (size <= bulk_receive_chunk_bytes) {
    // Small enough to allocate whole, from the host allocator (its pool), and read at once.
    if (!take_budget(share, size))
      return make_error(errc::aborted, "the endpoint is stopping");
    tensor value;
    try {
      value = tensor{h.type, h.shape};
    } catch (const std::bad_alloc&) {
      return out_of_memory();
    }
    if (size > 0 && !read_exact(c.fd, value.raw_data(), size, got, limits_.stall, stalled, tls))
      return failed(got);
    return value;
  }
  try {
    check_tensor_allocation_cap(h.type, h.shape);
  } catch (const std::bad_alloc& e) {
    return make_error(errc::resource_exhausted, e.what());
  }
  // Budget and memory follow the bytes that arrive, a chunk ahead at most: a header that
  // announces gigabytes and never sends them holds one chunk.
  growing_buffer memory{size};
  std::size_t done = 0;
  while (done < size) {
    auto chunk = std::min(size - done, bulk_receive_chunk_bytes);
    if (!take_budget(share, chunk))
      return make_error(errc::aborted, "the endpoint is stopping");
    if (!memory.grow_to(done + chunk))
      return out_of_memory();
    if (!read_exact(c.fd, memory.data() + done, chunk, got, limits_.stall, stalled, tls))
      return failed(done + got);
    done += chunk;
  }
  return tensor{h.type, h.shape, memory.release(size)};
}

} // namespace actorflow

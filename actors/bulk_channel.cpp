#include "actors/bulk_channel.hpp"

#include "actors/cluster_spec.hpp"
#include "actors/protocols/wire.hpp"
#include "actors/tensor_header.hpp"

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

namespace {

std::atomic<std::size_t> min_bytes_override{0};

std::size_t min_bytes_from_environment() {
  const char* text = std::getenv("ACTORFLOW_BULK_MIN_BYTES");
  if (text == nullptr || *text == '\0')
    return default_bulk_min_bytes;
  char* end = nullptr;
  auto value = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0' || value == 0)
    return default_bulk_min_bytes;
  return static_cast<std::size_t>(value);
}

/// Connecting to an endpoint that does not answer fails after this long.
constexpr int connect_timeout_ms = 10000;

std::string system_error(const char* what) { return std::string{what} + ": " + std::strerror(errno); }

template <class T>
void put(std::vector<std::uint8_t>& out, T value) {
  auto at = out.size();
  out.resize(at + sizeof value);
  std::memcpy(out.data() + at, &value, sizeof value);
}

template <class T>
T get(const std::uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

/// The fixed header's fields, at their offsets.
struct fixed_header {
  std::uint32_t magic = 0;      // 0
  std::uint16_t version = 0;    // 4
  std::uint8_t type = 0;        // 6
  std::uint8_t reserved = 0;    // 7
  std::int64_t step_id = 0;     // 8
  std::uint32_t key_length = 0; // 16
  std::uint32_t rank = 0;       // 20
  std::uint64_t byte_count = 0; // 24
};

result<fixed_header> check_fixed(const void* data, std::size_t size) {
  if (data == nullptr || size < bulk_fixed_header_bytes)
    return make_error(errc::data_loss, "bulk frame header truncated: " + std::to_string(size) +
                                         " of " + std::to_string(bulk_fixed_header_bytes) +
                                         " bytes");
  const auto* p = static_cast<const std::uint8_t*>(data);
  fixed_header h;
  h.magic = get<std::uint32_t>(p);
  h.version = get<std::uint16_t>(p + 4);
  h.type = p[6];
  h.reserved = p[7];
  h.step_id = get<std::int64_t>(p + 8);
  h.key_length = get<std::uint32_t>(p + 16);
  h.rank = get<std::uint32_t>(p + 20);
  h.byte_count = get<std::uint64_t>(p + 24);
  if (h.magic != bulk_frame_magic)
    return make_error(errc::data_loss, "not a bulk frame (bad magic)");
  if (h.version != bulk_frame_version)
    return make_error(errc::data_loss, "bulk frame of unknown version " + std::to_string(h.version));
  if (auto type = tensor_header::dtype_of_code(h.type); !type)
    return type.error().with_context("bulk frame");
  if (h.reserved != 0)
    return make_error(errc::data_loss, "bulk frame with a non-zero reserved byte");
  if (h.key_length == 0 || h.key_length > max_bulk_key_bytes)
    return make_error(errc::data_loss, "bulk frame with a key of " + std::to_string(h.key_length) +
                                         " bytes (limit " + std::to_string(max_bulk_key_bytes) + ")");
  if (auto st = tensor_header::check_rank(h.rank); !st.ok())
    return st.with_context("bulk frame");
  if (h.byte_count > max_tensor_bytes())
    return make_error(errc::resource_exhausted,
                      "bulk frame of " + std::to_string(h.byte_count) +
                        " bytes exceeds this process's tensor limit of " +
                        std::to_string(max_tensor_bytes()) + " bytes");
  return h;
}

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

} // namespace

std::size_t bulk_min_bytes() {
  if (auto bytes = min_bytes_override.load(std::memory_order_relaxed))
    return bytes;
  static const std::size_t from_environment = min_bytes_from_environment();
  return from_environment;
}

void set_bulk_min_bytes(std::size_t bytes) {
  min_bytes_override.store(bytes, std::memory_order_relaxed);
}

result<std::vector<std::uint8_t>> encode_bulk_frame_header(std::int64_t step_id,
                                                           const std::string& key,
                                                           const tensor& value) {
  if (key.empty() || key.size() > max_bulk_key_bytes)
    return make_error(errc::invalid_argument, "bulk frame key of " + std::to_string(key.size()) +
                                                " bytes (limit " +
                                                std::to_string(max_bulk_key_bytes) + ")");
  const auto& dims = value.shape().dims();
  if (!value.is_initialized() || !value.shape().rank_known() || dims.size() > max_tensor_rank)
    return make_error(errc::invalid_argument, "bulk frame for tensor " + value.debug_string() +
                                                ": uninitialized or rank over the limit");
  std::vector<std::uint8_t> out;
  out.reserve(bulk_fixed_header_bytes + key.size() + 8 * dims.size());
  put(out, bulk_frame_magic);
  put(out, bulk_frame_version);
  put(out, static_cast<std::uint8_t>(value.type()));
  put(out, std::uint8_t{0});
  put(out, step_id);
  put(out, static_cast<std::uint32_t>(key.size()));
  put(out, static_cast<std::uint32_t>(dims.size()));
  put(out, static_cast<std::uint64_t>(value.bytes()));
  out.insert(out.end(), key.begin(), key.end());
  for (auto dim : dims)
    put(out, static_cast<std::int64_t>(dim));
  return out;
}

result<std::size_t> bulk_frame_header_size(const void* data, std::size_t size) {
  auto h = check_fixed(data, size);
  if (!h)
    return h.error();
  return bulk_fixed_header_bytes + std::size_t{h->key_length} + 8 * std::size_t{h->rank};
}

result<bulk_frame_header> decode_bulk_frame_header(const void* data, std::size_t size) {
  auto h = check_fixed(data, size);
  if (!h)
    return h.error();
  auto whole = bulk_fixed_header_bytes + std::size_t{h->key_length} + 8 * std::size_t{h->rank};
  if (size < whole)
    return make_error(errc::data_loss, "bulk frame header truncated: " + std::to_string(size) +
                                         " of " + std::to_string(whole) + " bytes");
  const auto* p = static_cast<const std::uint8_t*>(data) + bulk_fixed_header_bytes;
  bulk_frame_header out;
  out.step_id = h->step_id;
  out.type = static_cast<dtype>(h->type);
  out.key.assign(reinterpret_cast<const char*>(p), h->key_length);
  p += h->key_length;
  std::vector<std::int64_t> dims(h->rank);
  for (auto& dim : dims) {
    dim = get<std::int64_t>(p);
    p += 8;
  }
  auto sized = tensor_header::sized_shape(std::move(dims), out.type);
  if (!sized)
    return sized.error().with_context("bulk frame");
  out.shape = std::move(sized->first);
  if (sized->second != h->byte_count)
    return make_error(errc::data_loss, std::string{"bulk frame: tensor "} + to_string(out.type) +
                                         out.shape.to_string() + " needs " +
                                         std::to_string(sized->second) +
                                         " bytes but the frame carries " +
                                         std::to_string(h->byte_count));
  out.byte_count = h->byte_count;
  return out;
}

// ---- bulk_endpoint ----

result<std::unique_ptr<bulk_endpoint>> bulk_endpoint::listen(const std::string& host,
                                                             deliver_function deliver,
                                                             timeouts limits) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), "0", &hints, &found); rc != 0)
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
    auto shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    auto address = shown + ":" + std::to_string(port);
    return std::unique_ptr<bulk_endpoint>{
      new bulk_endpoint(fd, std::move(address), std::move(deliver), limits)};
  }
  return make_error(errc::unavailable,
                    "bulk endpoint: cannot listen on '" + host + "': " + last_error);
}

bulk_endpoint::bulk_endpoint(int listen_fd, std::string address, deliver_function deliver,
                             timeouts limits)
    : listen_fd_(listen_fd), address_(std::move(address)), deliver_(std::move(deliver)),
      limits_(limits) {
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

bool bulk_endpoint::take_budget(std::uint64_t bytes) {
  std::unique_lock<std::mutex> lock{budget_mutex_};
  // Wakes now and then to notice a stopping endpoint.
  while (!(in_flight_ == 0 || in_flight_ + bytes <= limits_.in_flight_bytes)) {
    if (stopping_)
      return false;
    budget_freed_.wait_for(lock, std::chrono::milliseconds(100));
  }
  in_flight_ += bytes;
  peak_in_flight_ = std::max(peak_in_flight_, in_flight_);
  return true;
}

void bulk_endpoint::return_budget(std::uint64_t bytes) {
  {
    std::lock_guard<std::mutex> lock{budget_mutex_};
    in_flight_ -= bytes;
  }
  budget_freed_.notify_all();
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
    set_no_delay(fd);
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
    if (connections_.size() >= max_connections && !evict_idle_connection()) {
      log("refusing a connection: " + std::to_string(max_connections) +
          " already open, none idle between frames for " +
          std::to_string(limits_.evictable.count()) + " ms");
      ::close(fd);
      continue;
    }
    auto c = std::make_unique<connection>();
    c->fd = fd;
    auto* raw = c.get();
    c->reader = std::thread{[this, raw] {
      read_loop(*raw);
      raw->finished = true;
    }};
    connections_.push_back(std::move(c));
  }
}

bool bulk_endpoint::evict_idle_connection() {
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

void bulk_endpoint::read_loop(connection& c) {
  for (;;) {
    bool clean_end = false;
    auto s = read_frame(c, clean_end);
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

status bulk_endpoint::read_frame(connection& c, bool& clean_end) {
  auto fd = c.fd;
  c.idle_since = std::chrono::steady_clock::now().time_since_epoch().count();
  c.between_frames = true;
  if (!wait_readable(fd, limits_.idle))
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
  if (!read_exact(fd, fixed, sizeof fixed, got, limits_.stall, stalled)) {
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
                  limits_.stall, stalled))
    return stalled ? stalled_after(sizeof fixed + got, "inside a frame header")
                   : make_error(errc::data_loss, "connection ended inside a frame header");
  auto h = decode_bulk_frame_header(header.data(), header.size());
  if (!h)
    return h.error();
  if (!take_budget(h->byte_count))
    return make_error(errc::aborted, "the endpoint is stopping");
  struct budget_hold {
    bulk_endpoint& endpoint;
    std::uint64_t bytes;
    ~budget_hold() { endpoint.return_budget(bytes); }
  } hold{*this, h->byte_count};
  tensor value;
  try {
    value = tensor{h->type, h->shape};
  } catch (const std::bad_alloc&) {
    return make_error(errc::resource_exhausted,
                      "out of memory allocating a tensor of " + std::to_string(h->byte_count) + " bytes");
  }
  if (h->byte_count > 0 && !read_exact(fd, value.raw_data(), static_cast<std::size_t>(h->byte_count),
                                        got, limits_.stall, stalled))
    return stalled ? stalled_after(got, "inside tensor '" + h->key + "'")
                   : make_error(errc::data_loss, "connection ended after " + std::to_string(got) +
                                                   " of " + std::to_string(h->byte_count) +
                                                   " bytes of '" + h->key + "'");
  if (h->type == dtype::boolean)
    if (auto st = tensor_header::check_booleans(value.raw_data(), h->byte_count, 0); !st.ok())
      return st.with_context("tensor '" + h->key + "'");
  auto key = h->key;
  // Counted before delivery, so that whoever sees the tensor arrive also sees the count.
  ++received_;
  if (auto s = deliver_(h->step_id, std::move(h->key), std::move(value)); !s.ok())
    return s.with_context("tensor '" + key + "'");
  return {};
}

// ---- bulk_sender ----

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
        auto* raw = slot.get();
        slot->writer = std::thread{[this, raw] { write_loop(*raw); }};
      }
      d = slot.get();
      std::lock_guard<std::mutex> queue_lock{d->mutex};
      d->queue.push_back(item{step_id, std::move(key), std::move(value), std::move(done)});
    }
  }
  if (d == nullptr) {
    done(make_error(errc::unavailable, "bulk sender closed"));
    return;
  }
  d->wake.notify_one();
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
  }
  for (auto& [address, d] : destinations)
    d->writer.join();
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
    auto s = write_item(d, it);
    if (s.ok()) {
      ++sent_;
    } else {
      // The stream may hold half a frame: start over on a new connection next time.
      std::lock_guard<std::mutex> lock{d.mutex};
      if (d.fd >= 0) {
        ::close(d.fd);
        d.fd = -1;
      }
    }
    // Drop our hold on the tensor before reporting, so the sender's memory is free by then.
    it.value = tensor{};
    it.done(s);
  }
  std::deque<item> left;
  {
    std::lock_guard<std::mutex> lock{d.mutex};
    left.swap(d.queue);
    if (d.fd >= 0) {
      ::close(d.fd);
      d.fd = -1;
    }
  }
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
      std::lock_guard<std::mutex> lock{d.mutex};
      if (d.fd == fd) {
        ::close(d.fd);
        d.fd = -1;
      }
      reused = false;
    }
    if (!reused) {
      auto connected = connect_to(d.address, d.mutex, d.fd, d.closing);
      if (!connected)
        return connected.error().with_context("cannot connect to bulk endpoint " + d.address);
      fd = *connected;
    }
    std::size_t written = 0;
    auto s = write_frame(fd, d.address, *header, it.value, written);
    if (s.ok() || !reused || written > 0 || attempt > 0)
      return s;
    std::lock_guard<std::mutex> lock{d.mutex};
    if (d.fd == fd) {
      ::close(d.fd);
      d.fd = -1;
    }
  }
}

status bulk_sender::write_frame(int fd, const std::string& address,
                                const std::vector<std::uint8_t>& header, const tensor& value,
                                std::size_t& written) {
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

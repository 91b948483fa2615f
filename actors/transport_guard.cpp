// The guard in front of CAF's BASP (actors/transport_guard.hpp). CAF 0.17 lets a backend make
// the scribes its brokers read through, so the guard is a default_multiplexer whose scribes
// check before BASP sees a byte:
//  - with a cluster token, the peer's preamble comes first; nothing of ours is written to the
//    accepting side's peer, and nothing it sent reaches BASP, until it matches;
//  - a read BASP asks for (a message's announced payload) over the cap closes the connection
//    instead of allocating, and reads over 1 MiB arrive in pieces, so memory follows the bytes
//    that really came rather than the header's claim;
//  - a connection that delivers nothing within the handshake timeout, or leaves a message
//    unfinished (a header begun, a payload announced, a large message between pieces) for the
//    message timeout, is closed by a watcher thread; an idle connection between messages is
//    left alone;
//  - with TLS, the same scribe reads through CAF's OpenSSL session (mutual, cluster CA).
#include "actors/transport_guard.hpp"

#include "actors/logging.hpp"
#include "actors/traffic_metrics.hpp"

#include "actors/bulk_socket.hpp"
#include "actors/session_master.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/blocking_actor.hpp>
#include <caf/io/basp/header.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/native_socket.hpp>
#include <caf/io/network/stream_impl.hpp>
#include <caf/io/receive_policy.hpp>
#include <caf/io/scribe.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/openssl/session.hpp>
#include <caf/policy/tcp.hpp>
#include <caf/settings.hpp>

#include <openssl/err.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace actorflow {

namespace {

using caf::io::network::default_multiplexer;
using caf::io::network::native_socket;
using caf::io::network::rw_state;
using clock_type = std::chrono::steady_clock;

constexpr const char* preamble_key = "actorflow.cluster-token-preamble";
constexpr const char* handshake_timeout_key = "actorflow.handshake-timeout-ms";
constexpr const char* message_timeout_key = "actorflow.message-timeout-ms";
/// Reads BASP asks for above this arrive in pieces of this size.
constexpr std::size_t read_piece_bytes = std::size_t{1} << 20;
/// A connection keeps its large-message buffer while large messages come at least this often.
constexpr auto keep_large_buffer = std::chrono::seconds(5);

/// Peers ("host:port", as the socket names them) whose connection this process closed because
/// they said nothing in time; the most recent few, for describe_connect_error.
std::mutex silent_mutex;
std::deque<std::string> silent_peers;

void remember_silent(std::string peer) {
  std::lock_guard<std::mutex> lock{silent_mutex};
  silent_peers.push_back(std::move(peer));
  if (silent_peers.size() > 64)
    silent_peers.pop_front();
}

bool was_silent(const std::string& peer) {
  std::lock_guard<std::mutex> lock{silent_mutex};
  return std::find(silent_peers.begin(), silent_peers.end(), peer) != silent_peers.end();
}

std::atomic<std::uint64_t> refused_token{0};
std::atomic<std::uint64_t> refused_size{0};
std::atomic<std::uint64_t> timed_out{0};

std::string hex(const token_preamble& bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (auto b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

std::optional<token_preamble> unhex(const std::string& text) {
  if (text.size() != 2 * token_preamble_bytes)
    return std::nullopt;
  token_preamble out{};
  auto digit = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<std::uint8_t>(digit(text[2 * i]) * 16 + digit(text[2 * i + 1]));
  return out;
}

/// "host:port" of the socket's peer (bulk_detail::peer_host, with the port when known).
std::string peer_of(native_socket fd) {
  auto port = caf::io::network::remote_port_of_fd(fd);
  auto host = bulk_detail::peer_host(fd);
  return port ? host + ":" + std::to_string(*port) : host;
}

/// What the watcher thread knows of one connection: when it must have made progress by.
struct connection_watch {
  std::mutex mutex;
  native_socket fd;
  /// Cleared by the scribe's destructor, before its socket closes: the watcher then never
  /// touches a descriptor number that may have been reused.
  bool alive = true;
  clock_type::time_point deadline = clock_type::time_point::max();
  std::string waiting_for;

  void expect(clock_type::duration within, std::string what) {
    std::lock_guard<std::mutex> lock{mutex};
    deadline = clock_type::now() + within;
    waiting_for = std::move(what);
    pending = true;
  }
  /// Called for every message: locks only when a deadline is set (pending is only written by
  /// the scribe's thread).
  void satisfied() {
    if (!pending)
      return;
    std::lock_guard<std::mutex> lock{mutex};
    deadline = clock_type::time_point::max();
    pending = false;
  }
  bool pending = false;
};

/// Closes connections past their deadline. One thread per guarded backend, started with its
/// first connection.
class connection_watcher {
public:
  ~connection_watcher() {
    {
      std::lock_guard<std::mutex> lock{mutex_};
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable())
      thread_.join();
  }

  void watch(const std::shared_ptr<connection_watch>& w) {
    std::lock_guard<std::mutex> lock{mutex_};
    watched_.push_back(w);
    if (!thread_.joinable())
      thread_ = std::thread{[this] { run(); }};
  }

private:
  void run() {
    std::unique_lock<std::mutex> lock{mutex_};
    while (!stopping_) {
      wake_.wait_for(lock, std::chrono::milliseconds(250));
      auto now = clock_type::now();
      for (auto i = watched_.begin(); i != watched_.end();) {
        auto w = i->lock();
        if (!w) {
          i = watched_.erase(i);
          continue;
        }
        std::lock_guard<std::mutex> guard{w->mutex};
        if (!w->alive) {
          i = watched_.erase(i);
          continue;
        }
        if (now >= w->deadline) {
          w->deadline = clock_type::time_point::max();
          ++timed_out;
          auto peer = peer_of(w->fd);
          remember_silent(peer);
          std::cerr << "actorflow: closing the CAF connection with " + peer + ": " +
                         w->waiting_for + "\n"
                    << std::flush;
          // The backend sees the end of the stream and closes it the usual way.
          ::shutdown(w->fd, SHUT_RDWR);
        }
        ++i;
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<std::weak_ptr<connection_watch>> watched_;
  std::thread thread_;
};

/// Reads and writes through CAF's OpenSSL session; a connection whose session could not be
/// made fails on its first read.
///
/// OpenSSL's error queue is per thread, and SSL_get_error reports SSL_ERROR_SSL whenever the
/// queue holds an entry, whichever connection put it there. CAF's session drains the queue only
/// to log it, and Debian's CAF logs nothing, so one connection's end (a peer that exits without
/// close_notify leaves "unexpected eof while reading") made the next would-block read of every
/// other connection on the multiplexer thread a failure: a worker that finished cut the chief
/// off from the ps (3 of 6 mutual-TLS between-graph runs of 1 ps and 2 workers ended so, the ps
/// exiting 3; 0 of 8 with this). Each call starts with an empty queue.
struct tls_policy {
  explicit tls_policy(caf::openssl::session_ptr s) : session(std::move(s)) {}

  rw_state read_some(std::size_t& result, native_socket fd, void* buf, std::size_t len) {
    result = 0;
    ERR_clear_error();
    return session ? session->read_some(result, fd, buf, len) : rw_state::failure;
  }
  rw_state write_some(std::size_t& result, native_socket fd, const void* buf, std::size_t len) {
    result = 0;
    ERR_clear_error();
    return session ? session->write_some(result, fd, buf, len) : rw_state::failure;
  }
  bool must_read_more(native_socket fd, std::size_t threshold) {
    return session && session->must_read_more(fd, threshold);
  }

  caf::openssl::session_ptr session;
};

/// A stream policy that counts what goes through `Inner` (TCP or TLS) in the process's
/// metrics: the bytes BASP reads and writes (under TLS, before encryption). CAF's policies set
/// `result` only on success, so only a success counts.
template <class Inner>
struct counting_policy {
  template <class... Ts>
  explicit counting_policy(peer_traffic counters, Ts&&... inner_args)
    : inner(std::forward<Ts>(inner_args)...), traffic(counters) {}

  rw_state read_some(std::size_t& result, native_socket fd, void* buf, std::size_t len) {
    auto state = inner.read_some(result, fd, buf, len);
    if (state == rw_state::success)
      traffic.received.add(result);
    return state;
  }
  rw_state write_some(std::size_t& result, native_socket fd, const void* buf, std::size_t len) {
    auto state = inner.write_some(result, fd, buf, len);
    if (state == rw_state::success)
      traffic.sent.add(result);
    return state;
  }
  bool must_read_more(native_socket fd, std::size_t threshold) {
    return inner.must_read_more(fd, threshold);
  }

  Inner inner;
  peer_traffic traffic;
};

/// CAF's stream, telling whether it is registered for writing (a write in progress).
template <class Policy>
class guarded_stream : public caf::io::network::stream_impl<counting_policy<Policy>> {
public:
  using caf::io::network::stream_impl<counting_policy<Policy>>::stream_impl;
  bool writing() const { return this->state_.writing; }
};

/// Messages up to this size are written at once by the broker that flushes them (below).
constexpr std::size_t direct_write_bytes = std::size_t{256} << 10;

/// What every guarded scribe of one backend shares.
struct guard_settings {
  std::optional<token_preamble> preamble;
  bool tls = false;
  std::size_t max_message_bytes = 0;
  std::chrono::milliseconds handshake_timeout{10000};
  std::chrono::milliseconds message_timeout{30000};
};

enum class side { accepted, connected };

template <class Policy>
class guarded_scribe : public caf::io::scribe {
public:
  template <class... Ts>
  guarded_scribe(default_multiplexer& mpx, native_socket fd, side which,
                 std::shared_ptr<const guard_settings> settings,
                 std::shared_ptr<connection_watch> watch,
                 Ts&&... policy_args)
    : caf::io::scribe(caf::io::network::conn_hdl_from_socket(fd)),
      side_(which),
      settings_(std::move(settings)),
      watch_(std::move(watch)),
      authenticated_(!settings_->preamble),
      traffic_(traffic_with(which == side::connected ? peer_of(fd) : bulk_detail::peer_host(fd), "caf")),
      stream_(mpx, fd, traffic_, std::forward<Ts>(policy_args)...) {
    auto within = std::to_string(settings_->handshake_timeout.count()) + " ms";
    watch_->expect(settings_->handshake_timeout, settings_->preamble
                                                   ? "no cluster token within " + within
                                                   : "no first message within " + within);
  }

  ~guarded_scribe() override {
    std::lock_guard<std::mutex> lock{watch_->mutex};
    watch_->alive = false;
  }

  void configure_read(caf::io::receive_policy::config config) override {
    wanted_ = config;
    if (!launched_) {
      launch();
      return;
    }
    if (authenticated_)
      apply(config);
  }

  void ack_writes(bool enable) override { stream_.ack_writes(enable); }

  std::vector<char>& wr_buf() override { return authenticated_ ? stream_.wr_buf() : held_; }

  std::vector<char>& rd_buf() override {
    return delivering_from_ ? *delivering_from_ : stream_.rd_buf();
  }

  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }

  void flush() override {
    if (!authenticated_)
      return;
    // CAF registers for writability and writes on the next turn of its loop, then unregisters:
    // two epoll_ctl calls and a loop turn per message. A small message goes out now when
    // nothing is queued before it; only what the socket does not take waits for the loop.
    // Plain TCP only: a TLS write that must be retried must be retried with the same buffer.
    if constexpr (std::is_same_v<Policy, caf::policy::tcp>) {
      auto& out = stream_.wr_buf();
      if (!out.empty() && out.size() <= direct_write_bytes && !stream_.writing() &&
          !stream_.ack_writes()) {
        std::size_t written = 0;
        // Through the same counting policy as the stream's writes (its own is CAF's, private).
        counting_policy<caf::policy::tcp> counted{traffic_};
        if (counted.write_some(written, stream_.fd(), out.data(), out.size()) ==
              rw_state::success &&
            written > 0) {
          if (written == out.size()) {
            out.clear();
            return;
          }
          out.erase(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(written));
        }
        // A failed write fails again in CAF's loop, which reports it the usual way.
      }
    }
    stream_.flush(this);
  }

  std::string addr() const override {
    auto x = caf::io::network::remote_addr_of_fd(stream_.fd());
    return x ? *x : std::string{};
  }

  std::uint16_t port() const override {
    auto x = caf::io::network::remote_port_of_fd(stream_.fd());
    return x ? *x : 0;
  }

  void add_to_loop() override { stream_.activate(this); }

  void remove_from_loop() override { stream_.passivate(); }

  bool consume(caf::execution_unit* ctx, const void* buf, std::size_t size) override {
    if (refused_)
      return false;
    if (!authenticated_)
      return check_preamble(static_cast<const std::uint8_t*>(buf), size);
    if (target_ > 0)
      return consume_exact(ctx, buf, size);
    watch_->satisfied();
    return caf::io::scribe::consume(ctx, buf, size);
  }

private:
  void launch() {
    launched_ = true;
    if (authenticated_) {
      apply(wanted_);
    } else {
      stream_.configure_read(caf::io::receive_policy::exactly(token_preamble_bytes));
      // The connecting side speaks first; the accepting side answers only a good token.
      if (side_ == side::connected)
        stream_.write(settings_->preamble->data(), settings_->preamble->size());
    }
    stream_.start(this);
    if (!stream_.wr_buf().empty())
      stream_.flush(this);
    else if constexpr (std::is_same_v<Policy, tls_policy>)
      // Drives SSL_connect / SSL_accept before either side has anything to say.
      stream_.force_empty_write(this);
  }

  /// A message BASP asked for exactly, read with `at_most` so that a part of it is seen. Whole
  /// in one read (the usual case for small messages) it goes to BASP from the stream's buffer;
  /// otherwise it is put together in assembled_, at most read_piece_bytes per read, growing
  /// with the bytes that came (never to the header's claim at once). A message up to a piece
  /// must be whole within the message timeout; a larger one must make progress within it.
  bool consume_exact(caf::execution_unit* ctx, const void* buf, std::size_t size) {
    if (assembled_.empty()) {
      if (assembled_.capacity() > read_piece_bytes &&
          clock_type::now() - last_large_ > keep_large_buffer)
        std::vector<char>{}.swap(assembled_); // large messages stopped: give the memory back
      if (size == target_) {
        watch_->satisfied();
        return caf::io::scribe::consume(ctx, buf, size);
      }
    }
    auto* bytes = static_cast<const char*>(buf);
    if (assembled_.capacity() < assembled_.size() + size)
      assembled_.reserve(
        std::min(target_, std::max(2 * assembled_.capacity(), assembled_.size() + size)));
    assembled_.insert(assembled_.end(), bytes, bytes + size);
    bool large = target_ > read_piece_bytes;
    if (assembled_.size() < target_) {
      if (large)
        expect_rest("a message of " + std::to_string(target_) + " bytes made no progress after " +
                    std::to_string(assembled_.size()));
      else if (!watch_->pending)
        expect_rest("a message of " + std::to_string(target_) + " bytes begun and not finished");
      stream_.configure_read(next_read());
      return true;
    }
    watch_->satisfied();
    reconfigured_ = false;
    auto result = deliver_from(ctx, assembled_);
    // The next message starts empty, in the memory this one used (kept while large ones come:
    // fresh memory for each cost 3x in page faults).
    assembled_.clear();
    if (large)
      last_large_ = clock_type::now();
    // BASP asks again only when it expects something else (a header after a header-only
    // message it does not): its standing request holds, not the remainder asked above.
    if (!reconfigured_ && !refused_ && target_ > 0)
      stream_.configure_read(next_read());
    return result;
  }

  /// Hands BASP a message put together in `buffer`.
  bool deliver_from(caf::execution_unit* ctx, std::vector<char>& buffer) {
    delivering_from_ = &buffer;
    auto result = caf::io::scribe::consume(ctx, nullptr, buffer.size());
    delivering_from_ = nullptr;
    return result;
  }

  /// The rest of a message begun or announced must come within the message timeout.
  void expect_rest(std::string what) {
    watch_->expect(settings_->message_timeout,
                   std::move(what) + " within " +
                     std::to_string(settings_->message_timeout.count()) + " ms");
  }

  /// The next read of the message BASP asked for: what is missing, at most a piece.
  caf::io::receive_policy::config next_read() const {
    return caf::io::receive_policy::at_most(std::min(read_piece_bytes, target_ - assembled_.size()));
  }

  /// Hands BASP's read to the stream, in pieces when large, or refuses it over the cap.
  void apply(caf::io::receive_policy::config config) {
    reconfigured_ = true;
    target_ = 0;
    auto bytes = config.second;
    if (bytes > settings_->max_message_bytes) {
      ++refused_size;
      refuse("it announced a message of " + std::to_string(bytes) + " bytes, over the cap of " +
             std::to_string(settings_->max_message_bytes) + " (ACTORFLOW_WIRE_MAX_MESSAGE_BYTES)");
      return;
    }
    if (config.first != caf::io::receive_policy_flag::exactly) {
      stream_.configure_read(config);
      return;
    }
    // BASP reads a header, then the payload it announced: an announced payload must come.
    if (bytes != caf::io::basp::header_size)
      expect_rest("the " + std::to_string(bytes) + " bytes a header announced did not come");
    target_ = bytes;
    stream_.configure_read(next_read());
  }

  bool check_preamble(const std::uint8_t* data, std::size_t size) {
    if (size != token_preamble_bytes || !preamble_matches(data, *settings_->preamble)) {
      ++refused_token;
      refuse("it did not present the cluster token");
      return true;
    }
    authenticated_ = true;
    watch_->satisfied();
    watch_->expect(settings_->handshake_timeout,
                   "no first message within " +
                     std::to_string(settings_->handshake_timeout.count()) + " ms");
    auto& out = stream_.wr_buf();
    if (side_ == side::accepted)
      out.insert(out.end(), settings_->preamble->begin(), settings_->preamble->end());
    out.insert(out.end(), held_.begin(), held_.end());
    std::vector<char>{}.swap(held_);
    apply(wanted_);
    if (!out.empty())
      stream_.flush(this);
    return true;
  }

  /// Ends the connection through the backend's usual path (it reads the end of the stream and
  /// tells the broker), after one line saying why.
  void refuse(const std::string& why) {
    if (refused_)
      return;
    refused_ = true;
    std::cerr << "actorflow: closing the CAF connection with " + peer_of(stream_.fd()) + ": " +
                   why + "\n"
              << std::flush;
    ::shutdown(stream_.fd(), SHUT_RDWR);
    target_ = 0;
    std::vector<char>{}.swap(assembled_);
    stream_.configure_read(caf::io::receive_policy::at_most(1));
  }

  side side_;
  std::shared_ptr<const guard_settings> settings_;
  std::shared_ptr<connection_watch> watch_;
  bool launched_ = false;
  bool authenticated_;
  bool refused_ = false;
  caf::io::receive_policy::config wanted_ = caf::io::receive_policy::at_most(1024);
  /// What BASP wrote before the peer presented its token.
  std::vector<char> held_;
  /// BASP's standing request for a message of exactly this many bytes (0: none; it lasts
  /// until BASP asks for something else), and whether a delivery made BASP ask again.
  std::size_t target_ = 0;
  bool reconfigured_ = false;
  /// A message that came in parts, then delivered from; its memory is kept for the next one
  /// while large messages keep coming.
  std::vector<char> assembled_;
  clock_type::time_point last_large_;
  /// Where BASP takes the message being delivered from, when not the stream's buffer.
  std::vector<char>* delivering_from_ = nullptr;
  peer_traffic traffic_;
  guarded_stream<Policy> stream_;
};

class guarded_multiplexer : public default_multiplexer {
public:
  explicit guarded_multiplexer(caf::actor_system* sys) : default_multiplexer(sys) {}

  /// The accepting side (the backend's doormen call this for each new connection).
  caf::io::scribe_ptr new_scribe(native_socket fd) override { return make(fd, side::accepted); }

  caf::expected<caf::io::scribe_ptr> new_tcp_scribe(const std::string& host,
                                                   std::uint16_t port) override {
    auto fd = caf::io::network::new_tcp_connection(host, port);
    if (!fd)
      return std::move(fd.error());
    return make(*fd, side::connected);
  }

private:
  std::shared_ptr<const guard_settings> settings() {
    std::call_once(settings_once_, [this] {
      auto& config = system().config();
      auto made = std::make_shared<guard_settings>();
      if (auto text = caf::get_if<std::string>(&caf::content(config), preamble_key))
        made->preamble = unhex(*text);
      made->tls = !config.openssl_certificate.empty() && system().has_openssl_manager();
      made->max_message_bytes = max_network_message_bytes();
      made->handshake_timeout = std::chrono::milliseconds(
        caf::get_or(caf::content(config), handshake_timeout_key, std::int64_t{10000}));
      made->message_timeout = std::chrono::milliseconds(
        caf::get_or(caf::content(config), message_timeout_key, std::int64_t{30000}));
      settings_ = std::move(made);
    });
    return settings_;
  }

  caf::io::scribe_ptr make(native_socket fd, side which) {
    auto s = settings();
    static_cast<void>(caf::io::network::keepalive(fd, true));
    bulk_detail::abort_when_unacknowledged(fd);
    auto watch = std::make_shared<connection_watch>();
    watch->fd = fd;
    watcher_.watch(watch);
    if (!s->tls)
      return caf::make_counted<guarded_scribe<caf::policy::tcp>>(*this, fd, which, s,
                                                                 std::move(watch));
    static_cast<void>(caf::io::network::nonblocking(fd, true));
    caf::openssl::session_ptr session;
    try {
      // The handshake's first step reads SSL_get_error too (see tls_policy).
      ERR_clear_error();
      session = caf::openssl::make_session(system(), fd, which == side::accepted);
    } catch (const std::exception& e) {
      std::cerr << "actorflow: cannot start TLS with " + peer_of(fd) + ": " + e.what() + "\n";
    }
    if (!session)
      std::cerr << "actorflow: the TLS handshake with " + peer_of(fd) + " failed at once\n";
    return caf::make_counted<guarded_scribe<tls_policy>>(*this, fd, which, s, std::move(watch),
                                                         std::move(session));
  }

  std::once_flag settings_once_;
  std::shared_ptr<const guard_settings> settings_;
  connection_watcher watcher_;
};

} // namespace

void use_guarded_transport(caf::actor_system_config& config, const transport_security& security) {
  config.load<caf::io::middleman, guarded_multiplexer>();
  caf::put(config.content, handshake_timeout_key, std::int64_t{security.handshake_timeout_ms});
  caf::put(config.content, message_timeout_key, std::int64_t{security.message_timeout_ms});
  if (security.token())
    caf::put(config.content, preamble_key, hex(make_token_preamble(security.cluster_token)));
  if (security.tls()) {
    config.openssl_certificate = security.tls_certificate;
    config.openssl_key = security.tls_key;
    config.openssl_cafile = security.tls_ca;
    config.load<caf::openssl::manager>();
  }
}

std::string describe_connect_error(caf::actor_system& sys, const caf::error& err,
                                   const std::string& host, std::uint16_t port) {
  auto text = sys.render(err);
  if (err == caf::sec::disconnect_during_handshake &&
      was_silent(host + ":" + std::to_string(port))) {
    text += " (it accepted the connection but said nothing within the handshake timeout: not "
            "an actorflow process, or one that is stopped or hung)";
  } else if (err == caf::sec::disconnect_during_handshake) {
    auto& mine = process_transport_security();
    text += " (the peer closed the connection before the handshake finished: it may require a "
            "cluster token or a TLS certificate from its cluster CA";
    text += mine.token() || mine.tls() ? ", and this process's differ)" : ", and this process has neither: --token-file, --tls-*)";
  }
  return text;
}

namespace {

/// describe_connect_error, or the silence of a peer past the request's bound.
std::string describe_connect_failure(caf::actor_system& sys, const caf::error& err,
                                     const std::string& host, std::uint16_t port,
                                     double bound_seconds) {
  if (err == caf::sec::request_timeout)
    return "no handshake within " + std::to_string(static_cast<std::int64_t>(bound_seconds * 1000)) +
           " ms (the peer accepts connections but does not answer, e.g. a stopped process)";
  return describe_connect_error(sys, err, host, port);
}

/// One connect request from `self` to the middleman, bounded: what it answered, or its error.
struct connect_attempt {
  caf::node_id node;
  caf::strong_actor_ptr actor;
  std::set<std::string> interface;
  caf::error failure;
};

connect_attempt connect_once(caf::blocking_actor& self, const std::string& host,
                             std::uint16_t port, double bound_seconds) {
  connect_attempt out;
  self.request(self.system().middleman().actor_handle(), request_bound(bound_seconds),
               caf::connect_atom::value, host, port)
    .receive(
      [&](caf::node_id& node, caf::strong_actor_ptr& found, std::set<std::string>& interface) {
        out.node = std::move(node);
        out.actor = std::move(found);
        out.interface = std::move(interface);
      },
      [&](caf::error& err) { out.failure = std::move(err); });
  return out;
}

/// Why a patient connect keeps trying: nothing listens at the address (yet).
bool nothing_listens(const caf::error& err) { return err == caf::sec::cannot_connect_to_node; }

/// Connects as connect_once does, again every half second while nothing listens at the address
/// and `patience` lasts, saying every 5 s what it waits for. The last attempt, and whether
/// patience ran out on it.
connect_attempt connect_patiently(caf::blocking_actor& self, const std::string& host,
                                  std::uint16_t port, double bound_seconds,
                                  const connect_patience& patience, bool& gave_up) {
  gave_up = false;
  auto started = std::chrono::steady_clock::now();
  auto next_word = started;
  for (;;) {
    auto attempt = connect_once(self, host, port, bound_seconds);
    if (!attempt.failure || !nothing_listens(attempt.failure) || patience.wait_seconds <= 0)
      return attempt;
    auto now = std::chrono::steady_clock::now();
    auto waited = std::chrono::duration<double>(now - started).count();
    if (waited >= patience.wait_seconds) {
      gave_up = true;
      return attempt;
    }
    if (now >= next_word) {
      log_info("waiting for " + patience.what + " (nothing listens at " + host + ":" +
               std::to_string(port) + " yet): " + std::to_string(static_cast<int>(waited)) +
               " s of " + std::to_string(static_cast<int>(patience.wait_seconds)) +
               " (connect timeout)");
      next_word = now + std::chrono::seconds(5);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

} // namespace

result<reached_actor> reach_published_actor(caf::actor_system& sys, const std::string& host,
                                            std::uint16_t port, double bound_seconds) {
  return reach_published_actor(sys, host, port, bound_seconds, connect_patience{});
}

result<reached_actor> reach_published_actor(caf::actor_system& sys, const std::string& host,
                                            std::uint16_t port, double bound_seconds,
                                            const connect_patience& patience) {
  caf::scoped_actor self{sys};
  bool gave_up = false;
  auto attempt = connect_patiently(*self, host, port, bound_seconds, patience, gave_up);
  if (attempt.failure) {
    status failed = make_error(errc::unavailable, describe_connect_failure(sys, attempt.failure,
                                                                          host, port, bound_seconds));
    if (gave_up)
      return failed.with_context("nothing listened there within " +
                                 std::to_string(static_cast<int>(patience.wait_seconds)) +
                                 " s (connect timeout)");
    return failed;
  }
  if (!attempt.actor)
    return make_error(errc::unavailable, "no actor is published there");
  return reached_actor{std::move(attempt.actor), std::move(attempt.interface)};
}

caf::actor spawn_patient_connector(caf::actor_system& sys, double bound_seconds,
                                   connect_patience patience) {
  return sys.spawn<caf::detached>([bound_seconds, patience](caf::blocking_actor* self) {
    self->receive([&](caf::connect_atom, const std::string& host, std::uint16_t port) {
      auto answer = self->make_response_promise();
      bool gave_up = false;
      auto attempt = connect_patiently(*self, host, port, bound_seconds, patience, gave_up);
      if (attempt.failure)
        answer.deliver(std::move(attempt.failure));
      else
        answer.deliver(std::move(attempt.node), std::move(attempt.actor),
                       std::move(attempt.interface));
    });
  });
}

transport_guard_counters transport_guard_counts() {
  return {refused_token.load(), refused_size.load(), timed_out.load()};
}

} // namespace actorflow

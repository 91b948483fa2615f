#pragma once
/// The bulk tensor channel: large tensors between device actors of different processes travel
/// over a plain TCP connection beside CAF (as TensorFlow keeps gRPC for control and moves tensor
/// bytes over a separate transport), written straight from the tensor's buffer and read
/// straight into a freshly allocated tensor: one kernel copy on each side.
///   auto endpoint = bulk_endpoint::listen("127.0.0.1", deliver);   // a task's receiving side
///   auto sender = std::make_shared<bulk_sender>();                  // a task's sending side
///   sender->send((*endpoint)->address(), step, key, value, [](const status& s) { ... });
///
/// A frame is a fixed header of bulk_fixed_header_bytes, then the key, the dimensions and the
/// tensor's raw bytes (little-endian host order, like the CAF encodings in wire.hpp):
///   uint32 magic "AFBK", uint16 version, uint8 dtype, uint8 reserved (0), int64 step id,
///   uint32 key length (<= max_bulk_key_bytes), uint32 rank (<= max_tensor_rank),
///   uint64 byte count (== dtype size * elements, <= max_tensor_bytes()),
///   key bytes, int64 dims..., the tensor's bytes.
/// The receiving side treats every byte as hostile: it checks the whole header before it
/// allocates the tensor, and closes a connection (one line on stderr) on the first bad frame.
/// No CAF here: device_actor.hpp connects the channel to device actors. One file per part:
/// bulk_frame.cpp (the codec), bulk_socket.{hpp,cpp} (sockets), bulk_endpoint.cpp (receiving),
/// bulk_sender.cpp (sending); tensor_route.hpp decides which tensors take the channel.

#include "actors/transport_security.hpp"
#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

struct ssl_st;
struct ssl_ctx_st;

namespace actorflow {
class metric_counter;
}

namespace actorflow {

/// Device actors send a tensor of at least this many bytes to a device actor in another process
/// over the bulk channel when the receiver's task has a bulk endpoint. 64 KiB unless the
/// environment variable ACTORFLOW_BULK_MIN_BYTES (read on the first call) or
/// set_bulk_min_bytes() says otherwise. Thread-safe.
std::size_t bulk_min_bytes();

/// Overrides bulk_min_bytes() for this process; 0 goes back to the default. For tests and
/// benchmarks (a huge value turns the channel off); thread-safe.
void set_bulk_min_bytes(std::size_t bytes);

// Below this CAF's copies cost less than they do above: the MLP's 784x256 weights (784 KiB)
// moved 1.6x faster over the channel (45.6k against 28.7k examples/s on 3 processes).
inline constexpr std::size_t default_bulk_min_bytes = std::size_t{64} << 10;
inline constexpr std::uint32_t bulk_frame_magic = 0x4b424641; // "AFBK" in little-endian order
inline constexpr std::uint16_t bulk_frame_version = 1;
inline constexpr std::size_t bulk_fixed_header_bytes = 32;
/// The byte an endpoint sends on a new connection once it has let the sender in (after TLS and
/// the cluster token, when required); a sender waits for it before its first frame.
inline constexpr std::uint8_t bulk_welcome = 0x57;
/// The byte an endpoint sends instead, before closing, on a connection it refuses because it
/// already has bulk_endpoint::max_connections open: the sender's error then names the cap.
/// Sent before TLS: it is no TLS record type (20..24), so a TLS sender tells it from a
/// handshake failure.
inline constexpr std::uint8_t bulk_full = 0x46;
/// A reader takes budget and grows a frame's buffer this much at a time, as the bytes arrive:
/// a header's announced size reserves nothing.
inline constexpr std::size_t bulk_receive_chunk_bytes = std::size_t{4} << 20;
/// The longest rendezvous key a frame may carry.
inline constexpr std::size_t max_bulk_key_bytes = 4096;

/// A frame's header, decoded and checked.
struct bulk_frame_header {
  std::int64_t step_id = 0;
  /// The rendezvous key's text (graph/rendezvous_key.hpp).
  std::string key;
  dtype type = dtype::float32;
  tensor_shape shape;
  /// dtype size times elements; the raw bytes that follow the header.
  std::uint64_t byte_count = 0;
};

/// The header bytes of a frame carrying `value` (which must be initialized); its raw bytes
/// follow on the wire. Fails (invalid_argument) for a key over max_bulk_key_bytes or a rank over
/// max_tensor_rank.
result<std::vector<std::uint8_t>> encode_bulk_frame_header(std::int64_t step_id,
                                                           const std::string& key,
                                                           const tensor& value);

/// The whole header's size, from its first bulk_fixed_header_bytes bytes (`size` at least
/// that): checks magic, version, dtype, key length and rank. data_loss on any mismatch.
result<std::size_t> bulk_frame_header_size(const void* data, std::size_t size);

/// Decodes a whole header from `size` bytes: everything bulk_frame_header_size checks, then
/// the dimensions (none negative, no overflow), byte count == dtype size * elements, and byte
/// count <= max_tensor_bytes() (resource_exhausted). data_loss for truncated or malformed
/// input. Allocates at most the key and the dimensions, both capped.
result<bulk_frame_header> decode_bulk_frame_header(const void* data, std::size_t size);

/// How long a bulk endpoint's connection may stay silent: between frames (a sender keeps its
/// connection across steps, and reconnects when it was closed), and inside a frame (a sender
/// that stalls mid-frame holds a connection and a buffer). Either ends the connection, with a
/// line naming the endpoint. `stall` is the channel's one bound on a silent peer: TCP or TLS
/// (a record cut off in the middle), endpoint or sender.
struct bulk_endpoint_timeouts {
  std::chrono::milliseconds idle{std::chrono::minutes(10)};
  std::chrono::milliseconds stall{std::chrono::seconds(30)};
  /// With max_connections open, a new connection takes the place of one not yet let in (its
  /// handshake or token still awaited, the oldest such), else of the one idle longest between
  /// frames, if that has been idle this long (its sender reconnects when it next sends); only
  /// when neither exists is the new one refused.
  std::chrono::milliseconds evictable{std::chrono::seconds(1)};
  /// Bytes of tensors all readers together may hold at once, counted as they arrive (in
  /// bulk_receive_chunk_bytes steps), not as headers announce them: a reader whose next chunk
  /// would go beyond waits (and TCP holds its sender back) until others have delivered.
  std::uint64_t in_flight_bytes = std::uint64_t{2} << 30;
  /// Bytes of in_flight_bytes one connection (one sender: it keeps one per endpoint) may hold:
  /// a peer holding a huge frame open waits alone, leaving the rest to the others. The oldest
  /// frame being received never waits (so readers cannot wait on each other in a circle): its
  /// bytes beyond these limits are its own, not counted against the others', which bounds the
  /// endpoint's memory at in_flight_bytes plus that one frame (at most max_tensor_bytes()).
  std::uint64_t peer_in_flight_bytes = std::uint64_t{1} << 30;
};

/// Where a bulk endpoint listens, and the address it gives peers.
struct bulk_listen_address {
  /// A name or address to bind ("0.0.0.0": every interface).
  std::string bind_host = "127.0.0.1";
  /// 0: a port the system picks.
  std::uint16_t port = 0;
  /// The host peers connect to (a Service name, a NAT address); empty: bind_host.
  std::string advertised_host;
};

/// The receiving side of one task: a listener on (host, port 0), an acceptor thread and one
/// reader thread per accepted connection (at most max_connections; more are refused). Each
/// complete frame becomes a tensor (read straight into: up to bulk_receive_chunk_bytes
/// allocated once from the default host allocator, larger ones mapped and grown as their bytes
/// arrive) handed to `deliver` on the reader thread. The destructor closes every socket
/// and joins every thread; it returns once readers finish delivering.
class bulk_endpoint {
public:
  /// Called on a reader thread with each received tensor; a non-ok status (an unknown
  /// receiver) closes that connection. Must be thread-safe and must not block for long.
  using deliver_function =
    std::function<status(std::int64_t step_id, std::string key, tensor value)>;

  static constexpr std::size_t max_connections = 64;

  using timeouts = bulk_endpoint_timeouts;

  /// Listens on `host` (a name or address) at a port the system picks. With a cluster token in
  /// `security`, each connection must present it (within its handshake timeout) before a frame
  /// is read.
  static result<std::unique_ptr<bulk_endpoint>> listen(
    const std::string& host, deliver_function deliver, timeouts limits = {},
    const transport_security& security = process_transport_security());
  /// The same where peers reach the endpoint at another address than it listens on (behind a
  /// Service name or NAT), or at a fixed port. An error names the address and port.
  static result<std::unique_ptr<bulk_endpoint>> listen(
    const bulk_listen_address& where, deliver_function deliver, timeouts limits = {},
    const transport_security& security = process_transport_security());

  ~bulk_endpoint();
  bulk_endpoint(const bulk_endpoint&) = delete;
  bulk_endpoint& operator=(const bulk_endpoint&) = delete;

  /// "host:port", what peers pass to bulk_sender::send.
  const std::string& address() const { return address_; }

  /// Tensors received and delivered so far.
  std::uint64_t tensors_received() const { return received_.load(); }
  /// The most tensor bytes its readers were holding at once (the oldest frame's own included).
  std::uint64_t peak_bytes_in_flight() const;

private:
  struct connection {
    int fd = -1;
    std::thread reader;
    std::atomic<bool> finished{false};
    /// Whether the reader waits for a frame to begin (nothing half read), and since when
    /// (steady_clock ticks).
    std::atomic<bool> between_frames{true};
    std::atomic<std::int64_t> idle_since{0};
    /// Set when the acceptor closed it to make room.
    std::atomic<bool> evicted{false};
    /// Whether its peer was let in (its TLS and token checked, the welcome sent); until then
    /// it is the first to make room, so that strangers who connect and say nothing cannot
    /// hold the cap against members.
    std::atomic<bool> admitted{false};
    /// When it was accepted (steady_clock ticks).
    std::int64_t accepted_at = 0;
    /// TLS on it, under TLS.
    std::shared_ptr<ssl_st> tls;
  };

  bulk_endpoint(int listen_fd, std::string address, deliver_function deliver, timeouts limits,
                const transport_security& security);
  void accept_loop();
  /// Reads and checks the peer's token preamble; an error when it is missing or wrong.
  status check_token(connection& c);
  void read_loop(connection& c);
  /// Reads one frame; its bytes go to `received`.
  status read_frame(connection& c, bool& clean_end, metric_counter& received);
  /// Reads a frame's `h.byte_count` tensor bytes into a tensor, taking budget (in `share`)
  /// and memory as they arrive.
  struct frame_share;
  result<tensor> read_tensor(connection& c, const bulk_frame_header& h, frame_share& share);
  /// Shuts a connection to make room: the oldest not yet let in, else the one idle longest
  /// between frames (at least limits_.evictable); false when there is none. Called with mutex_
  /// held.
  bool make_room();
  void log(const std::string& line) const;

  int listen_fd_ = -1;
  std::string address_;
  deliver_function deliver_;
  timeouts limits_;
  std::optional<token_preamble> preamble_;
  std::shared_ptr<ssl_ctx_st> tls_context_;
  std::chrono::milliseconds handshake_timeout_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> received_{0};
  /// Under budget_mutex_: tensor bytes held now against the budget; the oldest frame's bytes
  /// beyond it; the frames being received, by the ticket each drew when it began (the
  /// smallest is the oldest); and the most bytes ever held at once.
  mutable std::mutex budget_mutex_;
  std::condition_variable budget_freed_;
  std::uint64_t in_flight_ = 0;
  std::uint64_t oldest_beyond_ = 0;
  std::set<std::uint64_t> frames_;
  std::uint64_t next_ticket_ = 0;
  std::uint64_t peak_in_flight_ = 0;
  /// A frame's place among the frames being received: begun by begin_frame, ended by
  /// end_frame (which returns what it holds).
  struct frame_share {
    std::uint64_t ticket = 0;
    /// Bytes held against in_flight_bytes and peer_in_flight_bytes.
    std::uint64_t counted = 0;
    /// Bytes held beyond them while it was the oldest frame.
    std::uint64_t beyond = 0;
  };
  frame_share begin_frame();
  void end_frame(const frame_share& share);
  /// Waits until `bytes` more fit `share`'s peer limit and the endpoint's budget (the oldest
  /// frame does not wait), then takes them; false when the endpoint is stopping.
  bool take_budget(frame_share& share, std::uint64_t bytes);
  std::mutex mutex_;
  std::list<std::unique_ptr<connection>> connections_;
  std::thread acceptor_;
};

/// Bytes queued for one destination of a bulk_sender at most (send credits), and how long
/// send() waits for room before it fails naming the destination.
struct bulk_send_credits {
  std::uint64_t bytes = std::uint64_t{1} << 30;
  std::chrono::milliseconds wait{std::chrono::seconds(60)};
};

/// The sending side of one task: one persistent connection, one writer thread and one queue per
/// destination endpoint, made on first use, so send() never blocks the caller. Thread-safe.
/// close() (also run by the destructor) shuts every connection, fails what is still queued and
/// joins the writers.
class bulk_sender {
public:
  /// Called exactly once per send, on a writer thread (or inside send() once closed): ok once
  /// the frame is written to the socket, otherwise the error (connection refused, write
  /// failure, closed).
  using completion = std::function<void(const status&)>;

  using credits = bulk_send_credits;

  /// With a cluster token in `security`, each new connection presents it first.
  explicit bulk_sender(const transport_security& security = process_transport_security(),
                       credits limits = {});
  ~bulk_sender();
  bulk_sender(const bulk_sender&) = delete;
  bulk_sender& operator=(const bulk_sender&) = delete;

  /// Queues a frame of (step_id, key, value) for the endpoint at `address` ("host:port").
  /// Holds `value` (sharing its buffer, copying nothing) until it is written. When the frames
  /// queued for that endpoint already hold credits::bytes, waits (at most credits::wait) until
  /// the writer has made room: a slow receiver holds its senders back instead of their queues
  /// growing. A lone frame larger than the credit is queued when the queue is empty.
  void send(const std::string& address, std::int64_t step_id, std::string key, tensor value,
            completion done);

  /// Stops every writer; later sends fail at once. Idempotent.
  void close();

  /// Frames written so far.
  std::uint64_t tensors_sent() const { return sent_.load(); }
  /// The most bytes that were ever queued for one destination.
  std::uint64_t peak_queued_bytes() const { return peak_queued_.load(); }

private:
  struct item {
    std::int64_t step_id = 0;
    std::string key;
    tensor value;
    completion done;
  };
  struct destination {
    std::string address;
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<item> queue;
    /// Bytes of the queued frames' tensors, against the credit.
    std::uint64_t queued_bytes = 0;
    /// Senders waiting for room; close() waits for them to leave before the destination goes.
    int waiting = 0;
    std::condition_variable room;
    bool closing = false;
    /// The connection, or -1; shut down (not closed) by close() to wake a blocked writer.
    int fd = -1;
    /// TLS on it, under TLS.
    std::shared_ptr<ssl_st> tls;
    /// The process's count of bytes written to it (traffic_metrics.hpp), looked up once.
    metric_counter* sent_bytes = nullptr;
    std::thread writer;
  };

  void write_loop(destination& d);
  status write_item(destination& d, const item& it);
  status write_preamble(int fd, ssl_st* tls, const std::string& address) const;
  /// Waits (bounded by the handshake timeout) for the endpoint's welcome on a new connection.
  status await_welcome(int fd, ssl_st* tls, const std::string& address) const;
  /// Closes d's connection (only if it is still `fd`; -1: whichever).
  static void drop_connection(destination& d, int fd);
  /// Writes header and value to `fd` (through `tls` when given) from byte `written` on,
  /// counting in `written`.
  static status write_frame(int fd, ssl_st* tls, const std::string& address,
                            const std::vector<std::uint8_t>& header, const tensor& value,
                            std::size_t& written);

  std::optional<token_preamble> preamble_;
  credits credits_;
  std::atomic<std::uint64_t> peak_queued_{0};
  std::shared_ptr<ssl_ctx_st> tls_context_;
  /// Why TLS could not be set up (a bad certificate file): every send fails with it.
  status tls_error_;
  int handshake_timeout_ms_ = 10000;
  std::mutex mutex_;
  bool closed_ = false;
  std::map<std::string, std::unique_ptr<destination>> destinations_;
  std::atomic<std::uint64_t> sent_{0};
};

} // namespace actorflow

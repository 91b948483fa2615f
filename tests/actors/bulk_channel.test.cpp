// The bulk tensor channel (actors/bulk_channel.hpp): its frame codec (round trip and hostile
// headers), an endpoint refusing hostile bytes on a real socket, and device actors of two actor
// systems connected over loopback moving a large tensor over the channel and a small one
// through CAF, and failing the step, naming the peer, when the peer's endpoint is gone.
#include "actors/bulk_channel.hpp"
#include "actors/device_actor.hpp"
#include "actors/protocols/device.hpp"
#include "actors/protocols/wire.hpp"
#include "devices/thread_pool.hpp"
#include "graph/ops.hpp"
#include "graph/partition.hpp"
#include "graph/rendezvous_key.hpp"
#include "support/processes.hpp"
#include "support/transfer_test_util.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <future>
#include <random>
#include <thread>

using namespace actorflow;
using namespace actorflow::test;
using namespace actorflow::protocol;
using namespace std::chrono_literals;

using actorflow::testing::loopback_listener;

namespace {

const std::string test_key = make_rendezvous_key(sender_device, receiver_device, "x:0").to_string();

/// Restores the process's limits when a test ends.
struct scoped_limits {
  scoped_limits(std::size_t bulk_min, std::size_t max_bytes = 0) {
    set_bulk_min_bytes(bulk_min);
    set_max_tensor_bytes(max_bytes);
  }
  ~scoped_limits() {
    set_bulk_min_bytes(0);
    set_max_tensor_bytes(0);
  }
};

/// A valid header for a float32 [2,3] tensor, to be corrupted field by field.
std::vector<std::uint8_t> valid_header() {
  tensor t{dtype::float32, {2, 3}};
  auto header = encode_bulk_frame_header(7, test_key, t);
  REQUIRE(header.ok());
  return *header;
}

template <class T>
void poke(std::vector<std::uint8_t>& bytes, std::size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof value);
}

std::unique_ptr<device> cpu_device(const std::string& name) {
  return make_cpu_device(device_name::parse(name).value(), std::make_shared<thread_pool>("intra", 0));
}

std::unique_ptr<caf::actor_system> networked_system(caf::actor_system_config& cfg) {
  cfg.load<caf::io::middleman>();
  add_actorflow_message_types(cfg);
  return std::make_unique<caf::actor_system>(cfg);
}

/// A sender device actor and a receiver device actor in two actor systems connected over
/// loopback, the receiver's task with a bulk endpoint. Members die in reverse order: the
/// channel's threads stop before the actor systems.
struct two_processes {
  std::mutex trace_mutex;
  std::vector<std::string> trace;
  caf::actor_system_config sender_cfg;
  caf::actor_system_config receiver_cfg;
  std::unique_ptr<caf::actor_system> sender_sys = networked_system(sender_cfg);
  std::unique_ptr<caf::actor_system> receiver_sys = networked_system(receiver_cfg);
  device_actor receiver;
  device_actor sender;
  device_actor remote_receiver;
  std::shared_ptr<bulk_sender> bulk = std::make_shared<bulk_sender>();
  std::unique_ptr<bulk_endpoint> endpoint;

  two_processes() {
    device_actor_options receiver_options;
    receiver_options.trace = [this](const std::string& line) {
      std::lock_guard<std::mutex> guard{trace_mutex};
      trace.push_back(line);
    };
    receiver = spawn_device_actor(*receiver_sys, cpu_device(receiver_device), receiver_options);
    device_actor_options sender_options;
    sender_options.bulk = bulk;
    sender = spawn_device_actor(*sender_sys, cpu_device(sender_device), sender_options);
    auto listening = bulk_endpoint::listen("127.0.0.1", deliver_to_device_actors({{receiver_device, receiver}}));
    REQUIRE(listening.ok());
    endpoint = std::move(*listening);
    auto port = receiver_sys->middleman().publish(receiver, 0, "127.0.0.1");
    REQUIRE(port);
    auto remote = sender_sys->middleman().remote_actor<device_actor>("127.0.0.1", *port);
    REQUIRE(remote);
    remote_receiver = *remote;
    REQUIRE(remote_receiver.node() != sender.node());
  }

  ~two_processes() {
    bulk->close();
    endpoint.reset();
    for (auto& a : {sender, receiver})
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }

  void tell_peers(const std::string& bulk_address) {
    peer_table peers;
    peers.devices[sender_device] = sender;
    peers.devices[receiver_device] = remote_receiver;
    peers.bulk_addresses[receiver_device] = bulk_address;
    caf::anon_send(sender, peers_atom::value, peers);
  }

  void register_partitions(std::int64_t handle, const crossing_graph& cg) {
    for (auto& [sys, dev, name] :
         {std::tuple{sender_sys.get(), sender, sender_device},
          std::tuple{receiver_sys.get(), receiver, receiver_device}}) {
      caf::scoped_actor self{*sys};
      status registered = make_error(errc::internal, "no answer");
      self->request(dev, 30s, register_atom::value, make_partition_registration(handle, cg.parts.at(name)))
        .receive([&](status& s) { registered = s; }, [&](caf::error& err) {
          registered = status_from_error(err);
        });
      INFO(registered.to_string());
      REQUIRE(registered.ok());
    }
  }

  /// Runs `step` of `handle` on both devices; the receiver fetches `fetched`.
  std::pair<step_result, step_result> run(std::int64_t handle, std::int64_t step,
                                          const std::string& fetched) {
    caf::scoped_actor on_sender{*sender_sys};
    caf::scoped_actor on_receiver{*receiver_sys};
    auto failed = [](caf::error& err) { return step_result{status_from_error(err), {}, 0}; };
    auto sent = on_sender->request(sender, 30s, run_atom::value, make_run_request(handle, step, {}, {}));
    step_result received;
    on_receiver
      ->request(receiver, 30s, run_atom::value, make_run_request(handle, step, {}, {fetched}))
      .receive([&](step_result& r) { received = std::move(r); },
               [&](caf::error& err) { received = failed(err); });
    step_result sender_result;
    sent.receive([&](step_result& r) { sender_result = std::move(r); },
                 [&](caf::error& err) { sender_result = failed(err); });
    return {std::move(sender_result), std::move(received)};
  }
};

/// A connection to `port` on loopback, required to succeed.
int connect_to_loopback(std::uint16_t port) {
  int fd = actorflow::testing::connect_to_loopback(port);
  REQUIRE(fd >= 0);
  return fd;
}

/// A connection to the endpoint at `port` on loopback that has read the endpoint's welcome.
int connect_to_endpoint(std::uint16_t port) {
  int fd = connect_to_loopback(port);
  pollfd p{fd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, 10000) == 1);
  std::uint8_t welcome = 0;
  REQUIRE(::recv(fd, &welcome, 1, 0) == 1);
  REQUIRE(welcome == bulk_welcome);
  return fd;
}

/// The port of an endpoint listening on "127.0.0.1:PORT".
std::uint16_t port_of(const bulk_endpoint& endpoint) {
  const auto& address = endpoint.address();
  return static_cast<std::uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
}

/// An endpoint on loopback that counts the tensors it delivers.
struct counting_endpoint {
  std::atomic<int> delivered{0};
  std::unique_ptr<bulk_endpoint> endpoint;

  explicit counting_endpoint(bulk_endpoint_timeouts limits = {},
                             const transport_security& security = {}) {
    auto made = bulk_endpoint::listen("127.0.0.1", [this](std::int64_t, std::string, tensor) {
      ++delivered;
      return status{};
    }, limits, security);
    REQUIRE(made.ok());
    endpoint = std::move(*made);
  }
  std::uint16_t port() const { return port_of(*endpoint); }
};

} // namespace

TEST_CASE("a bulk frame header round-trips its step, key, dtype, shape and byte count",
          "[actors][bulk]") {
  tensor t{dtype::int64, {4, 0, 3}};
  auto header = encode_bulk_frame_header(-42, test_key, t);
  REQUIRE(header.ok());
  auto size = bulk_frame_header_size(header->data(), bulk_fixed_header_bytes);
  REQUIRE(size.ok());
  CHECK(*size == header->size());
  auto decoded = decode_bulk_frame_header(header->data(), header->size());
  REQUIRE(decoded.ok());
  CHECK(decoded->step_id == -42);
  CHECK(decoded->key == test_key);
  CHECK(decoded->type == dtype::int64);
  CHECK(decoded->shape == tensor_shape{4, 0, 3});
  CHECK(decoded->byte_count == 0);

  auto big = random_tensor(1000, 1);
  auto big_header = encode_bulk_frame_header(3, test_key, big);
  REQUIRE(big_header.ok());
  auto big_decoded = decode_bulk_frame_header(big_header->data(), big_header->size());
  REQUIRE(big_decoded.ok());
  CHECK(big_decoded->byte_count == 4000);
  CHECK(big_decoded->shape == tensor_shape{1000});
}

TEST_CASE("hostile bulk frame headers are refused before anything is allocated",
          "[actors][bulk]") {
  auto header = valid_header();
  scoped_counting_allocator allocations;
  auto refused = [](const std::vector<std::uint8_t>& bytes, errc code, const std::string& words) {
    auto decoded = decode_bulk_frame_header(bytes.data(), bytes.size());
    REQUIRE_FALSE(decoded.ok());
    INFO(decoded.error().to_string());
    CHECK(decoded.error().code() == code);
    CHECK(decoded.error().message().find(words) != std::string::npos);
  };
  REQUIRE(decode_bulk_frame_header(header.data(), header.size()).ok());

  SECTION("a truncated fixed header") {
    refused({header.begin(), header.begin() + 10}, errc::data_loss, "truncated");
    CHECK_FALSE(bulk_frame_header_size(header.data(), 31).ok());
  }
  SECTION("a header cut inside its key or dimensions") {
    refused({header.begin(), header.end() - 1}, errc::data_loss, "truncated");
    refused({header.begin(), header.begin() + 40}, errc::data_loss, "truncated");
  }
  SECTION("a bad magic number or version") {
    auto bad = header;
    bad[0] ^= 0xff;
    refused(bad, errc::data_loss, "magic");
    bad = header;
    poke<std::uint16_t>(bad, 4, 99);
    refused(bad, errc::data_loss, "version");
  }
  SECTION("an unknown dtype") {
    auto bad = header;
    bad[6] = 200;
    refused(bad, errc::data_loss, "dtype");
  }
  SECTION("a huge key length") {
    auto bad = header;
    poke<std::uint32_t>(bad, 16, 0xffffffffu);
    refused(bad, errc::data_loss, "key");
    CHECK_FALSE(bulk_frame_header_size(bad.data(), bad.size()).ok());
  }
  SECTION("a rank over the limit") {
    auto bad = header;
    poke<std::uint32_t>(bad, 20, 100000);
    refused(bad, errc::data_loss, "rank");
  }
  SECTION("a byte count over the process's tensor limit") {
    auto bad = header;
    poke<std::uint64_t>(bad, 24, std::uint64_t{1} << 62);
    // The tensor limit, not the key's (whose error says "limit" too).
    refused(bad, errc::resource_exhausted, "tensor limit");
    scoped_limits limits{0, 16};
    refused(header, errc::resource_exhausted, "tensor limit of 16 bytes"); // 24 bytes against 16
  }
  SECTION("a byte count that disagrees with dtype and shape") {
    auto bad = header;
    poke<std::uint64_t>(bad, 24, 25);
    refused(bad, errc::data_loss, "needs 24 bytes");
    bad = header;
    poke<std::int64_t>(bad, bad.size() - 8, 1000); // dims [2,1000]
    refused(bad, errc::data_loss, "needs 8000 bytes");
  }
  SECTION("a negative or overflowing dimension") {
    auto bad = header;
    poke<std::int64_t>(bad, bad.size() - 8, -3);
    refused(bad, errc::data_loss, "negative");
    bad = header;
    poke<std::int64_t>(bad, bad.size() - 16, std::int64_t{1} << 40);
    poke<std::int64_t>(bad, bad.size() - 8, std::int64_t{1} << 40);
    refused(bad, errc::data_loss, "64 bits");
  }
  CHECK(allocations.largest() == 0);
}

TEST_CASE("a bulk endpoint closes a connection that sends a hostile frame, allocating nothing large",
          "[actors][bulk]") {
  scoped_counting_allocator allocations;
  counting_endpoint counted;
  auto& delivered = counted.delivered;
  auto port = counted.port();
  auto send_and_expect_close = [&](std::vector<std::uint8_t> bytes) {
    int fd = connect_to_endpoint(port);
    REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
    // The endpoint hangs up: the read sees the end (or a reset) within the bound.
    pollfd p{fd, POLLIN, 0};
    REQUIRE(::poll(&p, 1, 10000) == 1);
    char byte;
    CHECK(::recv(fd, &byte, 1, 0) <= 0);
    ::close(fd);
  };
  auto header = valid_header();
  auto bad_magic = header;
  bad_magic[1] ^= 0xff;
  send_and_expect_close(bad_magic);
  auto over_cap = header;
  poke<std::uint64_t>(over_cap, 24, std::uint64_t{1} << 62);
  send_and_expect_close(over_cap);
  auto well_formed = encode_bulk_frame_header(1, "a;b;x:0", tensor{dtype::float32, {2}});
  REQUIRE(well_formed.ok());
  auto frame = *well_formed;
  frame.resize(frame.size() + 8, 0);
  // This one is well formed: delivered, then the next, with a bad magic, closes.
  frame.insert(frame.end(), bad_magic.begin(), bad_magic.end());
  send_and_expect_close(frame);
  CHECK(delivered == 1);
  counted.endpoint.reset();
  CHECK(allocations.largest() < 4096);
}

TEST_CASE("a large tensor crosses to a device actor in another actor system over the bulk channel "
          "bit for bit, and a small one through CAF",
          "[actors][bulk]") {
  scoped_limits limits{std::size_t{1} << 20};
  two_processes p;
  // 3 MiB and 12 bytes of float32, and a small one below the threshold.
  auto large = random_tensor((std::int64_t{3} << 20) / 4 + 3, 5);
  auto small = random_tensor(1000, 6);
  crossing_graph large_graph{large};
  crossing_graph small_graph{small};
  p.register_partitions(1, large_graph);
  p.register_partitions(2, small_graph);
  p.tell_peers(p.endpoint->address());

  for (std::int64_t step = 1; step <= 2; ++step) {
    INFO("step " << step);
    auto [sent, received] = p.run(1, step, large_graph.fetched.tensor_name());
    INFO(sent.outcome.to_string() << " / " << received.outcome.to_string());
    REQUIRE(sent.outcome.ok());
    REQUIRE(received.outcome.ok());
    REQUIRE(received.fetched.size() == 1);
    CHECK(same_bytes(received.fetched[0], large));
    CHECK(p.endpoint->tensors_received() == static_cast<std::uint64_t>(step));
    CHECK(p.bulk->tensors_sent() == static_cast<std::uint64_t>(step));
  }
  auto [sent, received] = p.run(2, 3, small_graph.fetched.tensor_name());
  INFO(sent.outcome.to_string() << " / " << received.outcome.to_string());
  REQUIRE(sent.outcome.ok());
  REQUIRE(received.outcome.ok());
  REQUIRE(received.fetched.size() == 1);
  CHECK(same_bytes(received.fetched[0], small));
  // The small tensor came through CAF: the channel's counters did not move.
  CHECK(p.endpoint->tensors_received() == 2);
  CHECK(p.bulk->tensors_sent() == 2);
  std::lock_guard<std::mutex> guard{p.trace_mutex};
  auto tensor_lines = std::count_if(p.trace.begin(), p.trace.end(), [](const std::string& line) {
    return line.find(" tensor ") != std::string::npos;
  });
  CHECK(tensor_lines == 3);
}

TEST_CASE("a device actor fails the step, naming the receiver and its endpoint, when the "
          "receiver's bulk endpoint is gone",
          "[actors][bulk]") {
  scoped_limits limits{std::size_t{1} << 20};
  two_processes p;
  auto large = random_tensor(std::int64_t{1} << 19, 8); // 2 MiB
  crossing_graph cg{large};
  p.register_partitions(1, cg);
  auto gone = p.endpoint->address();
  p.endpoint.reset();
  p.tell_peers(gone);
  caf::scoped_actor on_sender{*p.sender_sys};
  step_result result;
  on_sender->request(p.sender, 30s, run_atom::value, make_run_request(1, 1, {}, {}))
    .receive([&](step_result& r) { result = std::move(r); },
             [&](caf::error& err) { result.outcome = status_from_error(err); });
  INFO(result.outcome.to_string());
  REQUIRE_FALSE(result.outcome.ok());
  CHECK(result.outcome.code() == errc::unavailable);
  CHECK(result.outcome.message().find(receiver_device) != std::string::npos);
  CHECK(result.outcome.message().find(gone) != std::string::npos);
  CHECK(p.bulk->tensors_sent() == 0);
}

TEST_CASE("a frame that finds its kept connection reset goes again on a fresh one",
          "[actors][bulk]") {
  // A plain listener playing an endpoint that resets the first connection after one frame.
  auto [listener, target] = loopback_listener();
  REQUIRE(listener >= 0);
  auto accept_one = [&] {
    pollfd p{listener, POLLIN, 0};
    REQUIRE(::poll(&p, 1, 10000) == 1);
    int fd = ::accept(listener, nullptr, nullptr);
    REQUIRE(::send(fd, &bulk_welcome, 1, MSG_NOSIGNAL) == 1); // as an endpoint lets a sender in
    return fd;
  };
  auto read_some = [](int fd) {
    char buffer[4096];
    pollfd p{fd, POLLIN, 0};
    REQUIRE(::poll(&p, 1, 10000) == 1);
    return ::recv(fd, buffer, sizeof buffer, 0);
  };

  bulk_sender sender;
  std::promise<status> first, second;
  sender.send(target, 1, "a;b;x:0", tensor::from_vector<float>({1.f, 2.f}),
              [&](const status& s) { first.set_value(s); });
  int conn1 = accept_one();
  REQUIRE(conn1 >= 0);
  CHECK(read_some(conn1) > 0);
  REQUIRE(first.get_future().get().ok());
  // Reset, not a clean close: the sender's next write on it fails with nothing written.
  linger hard{1, 0};
  REQUIRE(::setsockopt(conn1, SOL_SOCKET, SO_LINGER, &hard, sizeof hard) == 0);
  ::close(conn1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100)); // the reset reaches the sender

  sender.send(target, 2, "a;b;x:0", tensor::from_vector<float>({3.f, 4.f}),
              [&](const status& s) { second.set_value(s); });
  int conn2 = accept_one();
  REQUIRE(conn2 >= 0);
  CHECK(read_some(conn2) > 0);
  auto retried = second.get_future().get();
  INFO(retried.message());
  CHECK(retried.ok());
  sender.close();
  ::close(conn2);
  ::close(listener);
}

TEST_CASE("a bulk endpoint closes connections that stay silent between frames or stall inside one",
          "[actors][bulk]") {
  bulk_endpoint_timeouts limits;
  limits.idle = std::chrono::milliseconds{200};
  limits.stall = std::chrono::milliseconds{200};
  counting_endpoint counted{limits};
  auto& delivered = counted.delivered;
  auto connect_and_send = [&](const std::vector<std::uint8_t>& bytes) {
    int fd = connect_to_endpoint(counted.port());
    if (!bytes.empty())
      REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
    return fd;
  };
  auto closed_within = [](int fd, int ms) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, ms) != 1)
      return false;
    char byte;
    return ::recv(fd, &byte, 1, 0) <= 0;
  };
  // Silent from the start: closed after the idle bound.
  int idle = connect_and_send({});
  CHECK(closed_within(idle, 10000));
  ::close(idle);
  // Half a header, then nothing: closed after the stall bound.
  auto header = encode_bulk_frame_header(1, "a;b;x:0", tensor{dtype::float32, {2}});
  REQUIRE(header.ok());
  std::vector<std::uint8_t> half(header->begin(), header->begin() + 10);
  int stalled = connect_and_send(half);
  CHECK(closed_within(stalled, 10000));
  ::close(stalled);
  CHECK(delivered == 0);
}

TEST_CASE("a sender whose kept connection the endpoint closed for idling reconnects, and no frame vanishes", "[actors][bulk]") {
  bulk_endpoint_timeouts limits;
  limits.idle = std::chrono::milliseconds{100};
  counting_endpoint counted{limits};
  auto& delivered = counted.delivered;
  auto& endpoint = counted.endpoint;
  bulk_sender sender;
  auto send = [&](std::int64_t step) {
    std::promise<status> written;
    sender.send(endpoint->address(), step, "a;b;x:0", tensor::from_vector<float>({1.f}),
                [&](const status& s) { written.set_value(s); });
    return written.get_future().get();
  };
  auto delivered_within = [&](int count) {
    for (int i = 0; i < 1000 && delivered < count; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return delivered >= count;
  };
  REQUIRE(send(1).ok());
  REQUIRE(delivered_within(1));
  // Longer than the idle bound: the endpoint has closed the sender's connection by now.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  REQUIRE(send(2).ok());
  CHECK(delivered_within(2));
  sender.close();
}

TEST_CASE("with every connection slot held by idle peers, a real sender still gets through",
          "[actors][bulk]") {
  bulk_endpoint_timeouts limits;
  limits.evictable = std::chrono::milliseconds{0};
  counting_endpoint counted{limits};
  auto& delivered = counted.delivered;
  auto& endpoint = counted.endpoint;
  std::vector<int> squatters;
  for (std::size_t i = 0; i < bulk_endpoint::max_connections; ++i)
    squatters.push_back(connect_to_loopback(counted.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(100)); // all accepted by now
  bulk_sender sender;
  std::promise<status> written;
  sender.send(endpoint->address(), 1, "a;b;x:0", tensor::from_vector<float>({1.f}),
              [&](const status& s) { written.set_value(s); });
  REQUIRE(written.get_future().get().ok());
  for (int i = 0; i < 1000 && delivered == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(delivered == 1);
  sender.close();
  for (int fd : squatters)
    ::close(fd);
}

TEST_CASE("frames beyond the endpoint's in-flight byte budget wait for the ones being received",
          "[actors][bulk]") {
  bulk_endpoint_timeouts limits;
  limits.in_flight_bytes = 1000;
  std::mutex mutex;
  std::vector<std::string> order;
  auto endpoint = bulk_endpoint::listen("127.0.0.1", [&](std::int64_t, std::string key, tensor) {
    std::lock_guard<std::mutex> guard{mutex};
    order.push_back(key);
    return status{};
  }, limits);
  REQUIRE(endpoint.ok());
  auto connect = [&] { return connect_to_loopback(port_of(**endpoint)); };
  auto frame = [](const std::string& key) {
    tensor value = tensor::from_vector<float>(std::vector<float>(200, 1.f)); // 800 bytes
    auto bytes = *encode_bulk_frame_header(1, key, value);
    auto* data = static_cast<const std::uint8_t*>(value.raw_data());
    bytes.insert(bytes.end(), data, data + value.bytes());
    return bytes;
  };
  auto received = [&] {
    std::lock_guard<std::mutex> guard{mutex};
    return order.size();
  };
  auto first = frame("a;b;first:0");
  auto second = frame("a;b;second:0");
  int a = connect();
  int b = connect();
  // A's header and half its bytes: 800 bytes in flight.
  auto half = first.size() - 400;
  REQUIRE(::send(a, first.data(), half, MSG_NOSIGNAL) == static_cast<ssize_t>(half));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // B's whole frame would make 1600: it waits.
  REQUIRE(::send(b, second.data(), second.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(second.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(received() == 0);
  REQUIRE(::send(a, first.data() + half, first.size() - half, MSG_NOSIGNAL) ==
          static_cast<ssize_t>(first.size() - half));
  for (int i = 0; i < 1000 && received() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  {
    std::lock_guard<std::mutex> guard{mutex};
    CHECK(order == std::vector<std::string>{"a;b;first:0", "a;b;second:0"});
  }
  CHECK((*endpoint)->peak_bytes_in_flight() == 800);
  ::close(a);
  ::close(b);
}

TEST_CASE("a bulk endpoint with a cluster token reads frames only from senders that present it",
          "[actors][bulk][security]") {
  transport_security with_token;
  with_token.cluster_token = "bulk secret";
  with_token.handshake_timeout_ms = 200;
  counting_endpoint counted{{}, with_token};
  auto send_with = [&](const transport_security& security, std::int64_t step) {
    bulk_sender sender{security};
    std::promise<status> written;
    sender.send(counted.endpoint->address(), step, "a;b;x:0", tensor::from_vector<float>({1.f}),
                [&](const status& s) { written.set_value(s); });
    auto s = written.get_future().get();
    sender.close();
    return s;
  };
  auto delivered_within = [&](int count, std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (counted.delivered < count && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return counted.delivered >= count;
  };
  REQUIRE(send_with(with_token, 1).ok());
  CHECK(delivered_within(1, std::chrono::seconds(10)));

  transport_security wrong;
  wrong.cluster_token = "bulk secrets";
  CHECK_FALSE(send_with(wrong, 2).ok()); // refused, and told so (the welcome byte never came)
  CHECK_FALSE(send_with(transport_security{}, 3).ok());
  CHECK_FALSE(delivered_within(2, std::chrono::milliseconds(500)));

  // A peer that connects and presents nothing is closed after the handshake timeout.
  int silent = connect_to_loopback(counted.port());
  pollfd p{silent, POLLIN, 0};
  REQUIRE(::poll(&p, 1, 5000) == 1);
  char byte;
  CHECK(::recv(silent, &byte, 1, 0) <= 0);
  ::close(silent);
  CHECK(counted.delivered == 1);
}

TEST_CASE("send credits: a receiver that stops reading holds its sender back instead of its queue growing",
          "[actors][bulk]") {
  // A listener playing an endpoint that lets the sender in and then reads nothing until told.
  auto [listener, target] = loopback_listener();
  REQUIRE(listener >= 0);
  std::atomic<int> accepted{-1};
  std::thread acceptor{[&] {
    int fd = ::accept(listener, nullptr, nullptr);
    int small = 64 << 10;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    ::send(fd, &bulk_welcome, 1, MSG_NOSIGNAL);
    accepted = fd;
  }};

  constexpr std::uint64_t credit = std::uint64_t{4} << 20;
  bulk_sender sender{transport_security{}, {credit, std::chrono::seconds(30)}};
  constexpr int frames = 64; // 64 MiB in all: far more than the socket buffers and the credit
  std::atomic<int> queued{0}, written{0};
  // One MiB of zeros, sent 64 times (written bytes, not uninitialised memory).
  auto payload = tensor::from_vector(std::vector<float>(256 * 1024, 0.f));
  std::thread producer{[&] {
    for (int i = 0; i < frames; ++i) {
      sender.send(target, i, "a;b;x:0", payload,
                  [&](const status& s) { written += s.ok() ? 1 : 0; });
      ++queued;
    }
  }};
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // Held back: the producer waits for room, and the queue never held more than the credit.
  CHECK(queued < frames);
  CHECK(sender.peak_queued_bytes() <= credit);

  acceptor.join();
  REQUIRE(accepted >= 0);
  // The receiver reads again: everything gets through.
  std::thread drain{[fd = accepted.load()] {
    std::vector<char> buffer(1 << 20);
    while (::recv(fd, buffer.data(), buffer.size(), 0) > 0) {
    }
  }};
  producer.join();
  for (int i = 0; i < 3000 && written < frames; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(written == frames);
  CHECK(sender.peak_queued_bytes() <= credit);
  sender.close();
  ::shutdown(accepted, SHUT_RDWR);
  drain.join();
  ::close(accepted);
  ::close(listener);
}

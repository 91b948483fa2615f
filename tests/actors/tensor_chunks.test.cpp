// Tensors larger than the per-message chunk size: the tensor_chunk codec (round trip and
// hostile headers), the reassembly of pieces, and a tensor crossing between two actor systems
// connected through CAF's middleman on loopback in chunks.
#include "actors/device_actor.hpp"
#include "actors/protocols/device.hpp"
#include "actors/protocols/wire.hpp"
#include "devices/rendezvous.hpp"
#include "devices/thread_pool.hpp"
#include "graph/ops.hpp"
#include "graph/partition.hpp"
#include "support/transfer_test_util.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/message.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

using namespace actorflow;
using namespace actorflow::test;
using namespace actorflow::protocol;
using namespace std::chrono_literals;

namespace {

/// Restores the process's chunk size and tensor limit when a test ends.
struct scoped_wire_limits {
  scoped_wire_limits(std::size_t chunk_bytes, std::size_t max_bytes = 0) {
    set_wire_chunk_bytes(chunk_bytes);
    set_max_tensor_bytes(max_bytes);
  }
  ~scoped_wire_limits() {
    set_wire_chunk_bytes(0);
    set_max_tensor_bytes(0);
  }
};

/// A config with actorflow's message types; the deterministic scheduler unless `networked`,
/// which loads the middleman instead.
std::unique_ptr<caf::actor_system> make_system(caf::actor_system_config& cfg, bool networked) {
  if (networked)
    cfg.load<caf::io::middleman>();
  else
    cfg.set("scheduler.policy", caf::atom("testing"));
  add_actorflow_message_types(cfg);
  return std::make_unique<caf::actor_system>(cfg);
}

void run_all(caf::actor_system& sys) {
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  while (sched.try_run_once()) {
  }
}

std::vector<char> encode(caf::actor_system& sys, const tensor_chunk& x) {
  std::vector<char> bytes;
  caf::binary_serializer sink{sys, bytes};
  auto err = sink(const_cast<tensor_chunk&>(x));
  INFO(sys.render(err));
  REQUIRE_FALSE(err);
  return bytes;
}

caf::error decode(caf::actor_system& sys, const std::vector<char>& bytes, tensor_chunk& out) {
  caf::binary_deserializer source{sys, bytes.data(), bytes.size()};
  if (auto err = source(out))
    return err;
  if (source.remaining() != 0)
    return make_wire_error(errc::data_loss, std::to_string(source.remaining()) + " bytes left");
  return caf::none;
}

/// A float32 tensor of `elements` random bit patterns (NaN payloads included).
/// A chunk header written field by field, as a hostile peer could, followed by `carried`
/// bytes of value 1.
std::vector<char> chunk_bytes(caf::actor_system& sys, std::uint8_t type,
                              std::vector<std::int64_t> dims, std::uint64_t total,
                              std::uint64_t offset, std::uint64_t size, std::size_t carried) {
  std::vector<char> bytes;
  caf::binary_serializer sink{sys, bytes};
  std::int64_t step = 1;
  std::string key = "a;b;x:0";
  auto rank = static_cast<std::uint32_t>(dims.size());
  REQUIRE_FALSE(sink(step, key, type, rank));
  for (auto& d : dims)
    REQUIRE_FALSE(sink(d));
  REQUIRE_FALSE(sink(total, offset, size));
  bytes.resize(bytes.size() + carried, 1);
  return bytes;
}

std::string message_of(const caf::error& err) { return status_from_error(err).message(); }


std::unique_ptr<device> cpu_device(const std::string& name) {
  return make_cpu_device(device_name::parse(name).value(), std::make_shared<thread_pool>("intra", 0));
}

} // namespace

TEST_CASE("tensor chunks round-trip through the binary serializer and reassemble bit for bit",
          "[actors][wire]") {
  caf::actor_system_config cfg;
  auto sys = make_system(cfg, false);
  auto value = random_tensor(1000, 7); // 4000 bytes
  auto chunks = make_tensor_chunks(9, "a;b;x:0", value, 1536);
  REQUIRE(chunks.size() == 3);
  CHECK(chunks[2].offset == 3072);
  CHECK(chunks[2].size == 928);
  CHECK(chunks[0].storage == value.buffer_ref());
  tensor_assembler assembler{std::uint64_t{1} << 20};
  tensor whole;
  // Out of order: the last piece first.
  for (auto index : {2, 0, 1}) {
    auto bytes = encode(*sys, chunks[index]);
    tensor_chunk out;
    auto err = decode(*sys, bytes, out);
    INFO(sys->render(err));
    REQUIRE_FALSE(err);
    CHECK(out.step_id == 9);
    CHECK(out.key == "a;b;x:0");
    CHECK(out.type == dtype::float32);
    CHECK(out.shape == value.shape());
    CHECK(out.total_bytes == 4000);
    CHECK(out.offset == chunks[index].offset);
    CHECK(out.size == chunks[index].size);
    CHECK(out.storage != value.buffer_ref());
    REQUIRE(std::memcmp(out.data, chunks[index].data, out.size) == 0);
    auto done = assembler.add(out.step_id, out.key, out.type, out.shape, out.total_bytes,
                              out.offset, out.data, out.size);
    REQUIRE(done.ok());
    CHECK(done->is_initialized() == (index == 1));
    if (done->is_initialized())
      whole = std::move(*done);
  }
  CHECK(same_bytes(whole, value));
  CHECK(assembler.partial_count() == 0);
  CHECK(assembler.partial_bytes() == 0);

  // As the middleman sends it: a whole message, and every truncation of it refused.
  auto message = caf::make_message(tensor_atom::value, chunks[1]);
  std::vector<char> bytes;
  {
    caf::binary_serializer sink{*sys, bytes};
    REQUIRE_FALSE(message.save(sink));
  }
  caf::message out;
  {
    caf::binary_deserializer source{*sys, bytes.data(), bytes.size()};
    REQUIRE_FALSE(out.load(source));
  }
  REQUIRE(out.match_elements<tensor_atom, tensor_chunk>());
  CHECK(std::memcmp(out.get_as<tensor_chunk>(1).data, chunks[1].data, chunks[1].size) == 0);
  auto encoded = encode(*sys, chunks[1]);
  for (std::size_t length = 0; length < encoded.size(); ++length) {
    std::vector<char> prefix(encoded.begin(), encoded.begin() + static_cast<std::ptrdiff_t>(length));
    tensor_chunk truncated;
    INFO("prefix of " << length << " bytes");
    REQUIRE(decode(*sys, prefix, truncated));
  }
}

TEST_CASE("hostile tensor chunk headers are refused with an error before anything large is allocated",
          "[actors][wire]") {
  caf::actor_system_config cfg;
  auto sys = make_system(cfg, false);
  scoped_wire_limits limits{0, std::size_t{64} << 20};
  scoped_counting_allocator counting;
  const auto f32 = static_cast<std::uint8_t>(dtype::float32);
  tensor_chunk out;

  SECTION("a chunk whose range ends past the declared total") {
    auto bytes = chunk_bytes(*sys, f32, {4}, 16, 12, 8, 8);
    auto err = decode(*sys, bytes, out);
    REQUIRE(err);
    CHECK(status_from_error(err).code() == errc::data_loss);
    CHECK(message_of(err).find("does not fit") != std::string::npos);
  }
  SECTION("an offset so large that offset plus size wraps around") {
    auto bytes = chunk_bytes(*sys, f32, {4}, 16, std::numeric_limits<std::uint64_t>::max() - 2, 8, 8);
    auto err = decode(*sys, bytes, out);
    REQUIRE(err);
    CHECK(status_from_error(err).code() == errc::data_loss);
  }
  SECTION("a total that is not the dtype's size times the elements") {
    auto bytes = chunk_bytes(*sys, f32, {4}, 17, 0, 8, 8);
    auto err = decode(*sys, bytes, out);
    REQUIRE(err);
    CHECK(status_from_error(err).code() == errc::data_loss);
    CHECK(message_of(err).find("needs 16") != std::string::npos);
  }
  SECTION("a total over the tensor size limit") {
    constexpr std::int64_t elements = std::int64_t{1} << 30; // 4 GiB of float32
    auto bytes = chunk_bytes(*sys, f32, {elements}, std::uint64_t{4} << 30, 0, 8, 8);
    auto err = decode(*sys, bytes, out);
    REQUIRE(err);
    CHECK(status_from_error(err).code() == errc::resource_exhausted);
    // The tensor's limit, not the per-message one (whose error says "limit" too).
    CHECK(message_of(err).find("bytes for one tensor") != std::string::npos);
  }
  SECTION("a chunk over the per-message limit") {
    auto size = static_cast<std::uint64_t>(max_tensor_message_bytes) + 4;
    set_max_tensor_bytes(std::size_t{1} << 30);
    auto bytes = chunk_bytes(*sys, f32, {std::int64_t{1} << 27}, std::uint64_t{1} << 29, 0, size, 8);
    auto err = decode(*sys, bytes, out);
    REQUIRE(err);
    CHECK(status_from_error(err).code() == errc::resource_exhausted);
    CHECK(message_of(err).find("per-message limit") != std::string::npos);
  }
  SECTION("a chunk claiming far more bytes than the message holds") {
    auto bytes = chunk_bytes(*sys, f32, {std::int64_t{4} << 20}, std::uint64_t{16} << 20, 0,
                             std::uint64_t{16} << 20, 64);
    auto err = decode(*sys, bytes, out);
    REQUIRE(err);
    CHECK(message_of(err).find("truncated") != std::string::npos);
  }
  SECTION("an empty chunk, an unknown dtype, a negative dimension and a boolean byte of 2") {
    auto empty = chunk_bytes(*sys, f32, {4}, 16, 0, 0, 0);
    CHECK(decode(*sys, empty, out));
    auto unknown = chunk_bytes(*sys, 200, {4}, 16, 0, 16, 16);
    CHECK(decode(*sys, unknown, out));
    auto negative = chunk_bytes(*sys, f32, {-4}, 16, 0, 16, 16);
    CHECK(decode(*sys, negative, out));
    auto boolean = chunk_bytes(*sys, static_cast<std::uint8_t>(dtype::boolean), {4}, 4, 2, 2, 0);
    boolean.push_back(1);
    boolean.push_back(2);
    auto err = decode(*sys, boolean, out);
    REQUIRE(err);
    CHECK(message_of(err).find("element 3") != std::string::npos);
  }
  CHECK(counting.largest() < 1024);
  CHECK(out.data == nullptr);
}

TEST_CASE("the assembler refuses duplicate, overlapping and inconsistent pieces and drops aborted steps",
          "[actors][wire]") {
  std::vector<char> source(64);
  for (std::size_t i = 0; i < source.size(); ++i)
    source[i] = static_cast<char>(i);
  const tensor_shape shape{16};
  tensor_assembler assembler{1024};
  auto add = [&](std::int64_t step, std::uint64_t offset, std::uint64_t size,
                 dtype type = dtype::float32, tensor_shape s = tensor_shape{16}) {
    return assembler.add(step, "k", type, s, size_of(type) * static_cast<std::uint64_t>(s.num_elements()),
                         offset, source.data() + offset, size);
  };

  SECTION("a duplicate piece") {
    REQUIRE(add(1, 0, 16).ok());
    auto again = add(1, 0, 16);
    REQUIRE_FALSE(again.ok());
    CHECK(again.error().code() == errc::data_loss);
    CHECK(again.error().message().find("overlaps") != std::string::npos);
    CHECK(assembler.partial_count() == 0); // the partial tensor went with the refusal
  }
  SECTION("pieces overlapping from either side") {
    REQUIRE(add(1, 16, 16).ok());
    CHECK_FALSE(add(1, 8, 16).ok());
    REQUIRE(add(2, 16, 16).ok());
    CHECK_FALSE(add(2, 24, 16).ok());
    REQUIRE(add(3, 0, 8).ok());
    REQUIRE(add(3, 32, 8).ok());
    CHECK_FALSE(add(3, 4, 32).ok()); // spans a gap and both neighbours
  }
  SECTION("a piece declaring another dtype or shape than the first") {
    REQUIRE(add(1, 0, 16).ok());
    CHECK_FALSE(add(1, 16, 16, dtype::int32).ok());
    REQUIRE(add(2, 0, 16).ok());
    CHECK_FALSE(add(2, 16, 16, dtype::float32, tensor_shape{4, 4}).ok());
  }
  SECTION("a tensor over the limit, a total not matching the shape, a piece past the end") {
    auto big = assembler.add(1, "k", dtype::float32, tensor_shape{1024}, 4096, 0, source.data(), 8);
    REQUIRE_FALSE(big.ok());
    CHECK(big.error().code() == errc::resource_exhausted);
    CHECK_FALSE(assembler.add(1, "k", dtype::float32, shape, 65, 0, source.data(), 8).ok());
    CHECK_FALSE(assembler.add(1, "k", dtype::float32, shape, 64, 60, source.data(), 8).ok());
    CHECK_FALSE(assembler.add(1, "k", dtype::float32, shape, 64, 8, source.data(), 0).ok());
    CHECK(assembler.partial_bytes() == 0);
  }
  SECTION("pieces in any order complete exactly once; dropped steps free their tensors") {
    REQUIRE(add(5, 48, 16).ok());
    REQUIRE(add(5, 0, 16).ok());
    REQUIRE(add(6, 0, 16).ok());
    CHECK(assembler.partial_count() == 2);
    CHECK(assembler.partial_bytes() == 128);
    assembler.drop_step(6);
    CHECK(assembler.partial_count() == 1);
    REQUIRE(add(5, 32, 16).ok());
    auto last = add(5, 16, 16);
    REQUIRE(last.ok());
    REQUIRE(last->is_initialized());
    CHECK(std::memcmp(last->raw_data(), source.data(), 64) == 0);
    CHECK(assembler.partial_count() == 0);
    CHECK(assembler.partial_bytes() == 0);
  }
}

TEST_CASE("the chunk size defaults to the per-message limit and can be lowered for tests",
          "[actors][wire]") {
  {
    scoped_wire_limits limits{std::size_t{1} << 20};
    CHECK(wire_chunk_bytes() == std::size_t{1} << 20);
    set_wire_chunk_bytes(std::size_t{1} << 40);
    CHECK(wire_chunk_bytes() == max_tensor_message_bytes);
  }
  if (std::getenv("ACTORFLOW_WIRE_CHUNK_BYTES") == nullptr)
    CHECK(wire_chunk_bytes() == max_tensor_message_bytes);
  if (std::getenv("ACTORFLOW_WIRE_MAX_TENSOR_BYTES") == nullptr)
    CHECK(max_tensor_bytes() == default_max_tensor_bytes);
}

TEST_CASE("a device actor fails the step naming the fault when a peer sends overlapping chunks",
          "[actors][wire]") {
  caf::actor_system_config cfg;
  auto sys = make_system(cfg, false);
  auto value = random_tensor(4096, 3);
  crossing_graph cg{value};
  std::vector<std::string> trace;
  device_actor_options options;
  options.trace = [&](const std::string& line) { trace.push_back(line); };
  auto receiver = spawn_device_actor(*sys, cpu_device(receiver_device), options);
  status registered = make_error(errc::internal, "no answer");
  step_result result;
  bool answered = false;
  auto client = sys->spawn([&](caf::event_based_actor* self) {
    self->request(receiver, caf::infinite, register_atom::value,
                  make_partition_registration(1, cg.parts.at(receiver_device)))
      .then([&](status& s) { registered = s; });
  });
  run_all(*sys);
  REQUIRE(registered.ok());
  auto chunks = make_tensor_chunks(4, cg.key(), value, 4096);
  REQUIRE(chunks.size() == 4);
  // Two chunks before the step starts here, then a duplicate of the first.
  caf::anon_send(receiver, tensor_atom::value, chunks[0]);
  caf::anon_send(receiver, tensor_atom::value, chunks[1]);
  auto runner = sys->spawn([&](caf::event_based_actor* self) {
    self->request(receiver, caf::infinite, run_atom::value,
                  make_run_request(1, 4, {}, {cg.fetched.tensor_name()}))
      .then([&](step_result& r) {
        result = std::move(r);
        answered = true;
      });
  });
  run_all(*sys);
  CHECK_FALSE(answered);
  caf::anon_send(receiver, tensor_atom::value, chunks[0]);
  run_all(*sys);
  REQUIRE(answered);
  CHECK(result.outcome.code() == errc::data_loss);
  CHECK(result.outcome.message().find("overlaps") != std::string::npos);
  CHECK(result.outcome.message().find(receiver_device) != std::string::npos);
  // Chunks of the ended step are dropped quietly.
  caf::anon_send(receiver, tensor_atom::value, chunks[2]);
  run_all(*sys);

  // The next step gets every chunk once, out of order, and fetches the tensor bit for bit.
  answered = false;
  auto chunks5 = make_tensor_chunks(5, cg.key(), value, 4096);
  auto again = sys->spawn([&](caf::event_based_actor* self) {
    self->request(receiver, caf::infinite, run_atom::value,
                  make_run_request(1, 5, {}, {cg.fetched.tensor_name()}))
      .then([&](step_result& r) {
        result = std::move(r);
        answered = true;
      });
  });
  for (auto index : {3, 1, 0, 2})
    caf::anon_send(receiver, tensor_atom::value, chunks5[index]);
  run_all(*sys);
  REQUIRE(answered);
  INFO(result.outcome.to_string());
  REQUIRE(result.outcome.ok());
  REQUIRE(result.fetched.size() == 1);
  CHECK(same_bytes(result.fetched[0], value));
  for (auto& a : {caf::actor_cast<caf::actor>(client), caf::actor_cast<caf::actor>(runner),
                  caf::actor_cast<caf::actor>(again), caf::actor_cast<caf::actor>(receiver)})
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  run_all(*sys);
}

TEST_CASE("a tensor larger than the chunk size crosses two actor systems over loopback in chunks, "
          "bit for bit",
          "[actors][wire]") {
  scoped_wire_limits limits{std::size_t{1} << 20};
  // 5 MiB and 28 bytes of float32: five whole chunks and a short one.
  constexpr std::int64_t elements = (std::int64_t{5} << 20) / 4 + 7;
  auto value = random_tensor(elements, 11);
  crossing_graph cg{value};

  caf::actor_system_config sender_cfg;
  caf::actor_system_config receiver_cfg;
  auto sender_sys = make_system(sender_cfg, true);
  auto receiver_sys = make_system(receiver_cfg, true);
  std::mutex trace_mutex;
  std::vector<std::string> trace;
  device_actor_options receiver_options;
  receiver_options.trace = [&](const std::string& line) {
    std::lock_guard<std::mutex> guard{trace_mutex};
    trace.push_back(line);
  };
  auto receiver = spawn_device_actor(*receiver_sys, cpu_device(receiver_device), receiver_options);
  auto sender = spawn_device_actor(*sender_sys, cpu_device(sender_device), {});
  auto port = receiver_sys->middleman().publish(receiver, 0, "127.0.0.1");
  REQUIRE(port);
  auto remote_receiver = sender_sys->middleman().remote_actor<device_actor>("127.0.0.1", *port);
  REQUIRE(remote_receiver);
  REQUIRE(remote_receiver->node() != sender.node());

  caf::scoped_actor on_sender{*sender_sys};
  caf::scoped_actor on_receiver{*receiver_sys};
  std::string failure;
  auto fail = [&](caf::error& err) { failure = caf::to_string(err); };
  auto require_registered = [&](caf::scoped_actor& self, const device_actor& dev,
                                const std::string& name) {
    status registered = make_error(errc::internal, "no answer");
    self->request(dev, 30s, register_atom::value, make_partition_registration(1, cg.parts.at(name)))
      .receive([&](status& s) { registered = s; }, fail);
    INFO(failure << registered.to_string());
    REQUIRE(registered.ok());
  };
  require_registered(on_sender, sender, sender_device);
  require_registered(on_receiver, receiver, receiver_device);
  peer_table peers;
  peers.devices[sender_device] = sender;
  peers.devices[receiver_device] = *remote_receiver;
  on_sender->send(sender, peers_atom::value, peers);

  for (std::int64_t step = 1; step <= 2; ++step) {
    INFO("step " << step);
    auto sent = on_sender->request(sender, 30s, run_atom::value, make_run_request(1, step, {}, {}));
    step_result received;
    on_receiver
      ->request(receiver, 30s, run_atom::value,
                make_run_request(1, step, {}, {cg.fetched.tensor_name()}))
      .receive([&](step_result& r) { received = std::move(r); }, fail);
    step_result sender_result;
    sent.receive([&](step_result& r) { sender_result = std::move(r); }, fail);
    INFO(failure);
    REQUIRE(failure.empty());
    INFO(sender_result.outcome.to_string() << " / " << received.outcome.to_string());
    REQUIRE(sender_result.outcome.ok());
    REQUIRE(received.outcome.ok());
    REQUIRE(received.fetched.size() == 1);
    CHECK(same_bytes(received.fetched[0], value));
    CHECK_FALSE(received.fetched[0].shares_buffer_with(value));
  }
  std::lock_guard<std::mutex> guard{trace_mutex};
  auto chunk_lines = std::count_if(trace.begin(), trace.end(), [](const std::string& line) {
    return line.find(" chunk ") != std::string::npos;
  });
  CHECK(chunk_lines == 2 * 6);
  for (auto& a : {sender, receiver})
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

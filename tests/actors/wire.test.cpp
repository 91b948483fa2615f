#include "actors/protocols/wire.hpp"

#include "actors/bulk_channel.hpp"
#include "actors/device_actor.hpp"
#include "actors/protocols/device.hpp"
#include "serialization/graph_io_support.hpp"
#include "actors/testing.hpp"
#include "support/transfer_test_util.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/deep_to_string.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/message.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

using namespace actorflow;
using namespace actorflow::protocol;
using actorflow::test::same_bytes;
using actorflow::test::scoped_counting_allocator;

namespace {

/// An actor system on the deterministic scheduler whose config knows actorflow's message types.
class wire_system {
public:
  wire_system() {
    config_.set("scheduler.policy", caf::atom("testing"));
    add_actorflow_message_types(config_);
    system_ = std::make_unique<caf::actor_system>(config_);
  }
  caf::actor_system& system() { return *system_; }
  void run_all() {
    auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(system_->scheduler());
    while (sched.try_run_once()) {
    }
  }

private:
  caf::actor_system_config config_;
  std::unique_ptr<caf::actor_system> system_;
};

template <class T>
std::vector<char> encode(caf::actor_system& sys, const T& x) {
  std::vector<char> bytes;
  caf::binary_serializer sink{sys, bytes};
  caf::error err;
  if constexpr (std::is_same_v<T, caf::message>)
    err = x.save(sink);
  else
    err = sink(const_cast<T&>(x));
  INFO(sys.render(err));
  REQUIRE_FALSE(err);
  return bytes;
}

template <class T>
caf::error decode(caf::actor_system& sys, const char* data, std::size_t size, T& out) {
  caf::binary_deserializer source{sys, data, size};
  // A lone caf::message given to a 0.17 deserializer's operator() is skipped; BASP and
  // inspect() go through message::load, so call it directly.
  caf::error err;
  if constexpr (std::is_same_v<T, caf::message>)
    err = out.load(source);
  else
    err = source(out);
  if (err)
    return err;
  if (source.remaining() != 0)
    return make_wire_error(errc::data_loss, std::to_string(source.remaining()) + " bytes left");
  return caf::none;
}

template <class T>
T round_trip(caf::actor_system& sys, const T& x) {
  auto bytes = encode(sys, x);
  T out;
  auto err = decode(sys, bytes.data(), bytes.size(), out);
  INFO(sys.render(err));
  REQUIRE_FALSE(err);
  return out;
}

/// Decodes every strict prefix of `bytes` as a T and requires each to fail cleanly.
template <class T>
void require_every_truncation_refused(caf::actor_system& sys, const std::vector<char>& bytes) {
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    // A copy of exactly `length` bytes, so reading past it is caught by sanitizers too.
    std::vector<char> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(length));
    T out;
    auto err = decode(sys, prefix.data(), prefix.size(), out);
    INFO("prefix of " << length << " of " << bytes.size() << " bytes");
    REQUIRE(err);
  }
}

/// Bytes of a tensor header written field by field, as a hostile peer could.
std::vector<char> tensor_header(caf::actor_system& sys, std::uint8_t type,
                                std::vector<std::int64_t> dims, std::uint64_t byte_count) {
  std::vector<char> bytes;
  caf::binary_serializer sink{sys, bytes};
  bool initialized = true;
  bool rank_known = true;
  auto rank = static_cast<std::uint32_t>(dims.size());
  REQUIRE_FALSE(sink(type, initialized, rank_known, rank));
  for (auto& d : dims)
    REQUIRE_FALSE(sink(d));
  REQUIRE_FALSE(sink(byte_count));
  return bytes;
}

std::string message_of(const caf::error& err) { return status_from_error(err).message(); }

} // namespace

TEST_CASE("tensors of every dtype round-trip through the binary serializer bit for bit",
          "[actors][wire]") {
  wire_system w;
  auto& sys = w.system();
  auto nan_with_payload = [] {
    std::uint32_t bits = 0x7fc12345u;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }();
  std::vector<tensor> inputs{
    tensor::from_vector<float>({1.5f, -0.f, nan_with_payload,
                                std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::denorm_min()}),
    tensor::from_vector<double>({3.141592653589793, -0.0, std::nan("7"), 1e-310}),
    tensor::from_vector<std::int32_t>({std::numeric_limits<std::int32_t>::min(), -1, 0,
                                       std::numeric_limits<std::int32_t>::max()}),
    tensor::from_vector<std::int64_t>({std::numeric_limits<std::int64_t>::min(), 42,
                                       std::numeric_limits<std::int64_t>::max()}),
    tensor::from_vector<bool>({true, false, true}),
  };
  for (const auto& in : inputs) {
    INFO(in.debug_string());
    auto out = round_trip(sys, in);
    CHECK(same_bytes(in, out));
    CHECK_FALSE(out.shares_buffer_with(in));
  }
}

TEST_CASE("a scalar, an empty tensor, a rank-3 tensor and an empty handle keep their shapes",
          "[actors][wire]") {
  wire_system w;
  auto& sys = w.system();

  auto scalar = tensor::scalar<double>(2.5);
  auto scalar_out = round_trip(sys, scalar);
  CHECK(scalar_out.shape().rank() == 0);
  CHECK(same_bytes(scalar, scalar_out));

  tensor empty{dtype::int32, tensor_shape{0, 3}};
  auto empty_out = round_trip(sys, empty);
  CHECK(empty_out.is_initialized());
  CHECK(empty_out.shape() == tensor_shape({0, 3}));
  CHECK(empty_out.type() == dtype::int32);

  std::vector<float> values(2 * 3 * 4);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>(i) * 0.25f - 1.f;
  auto rank3 = tensor::from_vector(values, tensor_shape{2, 3, 4});
  auto rank3_out = round_trip(sys, rank3);
  CHECK(rank3_out.shape() == tensor_shape({2, 3, 4}));
  CHECK(same_bytes(rank3, rank3_out));

  auto handle_out = round_trip(sys, tensor{});
  CHECK_FALSE(handle_out.is_initialized());
}

TEST_CASE("a status keeps its code and message on the wire", "[actors][wire]") {
  wire_system w;
  auto in = make_error(errc::aborted, "node 'mul' on /job:worker/task:1: step 7 aborted");
  CHECK(round_trip(w.system(), in) == in);
  CHECK(round_trip(w.system(), status{}).ok());
}

TEST_CASE("a status keeps the task it came from on the wire and in an error", "[actors][wire]") {
  wire_system w;
  auto from_ps = make_error(errc::unavailable, "shard 'w' is unreachable")
                   .with_origin({"ps", 1, 0xfeedULL});
  auto out = round_trip(w.system(), from_ps);
  REQUIRE(out.origin());
  CHECK(out.origin()->job == "ps");
  CHECK(out.origin()->task == 1);
  CHECK(out.origin()->incarnation == 0xfeedULL);
  CHECK(out == from_ps);
  // As a caf::error (a refused request), serialized as CAF sends it to another node.
  auto relayed = status_from_error(round_trip(w.system(), make_wire_error(from_ps)));
  CHECK(relayed == from_ps);
  CHECK(relayed.origin()->name() == "/job:ps/replica:0/task:1");
  // Context keeps the origin; a later attribution does not replace the first.
  auto wrapped = relayed.with_context("pushing 'w'").with_origin({"worker", 0, 7});
  CHECK(wrapped.origin()->job == "ps");
  CHECK_FALSE(round_trip(w.system(), make_error(errc::aborted, "x")).origin());
  CHECK_FALSE(status{}.with_origin({"ps", 0, 0}).origin());
}

TEST_CASE("run requests, step results and tensor transfers round-trip with their tensors",
          "[actors][wire]") {
  wire_system w;
  auto& sys = w.system();

  auto request = make_run_request(
    3, 17, {{"x:0", tensor::from_vector<float>({1.f, 2.f})}, {"flag", tensor::scalar(true)}},
    {"loss:0", "train"});
  auto request_out = round_trip(sys, request);
  CHECK(request_out.handle == 3);
  CHECK(request_out.step_id == 17);
  REQUIRE(request_out.feeds.size() == 2);
  CHECK(request_out.feeds[0].first == "x:0");
  CHECK(same_bytes(request_out.feeds[0].second, request.feeds[0].second));
  CHECK(request_out.feeds[1].first == "flag");
  CHECK(same_bytes(request_out.feeds[1].second, request.feeds[1].second));
  CHECK(request_out.fetches == request.fetches);

  step_result result{make_error(errc::not_found, "no feed 'y'"),
                     {tensor::scalar<std::int64_t>(9), tensor{}}, 12345};
  auto result_out = round_trip(sys, result);
  CHECK(result_out.outcome == result.outcome);
  REQUIRE(result_out.fetched.size() == 2);
  CHECK(same_bytes(result_out.fetched[0], result.fetched[0]));
  CHECK_FALSE(result_out.fetched[1].is_initialized());
  CHECK(result_out.execution_ns == 12345);

  tensor_transfer transfer{5, "edge_3_a:0;0:/cpu:0->/cpu:1",
                           tensor::from_vector<double>({1, 2, 3, 4}, tensor_shape{2, 2})};
  auto transfer_out = round_trip(sys, transfer);
  CHECK(transfer_out.step_id == 5);
  CHECK(transfer_out.key == transfer.key);
  CHECK(same_bytes(transfer_out.value, transfer.value));
}

TEST_CASE("peer tables, step plans and step outcomes round-trip with actor handles",
          "[actors][wire]") {
  wire_system w;
  auto& sys = w.system();
  auto dummy = sys.spawn([]() -> caf::behavior { return {[](int) {}}; });

  peer_table peers;
  peers.devices["/job:worker/task:0/device:CPU:0"] = caf::actor_cast<device_actor>(dummy);
  peers.devices["/job:worker/task:0/device:CPU:1"] = device_actor{};
  auto peers_out = round_trip(sys, peers);
  REQUIRE(peers_out.devices.size() == 2);
  CHECK(peers_out.devices.at("/job:worker/task:0/device:CPU:0").address() == dummy.address());
  CHECK_FALSE(peers_out.devices.at("/job:worker/task:0/device:CPU:1"));

  step_plan plan{8, {{caf::actor_cast<device_actor>(dummy), make_run_request(1, 8, {{"a", tensor::scalar(1.f)}}, {"b"})}}};
  auto plan_out = round_trip(sys, plan);
  CHECK(plan_out.step_id == 8);
  REQUIRE(plan_out.calls.size() == 1);
  CHECK(plan_out.calls[0].first.address() == dummy.address());
  CHECK(plan_out.calls[0].second.fetches == std::vector<std::string>{"b"});
  CHECK(same_bytes(plan_out.calls[0].second.feeds.at(0).second, tensor::scalar(1.f)));

  step_outcome outcome{status{}, {{tensor::scalar(2.f)}, {}}, 99, {1}};
  auto outcome_out = round_trip(sys, outcome);
  CHECK(outcome_out.outcome.ok());
  REQUIRE(outcome_out.fetched.size() == 2);
  CHECK(same_bytes(outcome_out.fetched[0].at(0), tensor::scalar(2.f)));
  CHECK(outcome_out.fetched[1].empty());
  CHECK(outcome_out.execution_ns == 99);
  CHECK(outcome_out.hung_calls == std::vector<std::int32_t>{1});
  caf::anon_send_exit(dummy, caf::exit_reason::user_shutdown);
  w.run_all();
}

TEST_CASE("a partition registration carries its graph with names, ops, attrs and devices",
          "[actors][wire]") {
  wire_system w;
  auto g = std::make_shared<graph>();
  actorflow::test::build_sample_graph(*g);
  REQUIRE(g->status().ok());
  auto in = make_partition_registration(42, g);
  auto out = round_trip(w.system(), in);
  CHECK(out.handle == 42);
  REQUIRE(out.partition != nullptr);
  CHECK(out.partition != in.partition);
  actorflow::test::require_same_graph(*g, *out.partition);

  auto none_out = round_trip(w.system(), make_partition_registration(1, nullptr));
  CHECK(none_out.partition == nullptr);
}

TEST_CASE("a whole message of registered types crosses the serializer as the middleman sends it",
          "[actors][wire]") {
  wire_system w;
  auto& sys = w.system();
  tensor_transfer transfer{2, "key", tensor::from_vector<std::int32_t>({7, 8, 9})};
  auto in = caf::make_message(tensor_atom::value, transfer);
  auto bytes = encode(sys, in);
  caf::message out;
  auto err = decode(sys, bytes.data(), bytes.size(), out);
  INFO(sys.render(err));
  REQUIRE_FALSE(err);
  REQUIRE(out.match_elements<tensor_atom, tensor_transfer>());
  const auto& got = out.get_as<tensor_transfer>(1);
  CHECK(got.key == "key");
  CHECK(same_bytes(got.value, transfer.value));
  CHECK(caf::deep_to_string(transfer).find("tensor_transfer") != std::string::npos);

  auto abort = caf::make_message(abort_atom::value, std::int64_t{4},
                                 make_error(errc::aborted, "peer failed"));
  auto abort_bytes = encode(sys, abort);
  caf::message abort_out;
  REQUIRE_FALSE(decode(sys, abort_bytes.data(), abort_bytes.size(), abort_out));
  REQUIRE(abort_out.match_elements<abort_atom, std::int64_t, status>());
  CHECK(abort_out.get_as<status>(2) == make_error(errc::aborted, "peer failed"));
  require_every_truncation_refused<caf::message>(sys, bytes);
}

TEST_CASE("messages truncated at every length are refused with an error", "[actors][wire]") {
  wire_system w;
  auto& sys = w.system();
  tensor_transfer transfer{5, "k", tensor::from_vector<float>({1.f, 2.f, 3.f})};
  require_every_truncation_refused<tensor_transfer>(sys, encode(sys, transfer));
  require_every_truncation_refused<run_request>(
    sys, encode(sys, make_run_request(1, 2, {{"x", tensor::scalar(true)}}, {"y"})));
  require_every_truncation_refused<step_result>(
    sys, encode(sys, step_result{make_error(errc::internal, "bug"), {tensor::scalar(1.0)}, 3}));

  auto g = std::make_shared<graph>();
  actorflow::test::build_sample_graph(*g);
  require_every_truncation_refused<partition_registration>(
    sys, encode(sys, make_partition_registration(1, g)));
}

TEST_CASE("a tensor header claiming 2^40 elements is refused before anything is allocated",
          "[actors][wire]") {
  wire_system w;
  auto& sys = w.system();
  constexpr std::int64_t huge = std::int64_t{1} << 40;
  scoped_counting_allocator counting;

  SECTION("with a matching byte count, over the per-message limit") {
    auto bytes = tensor_header(sys, static_cast<std::uint8_t>(dtype::float32), {huge},
                               static_cast<std::uint64_t>(huge) * 4);
    tensor out;
    auto err = decode(sys, bytes.data(), bytes.size(), out);
    REQUIRE(err);
    CHECK(status_from_error(err).code() == errc::resource_exhausted);
    CHECK(message_of(err).find("per-message limit") != std::string::npos);
  }
  SECTION("with a byte count that does not match the shape") {
    auto bytes = tensor_header(sys, static_cast<std::uint8_t>(dtype::float32), {huge}, 16);
    tensor out;
    auto err = decode(sys, bytes.data(), bytes.size(), out);
    REQUIRE(err);
    CHECK(status_from_error(err).code() == errc::data_loss);
  }
  SECTION("with dimensions whose product overflows") {
    auto bytes =
      tensor_header(sys, static_cast<std::uint8_t>(dtype::int64), {huge, huge, huge}, 8);
    tensor out;
    REQUIRE(decode(sys, bytes.data(), bytes.size(), out));
  }
  SECTION("under the limit but with far fewer bytes than it claims") {
    constexpr std::int64_t elements = std::int64_t{16} << 20; // 64 MiB of float32
    auto bytes = tensor_header(sys, static_cast<std::uint8_t>(dtype::float32), {elements},
                               static_cast<std::uint64_t>(elements) * 4);
    bytes.resize(bytes.size() + 64, 0);
    tensor out;
    auto err = decode(sys, bytes.data(), bytes.size(), out);
    REQUIRE(err);
    CHECK(message_of(err).find("truncated") != std::string::npos);
  }
  SECTION("with a negative dimension, an unknown dtype or a boolean byte of 2") {
    tensor out;
    auto negative = tensor_header(sys, 0, {-4}, 16);
    CHECK(decode(sys, negative.data(), negative.size(), out));
    auto unknown = tensor_header(sys, 200, {1}, 4);
    CHECK(decode(sys, unknown.data(), unknown.size(), out));
    auto boolean = tensor_header(sys, static_cast<std::uint8_t>(dtype::boolean), {2}, 2);
    boolean.push_back(1);
    boolean.push_back(2);
    auto err = decode(sys, boolean.data(), boolean.size(), out);
    REQUIRE(err);
    CHECK(message_of(err).find("boolean") != std::string::npos);
  }
  CHECK(counting.largest() < 1024);
}

TEST_CASE("a tensor over the per-message limit is refused when sending with a clear error",
          "[actors][wire]") {
  wire_system w;
  // Claims 512 MiB over a tiny buffer: encoding must stop at the size check, before reading.
  float backing[4] = {};
  auto fake = std::make_shared<buffer>(backing, sizeof backing, [](void*) {});
  tensor big{dtype::float32, tensor_shape{std::int64_t{1} << 27}, fake};
  std::vector<char> bytes;
  caf::binary_serializer sink{w.system(), bytes};
  auto err = sink(big);
  REQUIRE(err);
  CHECK(status_from_error(err).code() == errc::resource_exhausted);
  CHECK(message_of(err).find("chunked") != std::string::npos);
}

TEST_CASE("a tensor in device memory is refused by the encoder, naming the device",
          "[actors][wire]") {
  wire_system w;
  float backing[4] = {};
  memory_space gpu{"/job:w/replica:0/task:0/device:GPU:0"};
  tensor on_device{dtype::float32, tensor_shape{4},
                   std::make_shared<buffer>(backing, sizeof backing, [](void*) {}, &gpu)};
  std::vector<char> bytes;
  caf::binary_serializer sink{w.system(), bytes};
  auto err = sink(on_device);
  REQUIRE(err);
  CHECK(status_from_error(err).code() == errc::failed_precondition);
  CHECK(message_of(err).find("in the memory of /job:w/replica:0/task:0/device:GPU:0") !=
        std::string::npos);
  auto header = encode_bulk_frame_header(1, "key", on_device);
  REQUIRE_FALSE(header.ok());
  CHECK(header.error().message().find("bulk frame for 'key'") != std::string::npos);
}

TEST_CASE("a local send between two actors shares the tensor buffer instead of encoding it",
          "[actors][wire]") {
  wire_system w;
  auto& sys = w.system();
  void* received = nullptr;
  std::shared_ptr<buffer> received_buffer;
  auto receiver = sys.spawn([&]() -> caf::behavior {
    return {[&](tensor_atom, const tensor_transfer& t) {
      received = t.value.raw_data();
      received_buffer = t.value.buffer_ref();
    }};
  });
  auto forwarder = sys.spawn([receiver](caf::event_based_actor* self) -> caf::behavior {
    return {[self, receiver](tensor_atom, const tensor_transfer& t) {
      self->send(receiver, tensor_atom::value, t);
    }};
  });
  tensor_transfer transfer{1, "k", tensor::from_vector<float>({1.f, 2.f, 3.f})};
  {
    caf::scoped_actor self{sys};
    self->send(forwarder, tensor_atom::value, transfer);
  }
  w.run_all();
  CHECK(received == transfer.value.raw_data());
  CHECK(received_buffer == transfer.value.buffer_ref());
  caf::anon_send_exit(forwarder, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(receiver, caf::exit_reason::user_shutdown);
  w.run_all();
}

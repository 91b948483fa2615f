// The device actor's rendezvous keys: tensors are admitted only for this device and from the
// sender's current incarnation (a restarted task's earlier life is fenced off).
#include "actors/device_actor.hpp"
#include "actors/testing.hpp"
#include "devices/commit_gate.hpp"
#include "devices/thread_pool.hpp"
#include "graph/ops.hpp"
#include "graph/partition.hpp"
#include "graph/rendezvous_key.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <functional>
#include <optional>

using namespace actorflow;
using namespace actorflow::protocol;
using namespace std::chrono_literals;

namespace {

const std::string sender_device = "/job:ps/replica:0/task:0/device:CPU:0";
const std::string receiver_device = "/job:worker/replica:0/task:0/device:CPU:0";
constexpr std::uint64_t current_life = 0x5;
constexpr std::uint64_t earlier_life = 0x4;

/// y = square(x): x produced on the ps, squared on the worker. The worker's partition.
std::shared_ptr<graph> worker_partition() {
  graph g;
  output x;
  {
    auto d = g.device(sender_device);
    x = ops::constant(g, 3.f, "x");
  }
  {
    auto d = g.device(receiver_device);
    ops::square(x, "y");
  }
  std::vector<int> all;
  for (std::size_t i = 0; i < g.size(); ++i) {
    g.at(static_cast<int>(i)).assigned_device = g.at(static_cast<int>(i)).requested_device;
    all.push_back(static_cast<int>(i));
  }
  auto parts = partition_graph(g, all, {}, {{sender_device, current_life}});
  REQUIRE(parts.ok());
  return parts->at(receiver_device);
}

/// The worker's device actor on the test scheduler, traced into sys.trace().
device_actor spawn_receiver(testing::deterministic_system& sys, device_actor_options options = {},
                            const std::string& device = receiver_device) {
  options.trace = sys.tracer();
  return spawn_device_actor(
    sys.system(),
    make_cpu_device(*device_name::parse(device), std::make_shared<thread_pool>("intra", 0)),
    options);
}

} // namespace

TEST_CASE("a tensor keyed for an earlier life of its sender is refused, the current one runs") {
  testing::deterministic_system sys;
  auto receiver = spawn_receiver(sys);
  peer_table peers;
  peers.devices[receiver_device] = receiver;
  peers.incarnations[sender_device] = current_life;
  caf::anon_send(receiver, peers_atom::value, peers);

  caf::scoped_actor client{sys.system()};
  client->send(receiver, register_atom::value, make_partition_registration(1, worker_partition()));
  sys.run_all();
  client->receive([](status& s) { REQUIRE(s.ok()); }, caf::after(0s) >> [] { FAIL("no answer"); });

  client->send(receiver, run_atom::value, make_run_request(1, 7, {}, {"y:0"}));
  // The sender restarted: its earlier life still had x:0 in flight for step 7.
  auto stale = make_rendezvous_key(sender_device, receiver_device, "x:0", earlier_life);
  caf::anon_send(receiver, tensor_atom::value,
                 make_tensor_transfer(7, stale.to_string(), tensor::scalar(100.f)));
  // And a key that names another device is no business of this one.
  auto misrouted = make_rendezvous_key(sender_device, sender_device, "x:0", current_life);
  caf::anon_send(receiver, tensor_atom::value,
                 make_tensor_transfer(7, misrouted.to_string(), tensor::scalar(100.f)));
  sys.run_all();
  std::optional<step_result> early;
  client->receive([&](step_result& r) { early = std::move(r); }, caf::after(0s) >> [] {});
  CHECK_FALSE(early.has_value()); // still waiting for x:0 from the current life

  auto live = make_rendezvous_key(sender_device, receiver_device, "x:0", current_life);
  caf::anon_send(receiver, tensor_atom::value,
                 make_tensor_transfer(7, live.to_string(), tensor::scalar(3.f)));
  sys.run_all();
  std::optional<step_result> done;
  client->receive([&](step_result& r) { done = std::move(r); }, caf::after(0s) >> [] {});
  REQUIRE(done.has_value());
  REQUIRE(done->outcome.ok());
  CHECK(done->fetched.at(0).scalar_value<float>() == 9.f);

  int refused = 0;
  for (auto& line : sys.trace()) {
    UNSCOPED_INFO(line);
    // Not admitted, a tensor is named by its whole key: "... refused <key> step 7: <why>".
    if (line.rfind("/device:CPU:0 refused ", 0) == 0 && line.find(";x:0 step 7: ") != std::string::npos)
      ++refused;
  }
  CHECK(refused == 2);
  auto earlier = std::find_if(sys.trace().begin(), sys.trace().end(), [](auto& line) {
    return line.find("an earlier life of " + sender_device + " (incarnation 0000000000000004, "
                     "now 0000000000000005)") != std::string::npos;
  });
  CHECK(earlier != sys.trace().end());
  caf::anon_send_exit(receiver, caf::exit_reason::user_shutdown);
  sys.run_all();
}

TEST_CASE("a step whose master went away mid-step ends instead of waiting forever") {
  testing::deterministic_system sys;
  auto receiver = spawn_receiver(sys);
  caf::scoped_actor client{sys.system()};
  client->send(receiver, register_atom::value, make_partition_registration(1, worker_partition()));
  sys.run_all();
  client->receive([](status& s) { REQUIRE(s.ok()); }, caf::after(0s) >> [] { FAIL("no answer"); });
  auto steps_in_flight = [&] {
    std::int64_t count = -1;
    client->send(receiver, probe_atom::value);
    sys.run_all();
    client->receive([&](std::int64_t n) { count = n; }, caf::after(0s) >> [] { FAIL("no probe answer"); });
    return count;
  };
  {
    // The master: runs step 7, which waits for x:0 from the ps, then dies.
    caf::scoped_actor master{sys.system()};
    master->send(receiver, run_atom::value, make_run_request(1, 7, {}, {"y:0"}));
    sys.run_all();
    CHECK(steps_in_flight() == 1);
  }
  sys.run_all();
  for (auto& line : sys.trace())
    UNSCOPED_INFO(line);
  CHECK(steps_in_flight() == 0);
  auto orphaned = std::find(sys.trace().begin(), sys.trace().end(), "/device:CPU:0 orphaned step 7");
  CHECK(orphaned != sys.trace().end());
  caf::anon_send_exit(receiver, caf::exit_reason::user_shutdown);
  sys.run_all();
}

TEST_CASE("tensors for steps that never start are dropped after a time and beyond a byte budget") {
  testing::deterministic_system sys;
  device_actor_options options;
  SECTION("over the budget, the oldest early step goes first") {
    options.early_tensor_budget_bytes = 1000;
  }
  SECTION("past their time") {
    options.early_tensor_ttl = std::chrono::milliseconds{0};
  }
  auto receiver = spawn_receiver(sys, options);
  peer_table peers;
  peers.devices[receiver_device] = receiver;
  peers.incarnations[sender_device] = current_life;
  caf::anon_send(receiver, peers_atom::value, peers);
  auto key = make_rendezvous_key(sender_device, receiver_device, "x:0", current_life).to_string();
  // 400 bytes each, for steps nobody runs.
  for (std::int64_t step : {101, 102, 103}) {
    caf::anon_send(receiver, tensor_atom::value,
                   make_tensor_transfer(step, key, tensor::from_vector<float>(std::vector<float>(100, 1.f))));
    sys.run_all();
  }
  std::vector<std::string> dropped;
  for (auto& line : sys.trace())
    if (line.find("dropped 400 bytes of tensors for step ") != std::string::npos)
      dropped.push_back(line);
  // Budget: 101 goes when 103 would make 1200 bytes. Time: each arrival finds the earlier ones
  // outlived (a TTL of 0), so 101 and 102 go.
  REQUIRE_FALSE(dropped.empty());
  CHECK(dropped[0].find("step 101") != std::string::npos);
  if (options.early_tensor_ttl.count() == 0) {
    REQUIRE(dropped.size() == 2);
    CHECK(dropped[1].find("step 102, which did not start within 0 ms") != std::string::npos);
    // A further tensor for an outlived step goes with it, and is not kept in a new entry:
    // once dropped, the step ignores what comes later.
    for (int again = 0; again < 2; ++again) {
      sys.clear_trace();
      caf::anon_send(receiver, tensor_atom::value,
                     make_tensor_transfer(103, key, tensor::from_vector<float>(std::vector<float>(100, 1.f))));
      sys.run_all();
      int dropped_103 = 0;
      for (auto& line : sys.trace())
        if (line.find("dropped 400 bytes of tensors for step 103") != std::string::npos)
          ++dropped_103;
      CHECK(dropped_103 == (again == 0 ? 1 : 0));
    }
  } else {
    REQUIRE(dropped.size() == 1);
    CHECK(dropped[0].find("exceeded 1000 bytes") != std::string::npos);
  }
  // A late tensor for a dropped step is ignored, not held again.
  sys.clear_trace();
  caf::anon_send(receiver, tensor_atom::value,
                 make_tensor_transfer(101, key, tensor::from_vector<float>(std::vector<float>(100, 1.f))));
  sys.run_all();
  for (auto& line : sys.trace())
    CHECK(line.find("dropped") == std::string::npos);
  caf::anon_send_exit(receiver, caf::exit_reason::user_shutdown);
  sys.run_all();
}

TEST_CASE("each sending task's early tensors have a budget of their own: a flooding peer loses its own, not others'") {
  testing::deterministic_system sys;
  device_actor_options options;
  options.early_tensor_peer_budget_bytes = 1000;
  auto receiver = spawn_receiver(sys, options);
  const std::string other_sender = "/job:ps/replica:0/task:1/device:CPU:0";
  peer_table peers;
  peers.devices[receiver_device] = receiver;
  peers.incarnations[sender_device] = current_life;
  peers.incarnations[other_sender] = current_life;
  caf::anon_send(receiver, peers_atom::value, peers);
  auto send = [&](const std::string& from, std::int64_t step) {
    auto key = make_rendezvous_key(from, receiver_device, "x:0", current_life).to_string();
    caf::anon_send(receiver, tensor_atom::value,
                   make_tensor_transfer(step, key, tensor::from_vector<float>(std::vector<float>(100, 1.f))));
    sys.run_all();
  };
  // 400 bytes each: the third from ps:0 would make 1200 of its own.
  for (std::int64_t step : {201, 202, 203})
    send(sender_device, step);
  send(other_sender, 204);
  send(other_sender, 205);
  std::vector<std::string> dropped;
  for (auto& line : sys.trace())
    if (line.find("dropped") != std::string::npos)
      dropped.push_back(line);
  REQUIRE(dropped.size() == 1);
  CHECK(dropped[0].find("dropped a tensor of 400 bytes from /job:ps/replica:0/task:0 for step 203") !=
        std::string::npos);
  CHECK(dropped[0].find("would exceed 1000 bytes") != std::string::npos);
  caf::anon_send_exit(receiver, caf::exit_reason::user_shutdown);
  sys.run_all();
}

namespace {

/// A partition on the receiver's device: `build` adds nodes to a graph holding the variable
/// `v` (a bare VariableV2: no initialiser unless `build` adds one).
std::shared_ptr<graph> partition_on_receiver(
  const std::function<void(graph&, const actorflow::variable&)>& build,
  const std::string& device = receiver_device) {
  auto g = std::make_shared<graph>();
  {
    auto d = g->device(device);
    auto id = g->add_node(node_spec{"VariableV2", "v", {}, {{"dtype", dtype::float32}, {"shape", tensor_shape{}}}});
    build(*g, actorflow::variable{g->output_of(id, 0), g->output_of(id, 0), output{}});
  }
  for (std::size_t i = 0; i < g->size(); ++i)
    g->at(static_cast<int>(i)).assigned_device = device;
  return g;
}

} // namespace

TEST_CASE("an all-or-nothing step that fails here once prepared answers at once and leaves its updates to the coordinator") {
  testing::deterministic_system sys;
  auto receiver = spawn_receiver(sys);
  // The coordinator's part is played here: it runs the step, takes "prepared", and decides.
  caf::scoped_actor coordinator{sys.system()};
  auto registered = [&](std::int64_t handle, std::shared_ptr<graph> part) {
    coordinator->send(receiver, register_atom::value, make_partition_registration(handle, part));
    sys.run_all();
    coordinator->receive([](status& s) { REQUIRE(s.ok()); }, caf::after(0s) >> [] { FAIL("no answer"); });
  };
  registered(1, partition_on_receiver([](graph& g, const actorflow::variable& v) {
    ops::assign(v, ops::constant(g, 0.f), "init");
  }));
  registered(2, partition_on_receiver([](graph& g, const actorflow::variable& v) {
    auto add = ops::assign_add(v, ops::constant(g, 5.f), "add");
    g.at(add.node_id).attrs[commit_gate_attr] = true;
  }));
  registered(3, partition_on_receiver([](graph&, const actorflow::variable&) {}));
  std::int64_t step = 10;
  auto result_of = [&]() {
    std::optional<step_result> r;
    coordinator->receive([&](step_result& x) { r = std::move(x); }, caf::after(0s) >> [] {});
    return r;
  };
  auto run = [&](std::int64_t handle, std::vector<std::string> fetches) {
    coordinator->send(receiver, run_atom::value, make_run_request(handle, ++step, {}, std::move(fetches)));
    sys.run_all();
    auto r = result_of();
    REQUIRE(r.has_value());
    REQUIRE(r->outcome.ok());
    return r->fetched;
  };
  auto value = [&] { return run(3, {"v:0"}).at(0).scalar_value<float>(); };
  run(1, {"init:0"});
  REQUIRE(value() == 0.f);

  for (bool commit : {true, false}) {
    INFO((commit ? "the coordinator commits" : "the coordinator aborts"));
    auto before = value();
    auto gated = make_run_request(2, ++step, {}, {"add:0"});
    gated.all_or_nothing = true;
    auto id = step;
    coordinator->send(receiver, run_atom::value, gated);
    sys.run_all();
    bool prepared = false;
    coordinator->receive([&](prepared_atom, std::int64_t s) { prepared = s == id; },
                         caf::after(0s) >> [] {});
    REQUIRE(prepared);
    // Then a failure of the device's own: a bulk send that failed posts this, without a sender.
    caf::anon_send(receiver, abort_atom::value, id, make_error(errc::unavailable, "a send failed"));
    sys.run_all();
    // Answered now, while the update waits for the decision.
    auto early = result_of();
    REQUIRE(early.has_value());
    CHECK(early->outcome.message().find("a send failed") != std::string::npos);
    CHECK(value() == before);
    if (commit)
      coordinator->send(receiver, commit_atom::value, id);
    else
      coordinator->send(receiver, abort_atom::value, id, make_error(errc::aborted, "decided"));
    sys.run_all();
    // The step was answered once: nothing more comes for it.
    CHECK_FALSE(result_of().has_value());
    CHECK(value() == before + (commit ? 5.f : 0.f));
  }
  caf::anon_send_exit(receiver, caf::exit_reason::user_shutdown);
  sys.run_all();
}

TEST_CASE("devices of an all-or-nothing step whose coordinator died ask each other: one commit anywhere commits all, none leaves all rolled back") {
  // Two devices (a worker's and a ps's) each hold a first update of one step; the coordinator,
  // played by a scoped actor, takes both "prepared", commits one device or none, and dies.
  const std::string other_device = "/job:ps/replica:0/task:1/device:CPU:0";
  const std::vector<std::string> names{receiver_device, other_device};
  testing::deterministic_system sys;
  std::vector<device_actor> devices{spawn_receiver(sys, {}, receiver_device),
                                    spawn_receiver(sys, {}, other_device)};
  peer_table peers;
  for (std::size_t d = 0; d < devices.size(); ++d)
    peers.devices.emplace(names[d], devices[d]);
  for (auto& d : devices)
    caf::anon_send(d, peers_atom::value, peers);
  std::int64_t step = 100;
  // Runs `handle` on device `d` under a short-lived coordinator, returning the fetched values.
  auto run = [&](std::size_t d, std::int64_t handle, std::vector<std::string> fetches) {
    caf::scoped_actor coordinator{sys.system()};
    coordinator->send(devices[d], run_atom::value, make_run_request(handle, ++step, {}, std::move(fetches)));
    sys.run_all();
    std::optional<step_result> r;
    coordinator->receive([&](step_result& x) { r = std::move(x); }, caf::after(0s) >> [] {});
    REQUIRE(r.has_value());
    REQUIRE(r->outcome.ok());
    return r->fetched;
  };
  for (std::size_t d = 0; d < devices.size(); ++d) {
    caf::scoped_actor registrar{sys.system()};
    auto add = [&](std::int64_t handle, std::shared_ptr<graph> part) {
      registrar->send(devices[d], register_atom::value, make_partition_registration(handle, part));
      sys.run_all();
      registrar->receive([](status& s) { REQUIRE(s.ok()); }, caf::after(0s) >> [] { FAIL("no answer"); });
    };
    add(1, partition_on_receiver([](graph& g, const actorflow::variable& v) {
          ops::assign(v, ops::constant(g, 0.f), "init");
        }, names[d]));
    add(2, partition_on_receiver([](graph& g, const actorflow::variable& v) {
          auto update = ops::assign_add(v, ops::constant(g, 5.f), "add");
          g.at(update.node_id).attrs[commit_gate_attr] = true;
        }, names[d]));
    add(3, partition_on_receiver([](graph&, const actorflow::variable&) {}, names[d]));
    run(d, 1, {"init:0"});
  }
  auto value = [&](std::size_t d) { return run(d, 3, {"v:0"}).at(0).scalar_value<float>(); };

  for (int committed : {1, 0}) {
    INFO("the coordinator committed " << committed << " of the 2 devices before it died");
    std::vector<float> before{value(0), value(1)};
    auto id = ++step;
    {
      caf::scoped_actor coordinator{sys.system()};
      for (auto& d : devices) {
        auto gated = make_run_request(2, id, {}, {"add:0"});
        gated.all_or_nothing = true;
        gated.commit_participants = names;
        coordinator->send(d, run_atom::value, gated);
      }
      sys.run_all();
      int prepared = 0;
      for (int k = 0; k < 2; ++k)
        coordinator->receive([&](prepared_atom, std::int64_t s) { prepared += s == id ? 1 : 0; },
                             caf::after(0s) >> [] {});
      REQUIRE(prepared == 2);
      if (committed > 0)
        coordinator->send(devices[0], commit_atom::value, id);
      sys.run_all();
    }
    // The coordinator is gone: the other device waits out its grace, then asks.
    sys.run_all();
    sys.scheduler().trigger_timeouts();
    sys.run_all();
    sys.scheduler().trigger_timeouts();
    sys.run_all();
    for (std::size_t d = 0; d < devices.size(); ++d) {
      INFO("device " << names[d]);
      CHECK(value(d) == before[d] + (committed > 0 ? 5.f : 0.f));
    }
    auto asked = std::count_if(sys.trace().begin(), sys.trace().end(), [&](const std::string& line) {
      return line.find("whether step " + std::to_string(id) + " committed") != std::string::npos;
    });
    // Only the devices the commit did not reach ask.
    CHECK(asked == 2 - committed);
  }
  for (auto& d : devices)
    caf::anon_send_exit(d, caf::exit_reason::user_shutdown);
  sys.run_all();
}

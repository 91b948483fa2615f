// Runs the real actorflow-worker binary on a free loopback port and talks to it over CAF's
// middleman from this process, as a client in another process would.
#include "actors/protocols/device.hpp"
#include "actors/protocols/task.hpp"
#include "actors/protocols/wire.hpp"
#include "actors/session.hpp"
#include "actors/bulk_channel.hpp"
#include "actors/sync_rounds.hpp"
#include "train/monitored_session.hpp"
#include "train/sync_replicas_optimizer.hpp"
#include "graph/optimizers.hpp"
#include "support/temp_dir.hpp"
#include "actors/task_client.hpp"
#include "graph/graph.hpp"
#include "graph/ops.hpp"
#include "support/processes.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <memory>
#include <netinet/in.h>
#include <optional>
#include <poll.h>
#include <spawn.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern char** environ;

using namespace actorflow;
using namespace actorflow::protocol;
using namespace std::chrono_literals;
using actorflow::testing::free_loopback_port;

/// The worker binary as a child process of this test.
struct worker_process : actorflow::testing::child_process {
  explicit worker_process(const std::vector<std::string>& args)
    : child_process(ACTORFLOW_WORKER_BINARY, args) {
    REQUIRE(started());
  }
};

namespace {

/// An actor system that can reach remote actors and knows actorflow's message types.
struct client_system {
  client_system() {
    config.load<caf::io::middleman>();
    add_actorflow_message_types(config);
    config.set("scheduler.policy", caf::atom("sharing"));
    system = std::make_unique<caf::actor_system>(config);
  }
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> system;
};

/// A ps task (actorflow-worker on a free loopback port) holding w, 256 KiB of ones (beyond
/// bulk_min_bytes(), so it travels over the bulk channel), and b, one float (in the message),
/// and a session on its master.
struct ps_with_two_shards {
  static constexpr std::int64_t n = 65536;
  std::string address = "127.0.0.1:" + std::to_string(free_loopback_port());
  worker_process ps{{"--cluster", "ps=" + address, "--job", "ps", "--task", "0", "--threads", "1"}};
  graph g;
  actorflow::variable w, b;
  std::unique_ptr<session> trainer;

  ps_with_two_shards() {
    REQUIRE(address != "127.0.0.1:0");
    REQUIRE(ps.wait_for_line("serving on", 20s));
    {
      auto on_ps = g.device("/job:ps/task:0");
      w = ops::variable(g, ops::constant(g, std::vector<float>(n, 1.f), {n}), "w");
      b = ops::variable(g, ops::constant(g, std::vector<float>{1.f}, {1}), "b");
    }
    session_options options;
    options.target = "caf://" + address;
    options.timeout_seconds = 10;
    trainer = std::make_unique<session>(g, options);
  }
};

/// The worker's exit code and stderr when run with `args` (it is expected to fail quickly).
std::pair<int, std::string> run_failing_worker(const std::vector<std::string>& args) {
  worker_process worker{args};
  auto code = worker.wait_exit(20s);
  return {code, worker.stderr_text()};
}

} // namespace

TEST_CASE("a worker serves its devices over loopback, runs a partition and stops on SIGTERM",
          "[apps][worker]") {
  auto port = free_loopback_port();
  REQUIRE(port != 0);
  auto address = "127.0.0.1:" + std::to_string(port);
  worker_process worker{{"--cluster", "worker=" + address, "--job", "worker", "--task", "0",
                         "--threads", "1"}};
  auto ready = worker.wait_for_line("serving on", 20s);
  REQUIRE(ready);
  // Its target and both its ports: CAF's and the bulk channel's.
  CHECK(ready->rfind("actorflow-worker: /job:worker/replica:0/task:0 serving on " + address +
                       " (target caf://" + address + ", large tensors on 127.0.0.1:",
                     0) == 0);

  {
    client_system client;
    auto& sys = *client.system;
    auto task = sys.middleman().remote_actor<protocol::task_actor>("127.0.0.1", port);
    REQUIRE(task);
    caf::scoped_actor self{sys};

    device_list devices;
    std::string failure;
    self->request(*task, 10s, devices_atom::value)
      .receive([&](device_list& list) { devices = std::move(list); },
               [&](caf::error& err) { failure = sys.render(err); });
    REQUIRE(failure.empty());
    REQUIRE(devices.devices.size() == 1);
    const std::string cpu0 = "/job:worker/replica:0/task:0/device:CPU:0";
    CHECK(devices.devices[0].first == cpu0);
    auto device = devices.devices[0].second;
    REQUIRE(device != nullptr);

    auto g = std::make_shared<graph>();
    auto product = ops::constant(*g, 3.f, "a") * ops::constant(*g, 4.f, "b");
    for (std::size_t i = 0; i < g->size(); ++i)
      g->at(static_cast<int>(i)).assigned_device = cpu0;
    REQUIRE(g->status().ok());

    status registered = make_error(errc::internal, "no answer");
    self->request(device, 10s, register_atom::value, make_partition_registration(1, g))
      .receive([&](status& s) { registered = std::move(s); },
               [&](caf::error& err) { failure = sys.render(err); });
    REQUIRE(failure.empty());
    REQUIRE(registered.ok());

    step_result result;
    bool answered = false;
    self->request(device, 10s, run_atom::value,
                  make_run_request(1, 1, {}, {product.tensor_name()}))
      .receive(
        [&](step_result& r) {
          result = std::move(r);
          answered = true;
        },
        [&](caf::error& err) { failure = sys.render(err); });
    REQUIRE(failure.empty());
    REQUIRE(answered);
    INFO(result.outcome.to_string());
    REQUIRE(result.outcome.ok());
    REQUIRE(result.fetched.size() == 1);
    CHECK(result.fetched[0].scalar_value<float>() == 12.f);

    // Stopped while this client is still connected, the worker still exits cleanly.
    worker.signal(SIGTERM);
    CHECK(worker.wait_exit(10s) == 0);
  }
}

TEST_CASE("a worker given an invalid spec or a job not in it exits 2 naming the fault",
          "[apps][worker]") {
  auto [bad_port, bad_port_text] =
    run_failing_worker({"--cluster", "worker=127.0.0.1:99999", "--job", "worker"});
  CHECK(bad_port == 2);
  CHECK(bad_port_text.find("'127.0.0.1:99999'") != std::string::npos);

  auto [duplicate, duplicate_text] = run_failing_worker(
    {"--cluster", "ps=127.0.0.1:2222;worker=127.0.0.1:2222", "--job", "ps"});
  CHECK(duplicate == 2);
  CHECK(duplicate_text.find("127.0.0.1:2222") != std::string::npos);

  auto [unknown_job, unknown_job_text] =
    run_failing_worker({"--cluster", "worker=127.0.0.1:2222", "--job", "ps"});
  CHECK(unknown_job == 2);
  CHECK(unknown_job_text.find("'ps'") != std::string::npos);

  auto [unknown_task, unknown_task_text] =
    run_failing_worker({"--cluster", "worker=127.0.0.1:2222", "--job", "worker", "--task", "1"});
  CHECK(unknown_task == 2);
  CHECK(unknown_task_text.find("task 1") != std::string::npos);

  // Thousands of devices would take minutes to make and ignore SIGTERM meanwhile.
  auto [devices, devices_text] = run_failing_worker({"--cpu-devices", "100000"});
  CHECK(devices == 2);
  CHECK(devices_text.find("--cpu-devices: must be at most 256, got 100000") != std::string::npos);

  auto [bad_flag, bad_flag_text] = run_failing_worker({"--jobs", "worker"});
  CHECK(bad_flag == 2);
  CHECK(bad_flag_text.find("--jobs") != std::string::npos);
}

TEST_CASE("a worker whose spec names its address twice, as 127.0.0.1 and localhost, exits 2 at once naming both tasks",
          "[apps][worker]") {
  auto port = std::to_string(free_loopback_port());
  REQUIRE(port != "0");
  auto started = std::chrono::steady_clock::now();
  // It used to hang: the worker took the ps task's address for its own.
  auto [code, text] = run_failing_worker(
    {"--cluster", "ps=127.0.0.1:" + port + ";worker=localhost:" + port, "--job", "worker"});
  CHECK(code == 2);
  CHECK(std::chrono::steady_clock::now() - started < 10s);
  CHECK(text.find("ps task 0 (127.0.0.1:" + port + ") and worker task 0 (localhost:" + port +
                  ") name the same address 127.0.0.1:" + port) != std::string::npos);
}

TEST_CASE("a worker whose port is taken exits 1 naming the address", "[apps][worker]") {
  auto [fd, taken] = actorflow::testing::loopback_listener(1);
  REQUIRE(fd >= 0);
  auto [code, text] = run_failing_worker({"--cluster", "worker=" + taken, "--job", "worker"});
  ::close(fd);
  CHECK(code == 1);
  CHECK(text.find(taken) != std::string::npos);
}

TEST_CASE("a plain CAF actor of another program pulls and pushes a shard of a running ps task",
          "[apps][worker]") {
  auto port = free_loopback_port();
  REQUIRE(port != 0);
  auto address = "127.0.0.1:" + std::to_string(port);
  worker_process ps{{"--cluster", "ps=" + address, "--job", "ps", "--task", "0", "--threads", "1"}};
  REQUIRE(ps.wait_for_line("serving on", 20s));

  // A training program creates and initialises w on the ps (the session is this test's only
  // use of actorflow's client side).
  graph g;
  actorflow::variable w;
  {
    auto on_ps = g.device("/job:ps/task:0");
    w = ops::variable(g, ops::constant(g, std::vector<float>{1, 2, 3}, {3}), "w");
  }
  session_options options;
  options.target = "caf://" + address;
  options.timeout_seconds = 10;
  session trainer{g, options};
  REQUIRE(trainer.run_targets({ops::global_variables_initializer(g)}).ok());

  // The other program: its own actor system and the typed protocols, nothing else.
  client_system client;
  auto& sys = *client.system;
  auto task = sys.middleman().remote_actor<protocol::task_actor>("127.0.0.1", port);
  REQUIRE(task);
  caf::scoped_actor self{sys};
  std::string failure;
  auto fail = [&](caf::error& err) { failure = sys.render(err); };
  protocol::shard_actor shard;
  self->request(*task, 10s, protocol::shard_atom::value, std::string{"w"})
    .receive([&](protocol::shard_actor& s) { shard = s; }, fail);
  INFO(failure);
  REQUIRE(failure.empty());
  REQUIRE(shard);
  protocol::shard_value pulled;
  self->request(shard, 10s, protocol::read_atom::value)
    .receive([&](protocol::shard_value& v) { pulled = std::move(v); }, fail);
  REQUIRE(failure.empty());
  CHECK(pulled.value.to_vector<float>() == std::vector<float>{1, 2, 3});
  CHECK(pulled.version == 1);
  std::int64_t version = 0;
  self->request(shard, 10s, protocol::assign_add_atom::value,
                tensor::from_vector<float>({10, 10, 10}))
    .receive([&](std::int64_t v) { version = v; }, fail);
  REQUIRE(failure.empty());
  CHECK(version == 2);

  // The training program sees the push.
  auto seen = trainer.run({w.read});
  REQUIRE(seen.ok());
  CHECK(seen->at(0).to_vector<float>() == std::vector<float>{11, 12, 13});
  ps.signal(SIGTERM);
  CHECK(ps.wait_exit(10s) == 0);
}

TEST_CASE("large pushes to and reads of a shard travel over its ps task's bulk channel",
          "[apps][worker]") {
  ps_with_two_shards setup;
  auto& [address, ps, g, w, b, trainer_session] = setup;
  auto& trainer = *trainer_session;
  constexpr std::int64_t n = ps_with_two_shards::n;
  REQUIRE(trainer.run_targets({ops::global_variables_initializer(g)}).ok());

  client_system client;
  auto& sys = *client.system;
  auto cluster = cluster_spec::parse("ps=" + address);
  REQUIRE(cluster.ok());
  auto shards = find_shards(sys, *cluster, "ps", 10);
  REQUIRE(shards.ok());
  REQUIRE(shards->count("w") == 1);
  auto where = shards->at("w");
  CHECK_FALSE(where.bulk_address.empty());
  caf::scoped_actor self{sys};
  std::string failure;
  auto fail = [&](caf::error& err) { failure = sys.render(err); };
  std::int64_t version = 0;
  auto got_version = [&](std::int64_t v) { version = v; };

  // Frame first: the pusher writes it, then the message names it.
  shard_pusher pusher;
  auto ticket = pusher.ship(where, "w", tensor::from_vector<float>(std::vector<float>(n, 2.f)));
  REQUIRE(ticket.has_value());
  CHECK(ticket->key.rfind("shard;w;", 0) == 0);
  REQUIRE(pusher.flush().ok());
  self->request(where.shard, 10s, protocol::apply_gd_atom::value, 0.25, *ticket)
    .receive(got_version, fail);
  INFO(failure);
  REQUIRE(failure.empty());
  CHECK(version == 2); // the initializer's assign, then this push: 1 - 0.25 * 2 = 0.5

  // Message first: the update waits for its frame; a later question is answered before it.
  protocol::bulk_tensor late{"shard;w;written-later"};
  auto pending = self->request(where.shard, 10s, protocol::assign_add_atom::value, late);
  self->request(where.shard, 10s, protocol::version_atom::value).receive(got_version, fail);
  REQUIRE(failure.empty());
  CHECK(version == 2);
  bulk_sender raw;
  std::optional<status> written;
  raw.send(where.bulk_address, 0, late.key, tensor::from_vector<float>(std::vector<float>(n, 0.25f)),
           [&](const status& s) { written = s; });
  std::move(pending).receive(got_version, fail);
  REQUIRE(failure.empty());
  CHECK(version == 3);
  raw.close();
  REQUIRE(written.has_value());
  CHECK(written->ok());

  // A small push stays in the message.
  CHECK_FALSE(pusher.ship(shards->at("b"), "b", tensor::from_vector<float>({1.f})).has_value());

  // A large read comes back the same way, with the version it had.
  auto puller = shard_puller::listen("127.0.0.1");
  REQUIRE(puller.ok());
  auto pulled = (*puller)->pull(sys, where, "w", 10);
  INFO(pulled.error().message());
  REQUIRE(pulled.ok());
  CHECK(pulled->version == 3);
  REQUIRE(pulled->value.num_elements() == n);
  CHECK(pulled->value.to_vector<float>().front() == 0.75f);

  auto seen = trainer.run({w.read});
  REQUIRE(seen.ok());
  auto values = seen->at(0).to_vector<float>();
  CHECK(values.front() == 0.75f);
  CHECK(values.back() == 0.75f);
  ps.signal(SIGTERM);
  CHECK(ps.wait_exit(10s) == 0);
}

TEST_CASE("a task listening on every interface (--bind 0.0.0.0) takes large tensors at its spec host and a fixed --bulk-port",
          "[apps][worker]") {
  // 127.0.0.2 stands for a Service name or NAT address: peers use it, the task binds 0.0.0.0.
  auto port = free_loopback_port();
  auto bulk_port = free_loopback_port();
  REQUIRE(port != 0);
  REQUIRE(bulk_port != 0);
  auto address = "127.0.0.2:" + std::to_string(port);
  worker_process ps{{"--cluster", "ps=" + address, "--job", "ps", "--task", "0", "--threads",
                     "1", "--bind", "0.0.0.0", "--bulk-port", std::to_string(bulk_port)}};
  auto started = ps.wait_for_line("serving on", 20s);
  REQUIRE(started.has_value());
  auto bulk_address = "127.0.0.2:" + std::to_string(bulk_port);
  CHECK(started->find("serving on 0.0.0.0:" + std::to_string(port)) != std::string::npos);
  CHECK(started->find("large tensors on " + bulk_address) != std::string::npos);

  constexpr std::int64_t n = 65536;
  graph g;
  actorflow::variable w;
  {
    auto on_ps = g.device("/job:ps/task:0");
    w = ops::variable(g, ops::constant(g, std::vector<float>(n, 1.f), {n}), "w");
  }
  session_options options;
  options.target = "caf://" + address;
  options.timeout_seconds = 10;
  session s{g, options};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());

  client_system client;
  auto cluster = cluster_spec::parse("ps=" + address);
  REQUIRE(cluster.ok());
  auto shards = find_shards(*client.system, *cluster, "ps", 10);
  REQUIRE(shards.ok());
  auto where = shards->at("w");
  CHECK(where.bulk_address == bulk_address);
  // A large push through the bulk port at the advertised address.
  shard_pusher pusher;
  auto ticket = pusher.ship(where, "w", tensor::from_vector<float>(std::vector<float>(n, 2.f)));
  REQUIRE(ticket.has_value());
  REQUIRE(pusher.flush().ok());
  caf::scoped_actor self{*client.system};
  std::string failure;
  std::int64_t version = 0;
  self->request(where.shard, 10s, protocol::apply_gd_atom::value, 0.25, *ticket)
    .receive([&](std::int64_t v) { version = v; }, [&](caf::error& err) { failure = client.system->render(err); });
  INFO(failure);
  REQUIRE(failure.empty());
  CHECK(version == 2);
  auto value = s.run({w.read});
  REQUIRE(value.ok());
  CHECK(value->at(0).to_vector<float>().at(0) == 0.5f);
  // Bound on every interface: 127.0.0.1 reaches the same port.
  auto fd = actorflow::testing::connect_to_loopback(static_cast<std::uint16_t>(bulk_port));
  CHECK(fd >= 0);
  if (fd >= 0)
    ::close(fd);
  ps.signal(SIGTERM);
  CHECK(ps.wait_exit(10000ms) == 0);
}

TEST_CASE("a task whose spec address is not a local interface serves with --bind, advertising the spec's address",
          "[apps][worker]") {
  // Nothing connects to 10.255.255.1: the task only listens on loopback and names it.
  auto port = free_loopback_port();
  REQUIRE(port != 0);
  auto address = "10.255.255.1:" + std::to_string(port);
  worker_process task{{"--cluster", "worker=" + address, "--job", "worker", "--task", "0",
                       "--threads", "1", "--bind", "127.0.0.1"}};
  auto started = task.wait_for_line("serving on", 20s);
  REQUIRE(started.has_value());
  CHECK(started->find("serving on 127.0.0.1:" + std::to_string(port)) != std::string::npos);
  CHECK(started->find("large tensors on 10.255.255.1:") != std::string::npos);
  // SIGTERM at once after the start line: a clean stop, not death by signal.
  task.signal(SIGTERM);
  CHECK(task.wait_exit(10000ms) == 0);
}

TEST_CASE("sync_round_client: two workers' gradients make one round, a late one is dropped as stale, and a lost ps fails the push from the ps",
          "[apps][worker][sync]") {
  ps_with_two_shards setup;
  auto& [address, ps, g, w, b, trainer_session] = setup;
  auto& trainer = *trainer_session;
  constexpr std::int64_t n = ps_with_two_shards::n;
  REQUIRE(trainer.run_targets({ops::global_variables_initializer(g)}).ok());

  auto cluster = cluster_spec::parse("ps=" + address);
  REQUIRE(cluster.ok());
  auto settings_of = [](int task) {
    sync_round_settings s;
    s.worker_task = task;
    s.incarnation = 100 + static_cast<std::uint64_t>(task);
    s.learning_rate = 0.5;
    s.replicas_to_aggregate = 2;
    s.answer_bound = 20s;
    return s;
  };
  sync_round_client first{*cluster, "ps", settings_of(0)};
  sync_round_client second{*cluster, "ps", settings_of(1)};
  auto missing = first.find_shards({"w", "nope"});
  CHECK(missing.code() == errc::not_found);
  CHECK(missing.message().find("'nope'") != std::string::npos);
  REQUIRE(first.find_shards({"w", "b"}).ok());
  REQUIRE(second.find_shards({"w", "b"}).ok());

  auto gradients = [&](float value) {
    return std::vector<std::pair<std::string, tensor>>{
      {"w", tensor::from_vector<float>(std::vector<float>(n, value))},
      {"b", tensor::from_vector<float>({value})}};
  };
  // A round closes only with both gradients: the first push waits for the second.
  result<sync_round_outcome> by_first{make_error(errc::internal, "not pushed")};
  std::thread pushing{[&] { by_first = first.push(0, gradients(1.f), 0.5, 0.25); }};
  auto by_second = second.push(0, gradients(3.f), 1.5, 0.75);
  pushing.join();
  INFO(by_first.error().to_string() + " / " + by_second.error().to_string());
  REQUIRE(by_first.ok());
  REQUIRE(by_second.ok());
  for (auto* outcome : {&*by_first, &*by_second}) {
    CHECK(outcome->applied);
    CHECK(outcome->global_step == 1);
    CHECK(outcome->round_gradients == 2);
    CHECK(outcome->round_loss == 1.0);
    CHECK(outcome->round_accuracy == 0.5);
  }
  // The mean gradient (2) applied once: 1 - 0.5 * 2 = 0.
  auto values = trainer.run({w.read, b.read});
  REQUIRE(values.ok());
  CHECK(values->at(0).to_vector<float>().back() == 0.f);
  CHECK(values->at(1).to_vector<float>() == std::vector<float>{0.f});

  // A gradient of round 0 now is late (a backup worker's): answered at once, dropped.
  auto late = second.push(0, gradients(9.f), 0, 0);
  REQUIRE(late.ok());
  CHECK_FALSE(late->applied);
  CHECK(late->global_step == 1);
  CHECK(late->stale_dropped >= 1);
  auto unchanged = trainer.run({b.read});
  REQUIRE(unchanged.ok());
  CHECK(unchanged->at(0).to_vector<float>() == std::vector<float>{0.f});

  // The ps goes away: the push fails at once, and says it came from the ps task.
  ps.signal(SIGKILL);
  CHECK(ps.wait_exit(10s) != 0);
  auto lost = first.push(1, gradients(1.f), 0, 0);
  REQUIRE_FALSE(lost.ok());
  INFO(lost.error().to_string());
  CHECK((lost.error().code() == errc::unavailable || lost.error().code() == errc::data_loss));
  REQUIRE(lost.error().origin());
  CHECK(lost.error().origin()->name() == "/job:ps/replica:0/task:0");
}

TEST_CASE("monitored_session outlives a lost ps: the step fails, the ps comes back empty, the chief restores the latest checkpoint and the step runs again",
          "[apps][worker][monitored]") {
  auto port = free_loopback_port();
  REQUIRE(port != 0);
  auto address = "127.0.0.1:" + std::to_string(port);
  std::vector<std::string> ps_args{"--cluster", "ps=" + address, "--job", "ps", "--task", "0",
                                   "--threads", "1"};
  auto ps = std::make_unique<worker_process>(ps_args);
  REQUIRE(ps->wait_for_line("serving on", 20s));

  actorflow::test::temp_dir dir;
  graph g;
  auto w = ops::variable(g, ops::constant(g, std::vector<float>{1.f}, {1}), "w");
  auto global_step = ops::variable(g, ops::constant(g, std::int64_t{0}), "global_step");
  auto train = ops::group(g, {ops::assign_add(w, ops::constant(g, std::vector<float>{1.f}, {1})),
                              ops::assign_add(global_step, ops::constant(g, std::int64_t{1}))},
                          "train");
  REQUIRE(g.status().ok());
  auto cluster = cluster_spec::parse("ps=" + address);
  REQUIRE(cluster.ok());
  train::monitored_session_options o;
  o.session.target = "caf://" + address;
  o.session.timeout_seconds = 10;
  o.global_step = global_step;
  o.checkpoint_dir = dir.path();
  o.save_checkpoint_steps = 5;
  o.init_timeout_seconds = 20;
  o.cluster = std::make_shared<const cluster_spec>(*cluster);
  std::vector<std::string> said;
  o.say = [&](const std::string& line) { said.push_back(line); };
  auto s = train::monitored_session::create(g, std::move(o));
  REQUIRE(s.ok());
  for (int i = 0; i < 7; ++i)
    REQUIRE((*s)->run({}, {}, {train}).ok());

  // The ps dies and comes back at its address with nothing: the next step restores step 5.
  ps->signal(SIGKILL);
  CHECK(ps->wait_exit(10s) != 0);
  ps = std::make_unique<worker_process>(ps_args);
  REQUIRE(ps->wait_for_line("serving on", 20s));
  auto after = (*s)->run({w.read}, {}, {train});
  INFO(after.error().to_string());
  REQUIRE(after.ok());
  REQUIRE(said.size() == 1);
  CHECK(said[0] == "restored " + dir.path() +
                     "/ckpt-5.afckpt: training returns to global step 5; the updates since are lost");
  // w was 6 at step 5; the step ran again once: 6, or 7 when its read followed its update.
  auto value = after->at(0).to_vector<float>().at(0);
  CHECK((value == 6.f || value == 7.f));
  REQUIRE((*s)->close().ok());
  CHECK((*s)->global_step() == 6);
  ps->signal(SIGTERM);
  CHECK(ps->wait_exit(10s) == 0);
}

namespace {

/// Two workers' monitored sessions, each its own graph (loss = sum(w * x), so the gradient is
/// the fed x: 1 and 3, mean 2), training w = (1, 2) in rounds of both through
/// sync_replicas_optimizer wrapping `kind` ("sgd" at 0.25, "momentum" 0.25 and 0.9): plain
/// run(train_op) steps until stop_at_step_hook's round 3. w as the chief reads it at the end.
std::vector<float> train_in_sync_rounds(const std::string& kind) {
  auto port = free_loopback_port();
  REQUIRE(port != 0);
  auto address = "127.0.0.1:" + std::to_string(port);
  worker_process ps{{"--cluster", "ps=" + address, "--job", "ps", "--task", "0", "--threads", "1"}};
  REQUIRE(ps.wait_for_line("serving on", 20s));
  auto cluster = cluster_spec::parse("ps=" + address);
  REQUIRE(cluster.ok());
  actorflow::test::temp_dir dir;
  constexpr std::int64_t rounds = 3;
  constexpr double learning_rate = 0.25;

  // Each worker its own graph, as between-graph replicas build it: loss = sum(w * x), so the
  // gradient is the fed x, and a round's update is -learning_rate * the mean of both x.
  struct replica {
    graph g;
    actorflow::variable w, global_step;
    output x, loss, train_op;
    std::unique_ptr<optimizer> wrapped;
    std::unique_ptr<train::sync_replicas_optimizer> sync;
    train::sync_replicas_hook* hook = nullptr;
    std::unique_ptr<train::monitored_session> session;
    std::vector<std::int64_t> steps_seen;
    status failure;
  };
  auto build = [&](replica& r, int task) {
    {
      auto on_ps = r.g.device("/job:ps/task:0");
      r.w = ops::variable(r.g, ops::constant(r.g, std::vector<float>{1.f, 2.f}, {2}), "w");
      r.global_step = ops::variable(r.g, ops::constant(r.g, std::int64_t{0}), "global_step");
    }
    r.x = ops::placeholder(r.g, dtype::float32, {2}, "x");
    r.loss = ops::reduce_sum(r.w.read * r.x);
    if (kind == "sgd")
      r.wrapped = std::make_unique<gradient_descent_optimizer>(learning_rate);
    else
      r.wrapped = std::make_unique<momentum_optimizer>(learning_rate, 0.9);
    r.sync = std::make_unique<train::sync_replicas_optimizer>(*r.wrapped, r.global_step,
                                                             train::sync_replicas_settings{2, 2, 0});
    r.train_op = r.sync->minimize(r.loss);
    REQUIRE(r.g.status().ok());
    train::monitored_session_options o;
    o.session.target = "caf://" + address;
    o.session.timeout_seconds = 20;
    o.global_step = r.global_step;
    o.is_chief = task == 0;
    if (task == 0)
      o.checkpoint_dir = dir.path();
    o.init_timeout_seconds = 20;
    o.cluster = std::make_shared<const cluster_spec>(*cluster);
    auto hook = r.sync->make_session_run_hook(task == 0, {o.cluster, task, "ps", r.loss, {}, 20s});
    r.hook = hook.get();
    o.hooks.push_back(std::move(hook));
    o.hooks.push_back(train::stop_at_step_hook(r.global_step.read, rounds));
    auto created = train::monitored_session::create(r.g, std::move(o));
    REQUIRE(created.ok());
    r.session = std::move(*created);
  };
  replica chief, other;
  build(chief, 0);
  build(other, 1);
  auto train_on = [&](replica& r, float x) {
    while (!r.session->should_stop()) {
      auto ran = r.session->run({}, {{r.x, tensor::from_vector<float>({x, x}, {2})}}, {r.train_op});
      if (!ran) {
        r.failure = ran.error();
        return;
      }
      r.steps_seen.push_back(r.session->global_step());
    }
  };
  std::thread second{[&] { train_on(other, 3.f); }};
  train_on(chief, 1.f);
  second.join();
  INFO(chief.failure.to_string() + " / " + other.failure.to_string());
  INFO(kind);
  REQUIRE(chief.failure.ok());
  REQUIRE(other.failure.ok());
  // One round per step, each of both gradients, and both stop at the last round.
  for (auto* r : {&chief, &other}) {
    CHECK(r->steps_seen == std::vector<std::int64_t>{1, 2, 3});
    CHECK(r->hook->last_round().applied);
    CHECK(r->hook->last_round().round_gradients == 2);
    CHECK(r->hook->last_round().stale_dropped == 0);
    // The round's loss is the mean of both batches' (sum(w * x) at the round's w).
    CHECK(r->hook->round() == rounds);
  }
  auto w = chief.session->raw_session().run({chief.w.read});
  REQUIRE(w.ok());
  REQUIRE(other.session->close().ok());
  REQUIRE(chief.session->close().ok());
  // The chief wrote the rounds into the global step before its checkpoint at close.
  CHECK(chief.session->global_step() == rounds);
  auto step = chief.session->raw_session().run({chief.global_step.read});
  REQUIRE(step.ok());
  CHECK(step->at(0).scalar_value<std::int64_t>() == rounds);
  CHECK(std::filesystem::exists(dir.path() + "/ckpt-3.afckpt"));
  ps.signal(SIGTERM);
  CHECK(ps.wait_exit(10s) == 0);
  return w->at(0).to_vector<float>();
}

} // namespace

TEST_CASE("sync_replicas_optimizer: two workers' plain run(train_op) steps make rounds of both gradients on the ps, stop at the round, and the chief's checkpoint holds the rounds",
          "[apps][worker][sync]") {
  // The shards apply: w -= 0.25 * mean(1, 3) each round: 1 - 3 * 0.5 and 2 - 3 * 0.5.
  CHECK(train_in_sync_rounds("sgd") == std::vector<float>{-0.5f, 0.5f});
}

TEST_CASE("sync_replicas_optimizer wrapping momentum: the chief applies each round's mean with the wrapped optimizer, the other worker waits for it",
          "[apps][worker][sync]") {
  // accum = 0.9 accum + 2 each round: 2, 3.8, 5.42; w -= 0.25 accum: 2.805 in all.
  auto w = train_in_sync_rounds("momentum");
  REQUIRE(w.size() == 2);
  CHECK(w[0] == Approx(1 - 2.805).epsilon(1e-5));
  CHECK(w[1] == Approx(2 - 2.805).epsilon(1e-5));
}


TEST_CASE("sync_replicas_optimizer refuses a round bigger than the replicas, naming both",
          "[apps][sync]") {
  graph h;
  auto v = ops::variable(h, ops::constant(h, std::vector<float>{1.f}, {1}), "v");
  auto step = ops::variable(h, ops::constant(h, std::int64_t{0}), "global_step");
  gradient_descent_optimizer sgd{0.1};
  train::sync_replicas_optimizer too_many{sgd, step, {3, 2, 0}};
  too_many.minimize(ops::reduce_sum(v.read * v.read));
  CHECK(h.status().code() == errc::invalid_argument);
  CHECK(h.status().message().find("replicas_to_aggregate 3") != std::string::npos);
  CHECK(h.status().message().find("total_num_replicas 2") != std::string::npos);
}

// Attacks on a real cluster: actorflow-worker and actorflow-master processes on loopback, this
// process as the attacker (raw sockets, or a CAF node of its own) and as the user whose training
// must be unaffected. Each case asserts the defence.
#include "actors/protocols/master.hpp"
#include "actors/protocols/task.hpp"
#include "graph/ops.hpp"
#include "actors/protocols/wire.hpp"
#include "actors/transport_guard.hpp"
#include "security/attack_util.hpp"
#include "support/processes.hpp"
#include "support/temp_dir.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

using namespace actorflow;
using namespace actorflow::testing;
using namespace std::chrono_literals;

namespace {

/// Runs the classic example (in_graph_linreg, 300 steps) against `target`; its output and exit
/// code.
std::pair<std::string, int> run_classic_example(const std::string& target, const std::string& spec,
                                                const std::vector<std::string>& environment = {}) {
  child_process client{ACTORFLOW_EXAMPLE_BINARY,
                       {"--target", target, "--cluster", spec, "--steps", "300"}, true,
                       environment};
  auto output = client.read_all_lines(60000ms);
  auto code = client.wait_exit(10000ms);
  return {output + client.stderr_text(), code};
}

/// The four-task cluster of SPEC's classic example, task gongzuo/0 also serving clients.
std::unique_ptr<cluster_processes> classic_cluster(
  const cluster_processes::task_args& extra = {}) {
  return std::make_unique<cluster_processes>(ACTORFLOW_WORKER_BINARY,
                                             std::vector<std::pair<std::string, int>>{{"canshu", 2}, {"gongzuo", 2}},
                                             1, extra);
}

/// One actorflow-worker, job "worker" of a one-task cluster at 127.0.0.1:`port`, serving.
std::unique_ptr<child_process> start_lone_worker(std::uint16_t port) {
  auto worker = std::make_unique<child_process>(
    ACTORFLOW_WORKER_BINARY,
    std::vector<std::string>{"--cluster", "worker=127.0.0.1:" + std::to_string(port), "--job",
                             "worker", "--threads", "1"});
  REQUIRE(worker->wait_for_line("serving on", 20000ms).has_value());
  return worker;
}

/// A CAF node of this process, with the guard but none of the cluster's secrets.
struct attacker_node {
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> system;
  attacker_node() {
    use_guarded_transport(config, transport_security{});
    add_actorflow_message_types(config);
    system = std::make_unique<caf::actor_system>(config);
  }
};

} // namespace

TEST_CASE("BASP headers announcing 4 GiB leave a worker's and a master's memory alone, and training goes on", "[security]") {
  auto cluster = classic_cluster();
  REQUIRE(cluster->ready());
  auto master_port = free_loopback_port();
  child_process master{ACTORFLOW_MASTER_BINARY,
                       {"--port", std::to_string(master_port), "--cluster", cluster->spec_json()}};
  REQUIRE(master.wait_for_line("serving on", 20000ms).has_value());
  auto& worker = cluster->task(2);
  auto worker_port = port_of(cluster->address(2));
  auto worker_before = worker.resident_bytes();
  auto master_before = master.resident_bytes();
  REQUIRE(worker_before > 0);
  REQUIRE(master_before > 0);
  // Four connections each: CAF alone would allocate and zero 16 GiB in each process.
  std::vector<int> connections;
  for (auto port : {worker_port, master_port})
    for (int i = 0; i < 4; ++i) {
      int fd = connect_raw(port);
      send_all(fd, basp_header(/*client_handshake*/ 1, 0xFFFFFFFFu));
      connections.push_back(fd);
    }
  for (int fd : connections) {
    CHECK(closed_within(fd, 10s));
    ::close(fd);
  }
  CHECK(worker.resident_bytes() < worker_before + (std::size_t{64} << 20));
  CHECK(master.resident_bytes() < master_before + (std::size_t{64} << 20));

  for (auto target : {"caf://" + cluster->address(2), "caf://127.0.0.1:" + std::to_string(master_port)}) {
    INFO("target " << target);
    auto [output, code] = run_classic_example(target, cluster->spec_json());
    INFO(output);
    CHECK(code == 0);
    CHECK(output.find("299 ") != std::string::npos);
  }
  master.signal(SIGTERM);
  CHECK(master.wait_exit(10000ms) == 0);
  CHECK(cluster->stop());
}

TEST_CASE("a cluster with a token refuses clients without it and trains with it", "[security]") {
  actorflow::test::temp_dir dir;
  auto token_file = dir.path() + "/token";
  std::ofstream{token_file} << "a token only this cluster knows\n";
  auto cluster = classic_cluster([&](const std::string&, int) {
    return std::vector<std::string>{"--token-file", token_file};
  });
  REQUIRE(cluster->ready());
  auto target = "caf://" + cluster->address(2);

  auto [refused, refused_code] = run_classic_example(target, cluster->spec_json());
  INFO(refused);
  CHECK(refused_code != 0);
  CHECK(refused.find("cluster token") != std::string::npos);

  auto [output, code] = run_classic_example(target, cluster->spec_json(),
                                            {"ACTORFLOW_CLUSTER_TOKEN_FILE=" + token_file});
  INFO(output);
  CHECK(code == 0);
  CHECK(output.find("299 ") != std::string::npos);
  CHECK(cluster->stop());
}

TEST_CASE("a stop from another node is refused, and a task whose device actor is killed exits 4", "[security]") {
  auto port = free_loopback_port();
  auto started = start_lone_worker(port);
  auto& worker = *started;
  attacker_node attacker;
  auto task = attacker.system->middleman().remote_actor<protocol::task_actor>("127.0.0.1", port);
  REQUIRE(task);
  caf::scoped_actor self{*attacker.system};

  // Both kinds of stop a remote peer can send: anonymous, and from an actor of its node.
  caf::anon_send(*task, protocol::stop_atom::value);
  self->send(*task, protocol::stop_atom::value);
  std::this_thread::sleep_for(500ms);
  CHECK(worker.wait_exit(10ms) == -1); // still running
  protocol::device_list devices;
  self->request(*task, 10s, protocol::devices_atom::value)
    .receive([&](protocol::device_list& list) { devices = std::move(list); },
             [&](caf::error& e) { FAIL(attacker.system->render(e)); });
  REQUIRE_FALSE(devices.devices.empty());

  // A kill cannot be refused inside CAF 0.17; the task then exits non-zero for its supervisor.
  caf::anon_send_exit(devices.devices.front().second, caf::exit_reason::kill);
  CHECK(worker.wait_exit(10000ms) == 4);
  auto log = worker.stderr_text();
  INFO(log);
  CHECK(log.find("refused a stop from an anonymous sender") != std::string::npos);
  CHECK(log.find("refused a stop from node") != std::string::npos);
  CHECK(log.find("exit code 4") != std::string::npos);
}


TEST_CASE("with mutual TLS the classic example and the MLP train on processes, and a certificate of another CA is refused", "[security][tls]") {
  actorflow::test::temp_dir dir;
  auto certs = dir.path() + "/cluster";
  auto other = dir.path() + "/other";
  make_certificates(certs, {"canshu0", "canshu1", "gongzuo0", "gongzuo1", "ps0", "worker0",
                            "worker1", "client"});
  make_certificates(other, {"intruder"});

  SECTION("the classic example") {
    auto cluster = classic_cluster([&](const std::string& job, int task) {
      return tls_flags(certs, job + std::to_string(task));
    });
    REQUIRE(cluster->ready());
    auto target = "caf://" + cluster->address(2);
    auto [output, code] = run_classic_example(target, cluster->spec_json(),
                                              tls_environment(certs, "client", certs));
    INFO(output);
    CHECK(code == 0);
    CHECK(output.find("299 ") != std::string::npos);

    auto [refused, refused_code] = run_classic_example(target, cluster->spec_json(),
                                                       tls_environment(other, "intruder", certs));
    INFO(refused);
    CHECK(refused_code != 0);
    CHECK(refused.find("TLS certificate") != std::string::npos);

    auto [plain, plain_code] = run_classic_example(target, cluster->spec_json());
    CHECK(plain_code != 0);
    CHECK(cluster->stop());
  }
  SECTION("the data-parallel MLP") {
    auto cluster = std::make_unique<cluster_processes>(
      ACTORFLOW_WORKER_BINARY, std::vector<std::pair<std::string, int>>{{"ps", 1}, {"worker", 2}},
      1, [&](const std::string& job, int task) {
        auto flags = tls_flags(certs, job + std::to_string(task));
        if (job == "worker" && task == 0)
          flags.push_back("--master");
        return flags;
      });
    REQUIRE(cluster->ready());
    actorflow::test::temp_dir out;
    auto args = std::vector<std::string>{"--target", "caf://" + cluster->address(1), "--cluster",
                                         cluster->spec_json(), "--epochs", "1", "--threads", "1",
                                         "--output-dir", out.path()};
    for (auto& flag : tls_flags(certs, "client"))
      args.push_back(flag);
    child_process train{ACTORFLOW_TRAIN_BINARY, args};
    auto output = train.read_all_lines(240000ms);
    auto code = train.wait_exit(10000ms);
    INFO(output << train.stderr_text());
    REQUIRE(code == 0);
    auto at = output.rfind("test accuracy: ");
    REQUIRE(at != std::string::npos);
    CHECK(std::stod(output.substr(at + 15)) > 0.75);
    CHECK(cluster->stop());
  }
}

TEST_CASE("a session's handle is of no use on another node: runs and closes from there are refused", "[security]") {
  auto port = free_loopback_port();
  auto started = start_lone_worker(port);
  auto& worker = *started;
  attacker_node client, attacker;
  auto reach = [&](attacker_node& node) {
    auto master = node.system->middleman().remote_actor<protocol::master_actor>("127.0.0.1", port);
    REQUIRE(master);
    return *master;
  };
  auto client_master = reach(client);
  auto attacker_master = reach(attacker);

  graph g;
  auto sum = ops::add(ops::constant(g, 2.f), ops::constant(g, 3.f));
  auto def = protocol::make_graph_def(g);
  REQUIRE(def.ok());
  auto owner = client.system->spawn([]() -> caf::behavior { return {[](int) {}}; });
  caf::scoped_actor client_self{*client.system};
  std::int64_t handle = 0;
  client_self->request(client_master, 10s, protocol::create_atom::value,
                       protocol::make_session_config(false, false, 10000, owner), *def)
    .receive([&](protocol::session_created& created) {
               REQUIRE(created.outcome.ok());
               handle = created.handle;
             },
             [&](caf::error& e) { FAIL(client.system->render(e)); });
  REQUIRE(handle != 0);

  auto run_from = [&](caf::actor_system& sys, const protocol::master_actor& master) {
    caf::scoped_actor self{sys};
    auto request = protocol::make_master_run_request(handle, {sum}, {}, {}, &g);
    REQUIRE(request.ok());
    status outcome;
    self->request(master, 10s, protocol::run_atom::value, *request)
      .receive([&](protocol::master_run_result& r) { outcome = r.outcome; },
               [&](caf::error& e) { outcome = status_from_error(e); });
    return outcome;
  };
  auto close_from = [&](caf::actor_system& sys, const protocol::master_actor& master) {
    caf::scoped_actor self{sys};
    status outcome;
    self->request(master, 10s, protocol::close_atom::value, handle)
      .receive([&](status& s) { outcome = s; }, [&](caf::error& e) { outcome = status_from_error(e); });
    return outcome;
  };

  auto hijacked_run = run_from(*attacker.system, attacker_master);
  CHECK(hijacked_run.code() == errc::permission_denied);
  auto hijacked_close = close_from(*attacker.system, attacker_master);
  CHECK(hijacked_close.code() == errc::permission_denied);
  // The owner's session is untouched.
  CHECK(run_from(*client.system, client_master).ok());
  CHECK(close_from(*client.system, client_master).ok());
  caf::anon_send_exit(owner, caf::exit_reason::user_shutdown);
}

TEST_CASE("with mutual TLS a master killed and restarted serves the next session on the same tasks", "[security][tls]") {
  actorflow::test::temp_dir dir;
  auto certs = dir.path() + "/cluster";
  make_certificates(certs, {"canshu0", "canshu1", "gongzuo0", "gongzuo1", "master", "client"});
  auto cluster = classic_cluster([&](const std::string& job, int task) {
    return tls_flags(certs, job + std::to_string(task));
  });
  REQUIRE(cluster->ready());
  auto master_port = free_loopback_port();
  auto target = "caf://127.0.0.1:" + std::to_string(master_port);
  for (int life = 0; life < 2; ++life) {
    INFO("master life " << life);
    auto args = std::vector<std::string>{"--port", std::to_string(master_port), "--cluster",
                                         cluster->spec_json()};
    for (auto& flag : tls_flags(certs, "master"))
      args.push_back(flag);
    child_process master{ACTORFLOW_MASTER_BINARY, args};
    REQUIRE(master.wait_for_line("serving on", 20000ms).has_value());
    auto [output, code] = run_classic_example(target, cluster->spec_json(),
                                              tls_environment(certs, "client", certs));
    INFO(output);
    CHECK(code == 0);
    CHECK(output.find("299 ") != std::string::npos);
    master.signal(SIGKILL);
    master.wait_exit(10000ms);
  }
  CHECK(cluster->stop());
}

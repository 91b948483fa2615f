// SPEC's classic in-graph replication example on a real cluster: jobs "canshu" (2 tasks) and
// "gongzuo" (2 tasks) as four actorflow-worker processes on loopback, and this process as the
// client whose session places the graph over their devices.
#include "actors/protocols/master.hpp"
#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "support/processes.hpp"
#include "support/recurrent_model.hpp"
#include "support/temp_dir.hpp"
#include "train/models.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace actorflow;
using namespace std::chrono_literals;
using actorflow::testing::cluster_processes;
using actorflow::testing::free_loopback_port;

namespace {

/// Starts the workers of `jobs` and requires every one to be serving; task 0 of `master_job`
/// (when given) also serves as master (--master).
std::unique_ptr<cluster_processes> start_cluster(const std::vector<std::pair<std::string, int>>& jobs,
                                                 const std::string& master_job = "") {
  auto cluster = std::make_unique<cluster_processes>(
    ACTORFLOW_WORKER_BINARY, jobs, 1, [master_job](const std::string& job, int task) {
      return job == master_job && task == 0 ? std::vector<std::string>{"--master"}
                                            : std::vector<std::string>{};
    });
  REQUIRE(cluster->ready());
  return cluster;
}

} // namespace

TEST_CASE("the classic example trains on four worker processes: W goes to 0.1 and b to 0.3") {
  auto cluster = start_cluster({{"canshu", 2}, {"gongzuo", 2}});
  auto spec = cluster_spec::parse(cluster->spec_json());
  REQUIRE(spec.ok());

  graph g;
  gradient_descent_optimizer sgd{0.5};
  auto m = train::build_linreg(g, sgd, 1, train::classic_in_graph_devices());
  auto& w = m.weights;
  auto& b = m.biases;
  auto& train = m.train;
  auto& y = m.prediction;
  REQUIRE(g.status().ok());

  session_options options;
  options.cluster = std::make_shared<cluster_spec>(*spec);
  options.timeout_seconds = 30;
  {
    session s{g, options};
    REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
    for (int step = 0; step < 1000; ++step)
      REQUIRE(s.run_targets({train}).ok());
    auto values = s.run({w.read, b.read});
    REQUIRE(values.ok());
    CHECK(values->at(0).scalar_value<double>() == Approx(0.1).margin(1e-3));
    CHECK(values->at(1).scalar_value<double>() == Approx(0.3).margin(1e-3));
    CHECK(g.at(w.ref.node_id).assigned_device == "/job:canshu/replica:0/task:0/device:CPU:0");
    CHECK(g.at(b.ref.node_id).assigned_device == "/job:canshu/replica:0/task:1/device:CPU:0");
    // The model runs on gongzuo/0 (the loss's value itself is never needed by training).
    CHECK(g.at(y.node_id).assigned_device == "/job:gongzuo/replica:0/task:0/device:CPU:0");
  }
  CHECK(cluster->stop());
}

TEST_CASE("a while loop whose body spans two worker processes trains like one device") {
  // The same model and seed on this process's CPU, then with the loop's control on worker 0
  // and the input's part of every step on worker 1, the variables on the ps: each worker runs
  // its own copy of the loop's control, the condition crossing the network every iteration.
  auto losses = [](session_options options, const std::string& input_device) {
    graph g;
    g.seed = 7;
    auto d = g.device("/job:worker/task:0");
    auto m = actorflow::testing::build_recurrent(g, input_device);
    INFO(g.status().to_string());
    REQUIRE(g.status().ok());
    session s{g, options};
    auto out = actorflow::testing::train_recurrent(s, g, m, 10);
    if (!input_device.empty()) {
      CHECK(g.at(g.find("while/from_input")).assigned_device == "/job:worker/replica:0/task:1/device:CPU:0");
      CHECK(g.at(g.find("while/LoopCond")).assigned_device == "/job:worker/replica:0/task:0/device:CPU:0");
    }
    return out;
  };
  session_options local_options;
  local_options.in_process_cluster = {{"worker", 2}};
  auto local = losses(local_options, "");
  auto cluster = start_cluster({{"worker", 2}});
  session_options options;
  options.cluster = std::make_shared<cluster_spec>(*cluster_spec::parse(cluster->spec_json()));
  options.timeout_seconds = 30;
  auto split = losses(options, "/job:worker/task:1");
  REQUIRE(split.size() == local.size());
  for (std::size_t i = 0; i < local.size(); ++i)
    CHECK(split[i] == Approx(local[i]).epsilon(1e-5));
  CHECK(cluster->stop());
}

TEST_CASE("a session on a cluster with an unreachable task fails naming the task") {
  auto port = free_loopback_port();
  REQUIRE(port != 0);
  auto spec = cluster_spec::parse("worker=127.0.0.1:" + std::to_string(port));
  REQUIRE(spec.ok());
  graph g;
  auto c = ops::constant(g, 1.f);
  session_options options;
  options.cluster = std::make_shared<cluster_spec>(*spec);
  options.timeout_seconds = 5;
  // Nothing will ever listen there: the session waits its connect timeout for the task, then
  // gives up naming it.
  options.connect_timeout_seconds = 2;
  auto started = std::chrono::steady_clock::now();
  session s{g, options};
  auto r = s.run({c});
  auto waited = std::chrono::steady_clock::now() - started;
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message().find("/job:worker/replica:0/task:0") != std::string::npos);
  CHECK(r.error().message().find("127.0.0.1:" + std::to_string(port)) != std::string::npos);
  CHECK(waited >= std::chrono::milliseconds(1900));
  CHECK(waited < std::chrono::seconds(15));
}

namespace {

using actorflow::testing::child_process;

} // namespace

TEST_CASE("a session started before its master and tasks listen waits for them, and fails naming the target once its connect timeout is spent") {
  // A target where nothing listens yet: the client waits, and runs once the master is up.
  auto port = free_loopback_port();
  REQUIRE(port != 0);
  graph g;
  auto sum = ops::add(ops::constant(g, 1.f), ops::constant(g, 2.f));
  std::optional<result<std::vector<tensor>>> early;
  std::thread client{[&] {
    session_options options;
    options.target = "caf://127.0.0.1:" + std::to_string(port);
    options.connect_timeout_seconds = 60;
    session s{g, options};
    early = s.run({sum});
  }};
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  child_process master{ACTORFLOW_MASTER_BINARY, {"--port", std::to_string(port), "--threads", "1"}};
  client.join();
  REQUIRE(early.has_value());
  INFO((early->ok() ? std::string{} : early->error().to_string()));
  REQUIRE(early->ok());
  CHECK((*early)->at(0).scalar_value<float>() == 3.f);
  master.signal(SIGTERM);
  CHECK(master.wait_exit(std::chrono::seconds(10)) == 0);

  // A cluster whose task starts after the client: its master waits for the task.
  auto task_port = free_loopback_port();
  auto spec = cluster_spec::parse("worker=127.0.0.1:" + std::to_string(task_port));
  REQUIRE(spec.ok());
  std::optional<result<std::vector<tensor>>> on_cluster;
  // A graph of its own: the first session placed g's nodes on the master's task.
  graph h;
  auto product = ops::mul(ops::constant(h, 2.f), ops::constant(h, 3.f));
  std::thread cluster_client{[&] {
    session_options options;
    options.cluster = std::make_shared<cluster_spec>(*spec);
    options.timeout_seconds = 5;
    session s{h, options};
    on_cluster = s.run({product});
  }};
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  child_process task{ACTORFLOW_WORKER_BINARY, {"--cluster", spec->to_json(), "--job", "worker",
                                               "--task", "0", "--threads", "1"}};
  cluster_client.join();
  REQUIRE(on_cluster.has_value());
  INFO((on_cluster->ok() ? std::string{} : on_cluster->error().to_string()));
  REQUIRE(on_cluster->ok());
  CHECK((*on_cluster)->at(0).scalar_value<float>() == 6.f);
  task.signal(SIGTERM);
  CHECK(task.wait_exit(std::chrono::seconds(10)) == 0);

  // Nobody comes: the error says what was waited for, and for how long.
  session_options options;
  options.target = "caf://127.0.0.1:" + std::to_string(free_loopback_port());
  options.connect_timeout_seconds = 1;
  session s{g, options};
  auto r = s.run({sum});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message().find("cannot reach the master at " + options.target +
                                 ": nothing listened there within 1 s (connect timeout)") !=
        std::string::npos);
}

namespace {

/// A variable on the ps task updated from the worker task every step.
struct ps_counter_graph {
  graph g;
  actorflow::variable counter;
  output step;
  ps_counter_graph() {
    {
      auto d = g.device("/job:ps/task:0");
      counter = ops::variable(g, 0.f, "counter");
    }
    output increment;
    {
      auto d = g.device("/job:worker/task:0");
      increment = ops::constant(g, 1.f) * ops::constant(g, 2.f);
    }
    // The update is colocated with the variable on the ps task; its input crosses tasks.
    step = ops::assign_add(counter, increment);
  }
};

} // namespace

TEST_CASE("a task killed mid-training fails the next step quickly, naming the task") {
  auto cluster = start_cluster({{"ps", 1}, {"worker", 1}});
  ps_counter_graph model;
  session_options options;
  options.cluster = std::make_shared<cluster_spec>(*cluster_spec::parse(cluster->spec_json()));
  options.timeout_seconds = 5;
  session s{model.g, options};
  REQUIRE(s.run_targets({ops::global_variables_initializer(model.g)}).ok());
  for (int i = 0; i < 10; ++i) {
    auto st = s.run_targets({model.step});
    INFO(st.to_string());
    REQUIRE(st.ok());
  }
  cluster->task(0).signal(SIGKILL); // the ps task
  CHECK(cluster->task(0).wait_exit(5000ms) == -1);
  auto started = std::chrono::steady_clock::now();
  auto r = s.run({model.counter.read});
  auto waited = std::chrono::steady_clock::now() - started;
  REQUIRE_FALSE(r.ok());
  INFO(r.error().to_string());
  CHECK(r.error().message().find("/job:ps/replica:0/task:0") != std::string::npos);
  CHECK(waited < 8s);
  cluster->task(1).signal(SIGTERM);
  CHECK(cluster->task(1).wait_exit(10000ms) == 0);
}

namespace {

/// One ps and one worker task, a good step with a 2 s bound, then task `stopped` (0: the ps,
/// 1: the worker) SIGSTOPped during the next: that step's outcome and how long it took. The
/// healthy task must still stop cleanly; the stopped one is killed by its guard.
std::pair<status, std::chrono::steady_clock::duration> step_with_a_stopped_task(std::size_t stopped) {
  auto cluster = start_cluster({{"ps", 1}, {"worker", 1}});
  ps_counter_graph model;
  session_options options;
  options.cluster = std::make_shared<cluster_spec>(*cluster_spec::parse(cluster->spec_json()));
  options.timeout_seconds = 2;
  session s{model.g, options};
  REQUIRE(s.run_targets({ops::global_variables_initializer(model.g)}).ok());
  REQUIRE(s.run_targets({model.step}).ok());
  cluster->task(stopped).signal(SIGSTOP);
  REQUIRE(cluster->task(stopped).wait_stopped(5000ms));
  auto started = std::chrono::steady_clock::now();
  auto outcome = s.run_targets({model.step});
  auto waited = std::chrono::steady_clock::now() - started;
  auto healthy = 1 - stopped;
  cluster->task(healthy).signal(SIGTERM);
  CHECK(cluster->task(healthy).wait_exit(10000ms) == 0);
  return {outcome, waited};
}

} // namespace

TEST_CASE("a hung task (SIGSTOP) fails the step within the bound, naming the task") {
  auto [r, waited] = step_with_a_stopped_task(0);
  REQUIRE_FALSE(r.ok());
  INFO(r.to_string());
  CHECK(r.code() == errc::deadline_exceeded);
  CHECK(r.message().find("/job:ps/replica:0/task:0") != std::string::npos);
  CHECK(waited < 5s);
}

TEST_CASE("a hung worker is blamed, not the ps waiting for its tensor") {
  // The ps's AssignAdd waits for the worker's tensor: both time out, only the worker is hung.
  auto [r, waited] = step_with_a_stopped_task(1);
  REQUIRE_FALSE(r.ok());
  INFO(r.to_string());
  CHECK(r.code() == errc::deadline_exceeded);
  CHECK(r.message().rfind("/job:worker/replica:0/task:0/device:CPU:0 did not answer step", 0) == 0);
  CHECK(r.message().find("nor a probe") != std::string::npos);
  CHECK(r.message().find("/job:ps") == std::string::npos);
  // The step's bound and a probe's (a quarter of it): nothing waits for a second bound.
  CHECK(waited < 4s);
}

TEST_CASE("a session on a target that accepts connections but never answers fails within its bound") {
  // A silent listener (the kernel accepts, nobody speaks), then a stopped master.
  auto [silent_fd, silent_address] = actorflow::testing::loopback_listener();
  REQUIRE(silent_fd >= 0);
  auto cluster = start_cluster({{"worker", 1}});
  cluster->task(0).signal(SIGSTOP);
  REQUIRE(cluster->task(0).wait_stopped(5000ms));
  for (const auto& address : {silent_address, cluster->address(0)}) {
    graph g;
    auto sum = ops::add(ops::constant(g, 1.f), ops::constant(g, 2.f));
    session_options options;
    options.target = "caf://" + address;
    options.timeout_seconds = 2;
    auto started = std::chrono::steady_clock::now();
    session s{g, options};
    auto r = s.run({sum});
    auto waited = std::chrono::steady_clock::now() - started;
    REQUIRE_FALSE(r.ok());
    INFO(r.error().to_string());
    CHECK(r.error().message().find("cannot reach the master at caf://" + address) != std::string::npos);
    CHECK(r.error().message().find("no handshake within 2000 ms") != std::string::npos);
    CHECK(waited < 5s);
  }
  ::close(silent_fd);
}

namespace {

using actorflow::testing::child_process;

/// The last line of `text` that contains `needle`, or "".
std::string last_line_with(const std::string& text, const std::string& needle) {
  std::string found;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos)
      end = text.size();
    auto line = text.substr(start, end - start);
    if (line.find(needle) != std::string::npos)
      found = line;
    start = end + 1;
  }
  return found;
}

} // namespace

TEST_CASE("the classic example runs on a master: a worker started with --master, or actorflow-master") {
  auto cluster = start_cluster({{"canshu", 2}, {"gongzuo", 2}}, "gongzuo");
  auto master_port = free_loopback_port();
  REQUIRE(master_port != 0);
  child_process master{ACTORFLOW_MASTER_BINARY,
                       {"--port", std::to_string(master_port), "--host", "127.0.0.1", "--cluster",
                        cluster->spec_json()}};
  REQUIRE(master.wait_for_line("serving on", 20000ms).has_value());

  for (auto target : {"caf://" + cluster->address(2), "caf://127.0.0.1:" + std::to_string(master_port)}) {
    INFO("target " << target);
    child_process client{ACTORFLOW_EXAMPLE_BINARY,
                         {"--target", target, "--cluster", cluster->spec_json(), "--steps", "1000"}};
    auto output = client.read_all_lines(60000ms);
    CHECK(client.wait_exit(10000ms) == 0);
    INFO(client.stderr_text());
    CHECK(last_line_with(output, "999 ") == "999 0.100000 0.300000");
  }
  master.signal(SIGTERM);
  CHECK(master.wait_exit(10000ms) == 0);
  CHECK(cluster->stop());
}

TEST_CASE("actorflow-train --target trains the data-parallel MLP on ps and worker processes") {
  auto cluster = start_cluster({{"ps", 1}, {"worker", 2}}, "worker");
  actorflow::test::temp_dir out;
  child_process train{ACTORFLOW_TRAIN_BINARY,
                      {"--target", "caf://" + cluster->address(1), "--cluster", cluster->spec_json(),
                       "--epochs", "1", "--threads", "1", "--output-dir", out.path()}};
  auto output = train.read_all_lines(240000ms);
  REQUIRE(train.wait_exit(10000ms) == 0);
  INFO(output);
  CHECK(last_line_with(output, "training on").find("caf://" + cluster->address(1)) != std::string::npos);
  auto accuracy_line = last_line_with(output, "test accuracy: ");
  REQUIRE_FALSE(accuracy_line.empty());
  CHECK(std::stod(accuracy_line.substr(accuracy_line.find(": ") + 2)) > 0.75);
  CHECK(cluster->stop());
}

TEST_CASE("a worker killed while actorflow-train runs on it ends training with an error naming it") {
  auto cluster = start_cluster({{"ps", 1}, {"worker", 2}}, "worker");
  actorflow::test::temp_dir out;
  child_process train{ACTORFLOW_TRAIN_BINARY,
                      {"--target", "caf://" + cluster->address(1), "--cluster", cluster->spec_json(),
                       "--epochs", "5", "--threads", "1", "--log-every", "10", "--output-dir", out.path()}};
  REQUIRE(train.wait_for_line("step 20 ", 60000ms).has_value());
  cluster->task(2).signal(SIGKILL); // /job:worker/task:1
  auto killed = std::chrono::steady_clock::now();
  auto code = train.wait_exit(30000ms);
  auto waited = std::chrono::steady_clock::now() - killed;
  auto errors = train.stderr_text();
  INFO(errors);
  CHECK(code == 1);
  CHECK(errors.find("/job:worker/replica:0/task:1") != std::string::npos);
  // Well under the 10 s bound on answers: the step fails when the connection drops, and
  // closing the session does not wait for the dead task to free its partitions.
  CHECK(waited < 5s);
  cluster->task(0).signal(SIGTERM);
  cluster->task(1).signal(SIGTERM);
  CHECK(cluster->task(0).wait_exit(10000ms) == 0);
  CHECK(cluster->task(1).wait_exit(10000ms) == 0);
}

namespace {

/// How in-graph training ended once a task was stopped: actorflow-train's exit code (-1: still
/// running after 30 s, then killed), its stderr and how long after the SIGSTOP it exited.
struct stopped_task_outcome {
  int code = -1;
  std::string errors;
  std::chrono::steady_clock::duration waited{};
};

/// actorflow-train's in-graph MLP on a ps and two worker processes with --step-timeout 3, as
/// its own master or (`on_a_master_task`) on worker task 0's, and task `stopped` (0: the ps,
/// 1: worker task 0) SIGSTOPped once 20 steps ran. The task is resumed and every task stopped
/// afterwards.
stopped_task_outcome train_while_a_task_is_stopped(bool on_a_master_task, std::size_t stopped) {
  auto cluster = start_cluster({{"ps", 1}, {"worker", 2}}, on_a_master_task ? "worker" : "");
  actorflow::test::temp_dir out;
  std::vector<std::string> args{"--cluster", cluster->spec_json(), "--epochs", "5", "--threads", "1",
                                "--log-every", "10", "--step-timeout", "3", "--output-dir", out.path()};
  if (on_a_master_task)
    args.insert(args.begin(), {"--target", "caf://" + cluster->address(1)});
  child_process train{ACTORFLOW_TRAIN_BINARY, args};
  REQUIRE(train.wait_for_line("step 20 ", 60000ms).has_value());
  auto& task = cluster->task(stopped);
  task.signal(SIGSTOP);
  auto stopped_at = std::chrono::steady_clock::now();
  stopped_task_outcome outcome;
  outcome.code = train.wait_exit(30000ms);
  outcome.waited = std::chrono::steady_clock::now() - stopped_at;
  if (!train.exited()) {
    train.signal(SIGKILL);
    train.wait_exit(5000ms);
  }
  outcome.errors = train.stderr_text();
  task.signal(SIGCONT);
  task.signal(SIGTERM);
  // Only that it ends: a task stopped and resumed may crash on the way out (not this test's
  // subject). The others must stop cleanly.
  task.wait_exit(10000ms);
  CHECK(task.exited());
  CHECK(cluster->stop());
  return outcome;
}

/// The bound the in-graph cases keep, for --step-timeout 3 (T): T, the probe's bound
/// (device_actor.hpp: T / 4 = 750 ms) and 1.25 s for the client to print and exit (0.1 s
/// measured) on a loaded machine. Waiting a second T, as the client on a master task did while
/// its close waited for the stopped ps, takes at least 6 s.
constexpr auto stopped_task_bound = 3000ms + 750ms + 1250ms;

/// The client exited with an error naming `who` hung within stopped_task_bound.
void check_named_hung(const stopped_task_outcome& outcome, const std::string& who) {
  INFO(outcome.errors);
  INFO("exited " << std::chrono::duration_cast<std::chrono::milliseconds>(outcome.waited).count()
                 << " ms after the SIGSTOP");
  CHECK(outcome.code == 1);
  CHECK(outcome.errors.find(who) != std::string::npos);
  CHECK(outcome.errors.find("within 3000 ms, nor") != std::string::npos);
  CHECK(outcome.errors.find("a probe after it: hung or unreachable") != std::string::npos);
  CHECK(outcome.waited < stopped_task_bound);
}

} // namespace

TEST_CASE("in-graph actorflow-train as its own master names a stopped ps within --step-timeout and a probe, and exits") {
  check_named_hung(train_while_a_task_is_stopped(false, 0),
                   "/job:ps/replica:0/task:0/device:CPU:0 did not answer step");
}

TEST_CASE("in-graph actorflow-train on a worker's master names a stopped ps within --step-timeout and a probe, and exits") {
  check_named_hung(train_while_a_task_is_stopped(true, 0),
                   "/job:ps/replica:0/task:0/device:CPU:0 did not answer step");
}

TEST_CASE("in-graph actorflow-train names its master hung when the master's task is stopped, within --step-timeout and a probe") {
  // The master cannot name itself: the client's own probe of it does, by the address it knows.
  auto outcome = train_while_a_task_is_stopped(true, 1);
  check_named_hung(outcome, "running a step on the master at caf://127.0.0.1:");
}

namespace {

/// Sessions open on the master at `address` ("host:port"), asked from this process; -1 when
/// it does not answer.
std::int64_t open_sessions(const std::string& address) {
  auto split = parse_host_port(address);
  REQUIRE(split.ok());
  auto& sys = default_actor_system();
  auto master = sys.middleman().remote_actor<protocol::master_actor>(split->host, split->port);
  REQUIRE(static_cast<bool>(master));
  caf::scoped_actor self{sys};
  std::int64_t count = -1;
  self->request(*master, std::chrono::seconds(10), protocol::sessions_atom::value)
    .receive([&](std::int64_t n) { count = n; }, [](caf::error&) {});
  return count;
}

} // namespace

TEST_CASE("a client killed mid-training leaves no session or partitions on the master") {
  auto cluster = start_cluster({{"canshu", 2}, {"gongzuo", 2}}, "gongzuo");
  auto master = cluster->address(2);
  CHECK(open_sessions(master) == 0);
  child_process client{ACTORFLOW_EXAMPLE_BINARY, {"--target", "caf://" + master, "--cluster",
                                                  cluster->spec_json(), "--steps", "100000000"}};
  REQUIRE(client.wait_for_line("20 ", 30000ms).has_value());
  CHECK(open_sessions(master) == 1);
  client.signal(SIGKILL);
  CHECK(client.wait_exit(5000ms) == -1);
  // The master notices the client's connection drop and closes its session.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  std::int64_t left = open_sessions(master);
  while (left != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
    left = open_sessions(master);
  }
  CHECK(left == 0);
  CHECK(cluster->stop());
}

TEST_CASE("actorflow-master without a cluster is a one-task local server that trains linreg") {
  auto port = free_loopback_port();
  REQUIRE(port != 0);
  child_process server{ACTORFLOW_MASTER_BINARY, {"--port", std::to_string(port), "--host", "127.0.0.1",
                                                 "--threads", "1", "--cpu-devices", "2"}};
  auto serving = server.wait_for_line("serving on", 20000ms);
  REQUIRE(serving.has_value());
  CHECK(serving->find("/job:localhost/replica:0/task:0") != std::string::npos);
  child_process train{ACTORFLOW_TRAIN_BINARY,
                      {"--model", "linreg", "--target", "caf://127.0.0.1:" + std::to_string(port)}};
  auto output = train.read_all_lines(60000ms);
  CHECK(train.wait_exit(10000ms) == 0);
  INFO(train.stderr_text());
  CHECK(last_line_with(output, "999 ") == "999 0.100000 0.300000");
  server.signal(SIGTERM);
  CHECK(server.wait_exit(10000ms) == 0);
}

TEST_CASE("a task restarted at its address serves the master's next session") {
  auto cluster = start_cluster({{"ps", 1}, {"worker", 1}}, "worker");
  session_options options;
  options.target = "caf://" + cluster->address(1);
  options.timeout_seconds = 5;
  {
    ps_counter_graph model;
    session s{model.g, options};
    REQUIRE(s.run_targets({ops::global_variables_initializer(model.g)}).ok());
    REQUIRE(s.run_targets({model.step}).ok());
  }
  cluster->task(0).signal(SIGKILL);
  CHECK(cluster->task(0).wait_exit(5000ms) == -1);
  child_process restarted{ACTORFLOW_WORKER_BINARY, {"--cluster", cluster->spec_json(), "--job", "ps",
                                                    "--task", "0", "--threads", "1"}};
  REQUIRE(restarted.wait_for_line("serving on", 20000ms).has_value());
  // The master saw the ps go; a new session reaches the new process (with fresh variables).
  ps_counter_graph model;
  session s{model.g, options};
  auto init = s.run_targets({ops::global_variables_initializer(model.g)});
  INFO(init.to_string());
  REQUIRE(init.ok());
  REQUIRE(s.run_targets({model.step}).ok());
  auto value = s.run({model.counter.read});
  REQUIRE(value.ok());
  CHECK(value->at(0).scalar_value<float>() > 0.f);
  restarted.signal(SIGTERM);
  CHECK(restarted.wait_exit(10000ms) == 0);
  cluster->task(1).signal(SIGTERM);
  CHECK(cluster->task(1).wait_exit(10000ms) == 0);
}

namespace {

/// The classic example (in_graph_linreg), 300 steps on the session at `target`: it exits 0
/// having printed step 299.
void run_classic_example_300(const std::string& target, const std::string& spec) {
  child_process client{ACTORFLOW_EXAMPLE_BINARY,
                       {"--target", target, "--cluster", spec, "--steps", "300"}};
  auto output = client.read_all_lines(60000ms);
  auto code = client.wait_exit(10000ms);
  INFO(output << client.stderr_text());
  CHECK(code == 0);
  CHECK_FALSE(last_line_with(output, "299 ").empty());
}

} // namespace

TEST_CASE("a restarted master serves the next session on the same tasks, restarting nothing else") {
  auto cluster = start_cluster({{"canshu", 2}, {"gongzuo", 2}});
  auto master_port = free_loopback_port();
  REQUIRE(master_port != 0);
  auto target = "caf://127.0.0.1:" + std::to_string(master_port);
  auto run_example = [&] { run_classic_example_300(target, cluster->spec_json()); };
  for (int life = 0; life < 2; ++life) {
    INFO("master life " << life);
    child_process master{ACTORFLOW_MASTER_BINARY,
                         {"--port", std::to_string(master_port), "--cluster", cluster->spec_json()}};
    REQUIRE(master.wait_for_line("serving on", 20000ms).has_value());
    run_example();
    master.signal(life == 0 ? SIGKILL : SIGTERM); // the first dies without a word
    master.wait_exit(10000ms);
  }
  CHECK(cluster->stop());
}

TEST_CASE("a task that served as master, killed and restarted, serves the next session, and no other task restarts") {
  auto cluster = start_cluster({{"canshu", 2}, {"gongzuo", 2}});
  auto target = "caf://" + cluster->address(3); // gongzuo:1
  auto run_example = [&] { run_classic_example_300(target, cluster->spec_json()); };
  run_example();
  cluster->task(3).signal(SIGKILL);
  cluster->task(3).wait_exit(10000ms);
  child_process restarted{ACTORFLOW_WORKER_BINARY,
                          {"--cluster", cluster->spec_json(), "--job", "gongzuo", "--task", "1",
                           "--threads", "1"},
                          false};
  REQUIRE(restarted.wait_for_line("serving on", 20000ms).has_value());
  run_example();
  restarted.signal(SIGTERM);
  CHECK(restarted.wait_exit(10000ms) == 0);
  for (int i = 0; i < 3; ++i) {
    cluster->task(i).signal(SIGTERM);
    CHECK(cluster->task(i).wait_exit(10000ms) == 0);
  }
}

TEST_CASE("with a master of its own, any one task killed and restarted leaves the next session working") {
  auto cluster = start_cluster({{"canshu", 2}, {"gongzuo", 2}});
  auto master_port = free_loopback_port();
  REQUIRE(master_port != 0);
  child_process master{ACTORFLOW_MASTER_BINARY,
                       {"--port", std::to_string(master_port), "--cluster", cluster->spec_json()}};
  REQUIRE(master.wait_for_line("serving on", 20000ms).has_value());
  auto target = "caf://127.0.0.1:" + std::to_string(master_port);
  run_classic_example_300(target, cluster->spec_json());
  const std::vector<std::pair<std::string, int>> tasks{{"canshu", 0}, {"canshu", 1}, {"gongzuo", 0}, {"gongzuo", 1}};
  std::vector<std::unique_ptr<child_process>> restarted;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    INFO("restarted /job:" << tasks[i].first << "/task:" << tasks[i].second);
    cluster->task(i).signal(SIGKILL);
    cluster->task(i).wait_exit(10000ms);
    restarted.push_back(std::make_unique<child_process>(
      ACTORFLOW_WORKER_BINARY,
      std::vector<std::string>{"--cluster", cluster->spec_json(), "--job", tasks[i].first, "--task",
                               std::to_string(tasks[i].second), "--threads", "1"},
      false));
    REQUIRE(restarted.back()->wait_for_line("serving on", 20000ms).has_value());
    run_classic_example_300(target, cluster->spec_json());
  }
  master.signal(SIGTERM);
  CHECK(master.wait_exit(10000ms) == 0);
  for (auto& task : restarted) {
    task->signal(SIGTERM);
    CHECK(task->wait_exit(10000ms) == 0);
  }
}

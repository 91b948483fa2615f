// A ps task and a worker task as two simulated processes in one test: CAF's test scheduler runs
// each node's actors and CAF's test multiplexer carries the middleman's traffic between them,
// so a training step's messages (client -> master -> worker and ps devices, tensors between
// them over the "network") happen one by one, in the same order every run.
#include "actors/master.hpp"
#include "actors/protocols/master.hpp"
#include "actors/protocols/task.hpp"
#include "actors/task_service.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "actors/testing_network.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

using namespace actorflow;
using namespace actorflow::protocol;

namespace {

constexpr std::uint16_t ps_port = 2221;
const char* const cluster_text = "ps=ps:2221;worker=worker:2222";
const char* const ps_device = "/job:ps/replica:0/task:0/device:CPU:0";
const char* const worker_device = "/job:worker/replica:0/task:0/device:CPU:0";

/// Device trace lines of both tasks: one list per task and one in the order they happened,
/// each line of the latter prefixed with its task ("ps /device:CPU:0 run step 2").
struct traces {
  std::vector<std::string> ps;
  std::vector<std::string> worker;
  std::vector<std::string> both;
};

/// A ps task published on one node and, on another node, a worker task with the master that
/// reaches the ps through the middleman, as actorflow-worker --master does.
struct two_task_cluster {
  testing::test_network net;
  testing::test_node& ps_node = net.add_node();
  testing::test_node& worker_node = net.add_node();
  std::shared_ptr<traces> seen = std::make_shared<traces>();
  task_actor ps_service;
  task_actor worker_service;
  master_actor master;

  two_task_cluster() {
    // The master connects to "ps:2221" (the cluster spec's address) on the first session.
    net.prepare_connection(ps_node, worker_node, "ps", ps_port);
    ps_service = spawn_task_service(ps_node.system(), "ps", 0, options_for("ps"));
    ps_node.stop_at_teardown(ps_service);
    auto published = net.publish(ps_node, ps_service, ps_port);
    REQUIRE(published);
    CHECK(*published == ps_port);
    worker_service = spawn_task_service(worker_node.system(), "worker", 0, options_for("worker"));
    worker_node.stop_at_teardown(worker_service);
    auto spec = cluster_spec::parse(cluster_text);
    REQUIRE(spec.ok());
    master_options options;
    options.task_services = {worker_service};
    options.cluster = std::make_shared<const cluster_spec>(std::move(*spec));
    master = spawn_master(worker_node.system(), options);
    worker_node.stop_at_teardown(master);
    net.exec_all();
  }

  task_service_options options_for(const std::string& task) {
    task_service_options options;
    options.threads = 1;
    options.run_inline = true;
    options.trace = [seen = seen, task](const std::string& line) {
      (task == "ps" ? seen->ps : seen->worker).push_back(line);
      seen->both.push_back(task + " " + line);
    };
    return options;
  }

  /// Sends `message` from a client on the worker node to the master, runs the network until
  /// quiet and returns the master's answer.
  template <class Answer, class... Ts>
  Answer ask_master(Ts&&... message) {
    caf::scoped_actor client{worker_node.system()};
    client->send(master, std::forward<Ts>(message)...);
    net.exec_all();
    std::optional<Answer> answer;
    std::string failure = "the network went quiet without an answer";
    client->receive([&](Answer& x) { answer = std::move(x); },
                    [&](caf::error& err) { failure = worker_node.system().render(err); },
                    caf::after(std::chrono::seconds(0)) >> [] {});
    if (!answer)
      FAIL(failure);
    return std::move(*answer);
  }

  session_created create(std::shared_ptr<graph> g, session_config config = {}) {
    return ask_master<session_created>(create_atom::value, std::move(config), graph_def{std::move(g)});
  }

  /// Runs the worker's node alone until it is quiet: the ps node's process is stopped
  /// (SIGSTOP), so nothing it was sent is read or handled.
  void run_worker_node_only() {
    while (worker_node.step())
      ;
  }

  master_run_result run(std::int64_t handle, std::vector<std::pair<std::string, tensor>> feeds,
                        std::vector<std::string> fetches, std::vector<std::string> targets) {
    master_run_request req;
    req.handle = handle;
    req.feeds = std::move(feeds);
    req.fetches = std::move(fetches);
    req.targets = std::move(targets);
    return ask_master<master_run_result>(run_atom::value, std::move(req));
  }

  status close(std::int64_t handle) { return ask_master<status>(close_atom::value, handle); }
};

/// A master given a cluster numbers its partitions and steps from a random base (master.cpp),
/// the same base for both (its session handles are random). Ids in "register H", "deregister
/// H" and "step N" become their offset from that base, which is what a master without a
/// cluster would have used (1, 2, ...).
std::string normalised(const std::string& line, std::int64_t base) {
  static const std::regex id{"(register|step) ([0-9]+)"};
  std::string out;
  auto rest = line.cbegin();
  for (std::sregex_iterator i{line.cbegin(), line.cend(), id}, end; i != end; ++i) {
    auto& match = *i;
    out.append(rest, match[0].first);
    out += match[1].str() + " " + std::to_string(std::stoll(match[2].str()) - base);
    rest = match[0].second;
  }
  out.append(rest, line.cend());
  return out;
}

/// The master's id base, read off the registrations the devices traced ("register H": its
/// first partition handle is base + 1). Session handles are drawn at random on a cluster.
std::int64_t id_base_of(const std::vector<std::string>& lines) {
  static const std::regex registered{"register ([0-9]+)"};
  std::optional<std::int64_t> lowest;
  for (auto& line : lines) {
    std::smatch m;
    if (std::regex_search(line, m, registered)) {
      auto handle = static_cast<std::int64_t>(std::stoll(m[1].str()));
      lowest = lowest ? std::min(*lowest, handle) : handle;
    }
  }
  return lowest ? *lowest - 1 : 0;
}

std::vector<std::string> normalised(const std::vector<std::string>& lines, std::int64_t base) {
  std::vector<std::string> out;
  for (auto& line : lines)
    out.push_back(normalised(line, base));
  return out;
}

/// y = W x + b with W and b on the ps, the model, loss and gradients on the worker and the
/// SGD updates (colocated with their variables) back on the ps.
struct linreg_graph {
  std::shared_ptr<graph> g = std::make_shared<graph>();
  std::string x, loss, train, init, w, b;

  linreg_graph() {
    actorflow::variable weights, biases;
    {
      auto d = g->device("/job:ps/task:0");
      weights = ops::variable(*g, 0.5f, "W");
      biases = ops::variable(*g, 0.1f, "b");
    }
    {
      auto d = g->device("/job:worker/task:0");
      auto input = ops::placeholder(*g, dtype::float32, {4}, "x");
      auto labels = ops::constant(*g, std::vector<float>{3, 5, 7, 9}, {4}, "y");
      auto prediction = ops::add(ops::mul(weights, input, "Wx"), biases, "prediction");
      auto l = ops::reduce_mean(ops::square(prediction - labels), {}, false, "loss");
      train = gradient_descent_optimizer{0.1}.minimize(l).name();
      x = input.tensor_name();
      loss = l.tensor_name();
    }
    init = ops::global_variables_initializer(*g).name();
    w = weights.read.tensor_name();
    b = biases.read.tensor_name();
    REQUIRE(g->status().ok());
  }
};

struct scenario_outcome {
  session_created created;
  float loss = 0, w = 0, b = 0;
  /// Normalised (see normalised()).
  traces seen;
};

/// Opens a session, initialises, runs one training step, reads W and b, closes the session.
scenario_outcome train_one_step() {
  two_task_cluster cluster;
  linreg_graph model;
  scenario_outcome out;
  out.created = cluster.create(model.g);
  REQUIRE(out.created.outcome.ok());

  auto init = cluster.run(out.created.handle, {}, {}, {model.init});
  INFO(init.outcome.to_string());
  REQUIRE(init.outcome.ok());

  auto x = tensor::from_vector<float>({1, 2, 3, 4});
  auto step = cluster.run(out.created.handle, {{model.x, x}}, {model.loss}, {model.train});
  INFO(step.outcome.to_string());
  REQUIRE(step.outcome.ok());
  REQUIRE(step.fetched.size() == 1);
  out.loss = step.fetched[0].scalar_value<float>();

  auto values = cluster.run(out.created.handle, {}, {model.w, model.b}, {});
  INFO(values.outcome.to_string());
  REQUIRE(values.outcome.ok());
  REQUIRE(values.fetched.size() == 2);
  out.w = values.fetched[0].scalar_value<float>();
  out.b = values.fetched[1].scalar_value<float>();

  auto closed = cluster.close(out.created.handle);
  INFO(closed.to_string());
  REQUIRE(closed.ok());

  auto base = id_base_of(cluster.seen->both);
  out.seen.ps = normalised(cluster.seen->ps, base);
  out.seen.worker = normalised(cluster.seen->worker, base);
  out.seen.both = normalised(cluster.seen->both, base);
  return out;
}

} // namespace

TEST_CASE("a training step across a ps and a worker process runs the same messages every time") {
  auto first = train_one_step();
  auto second = train_one_step();

  CHECK(first.created.devices == std::vector<std::string>{ps_device, worker_device});

  // The same step in plain arithmetic: loss = mean((W x + b - y)^2),
  // W -= 0.1 * mean(2 (W x + b - y) x), b -= 0.1 * mean(2 (W x + b - y)).
  const double xs[] = {1, 2, 3, 4}, ys[] = {3, 5, 7, 9};
  double w = 0.5, b = 0.1, loss = 0, grad_w = 0, grad_b = 0;
  for (int i = 0; i < 4; ++i) {
    auto diff = w * xs[i] + b - ys[i];
    loss += diff * diff / 4;
    grad_w += 2 * diff * xs[i] / 4;
    grad_b += 2 * diff / 4;
  }
  CHECK(first.loss == Approx(loss).epsilon(1e-6));
  CHECK(first.w == Approx(w - 0.1 * grad_w).epsilon(1e-6));
  CHECK(first.b == Approx(b - 0.1 * grad_b).epsilon(1e-6));
  CHECK(second.loss == first.loss);
  CHECK(second.w == first.w);
  CHECK(second.b == first.b);

  for (auto& line : first.seen.both)
    UNSCOPED_INFO(line);
  CHECK(first.seen.both == second.seen.both);

  // Ids are offsets from the master's id base (see normalised()). The master sends to the ps
  // first (devices are sorted by name), but the worker's devices share its node and see their
  // messages before the ps reads them off the network.
  std::vector<std::string> expected{
    // Init step: the initializer is a NoOp grouping the assigns, so only the ps runs (the
    // master runs a NoOp target's inputs instead of the NoOp).
    "ps /device:CPU:0 register 1",
    "ps /device:CPU:0 run step 1",
    "ps /device:CPU:0 finished step 1",
    // Training step: W and b go to the worker, their gradients come back to the ps, which
    // applies them; the train op (a NoOp) needs no partition and no message of its own.
    "worker /device:CPU:0 register 3",
    "ps /device:CPU:0 register 2",
    "worker /device:CPU:0 run step 2",
    "ps /device:CPU:0 run step 2",
    "worker /device:CPU:0 tensor W/read:0 step 2",
    "worker /device:CPU:0 tensor b/read:0 step 2",
    "worker /device:CPU:0 finished step 2",
    "ps /device:CPU:0 tensor gradients/prediction_grad/SumToShapeOf:0 step 2",
    "ps /device:CPU:0 tensor gradients/Wx_grad/SumToShapeOf:0 step 2",
    "ps /device:CPU:0 finished step 2",
    // Reading W and b needs the ps alone.
    "ps /device:CPU:0 register 4",
    "ps /device:CPU:0 run step 3",
    "ps /device:CPU:0 finished step 3",
    // Closing frees every partition, plan by plan (in the master's signature order).
    "worker /device:CPU:0 deregister 3",
    "ps /device:CPU:0 deregister 4",
    "ps /device:CPU:0 deregister 2",
    "ps /device:CPU:0 deregister 1",
  };
  CHECK(first.seen.both == expected);
  // Each task's own trace is its share of that order.
  auto share_of = [&](const std::string& task) {
    std::vector<std::string> out;
    for (auto& line : expected)
      if (line.compare(0, task.size() + 1, task + " ") == 0)
        out.push_back(line.substr(task.size() + 1));
    return out;
  };
  CHECK(first.seen.ps == share_of("ps"));
  CHECK(first.seen.worker == share_of("worker"));
}

TEST_CASE("closing a session deregisters its partitions on the ps and on the worker") {
  auto outcome = train_one_step();
  auto handles_after = [](const std::vector<std::string>& lines, const std::string& word) {
    std::multiset<std::string> out;
    for (auto& line : lines)
      if (auto at = line.find(" " + word + " "); at != std::string::npos)
        out.insert(line.substr(at + word.size() + 2));
    return out;
  };
  for (auto* lines : {&outcome.seen.ps, &outcome.seen.worker}) {
    auto registered = handles_after(*lines, "register");
    CHECK_FALSE(registered.empty());
    CHECK(handles_after(*lines, "deregister") == registered);
    // Nothing after the deregistrations: the close came last.
    REQUIRE_FALSE(lines->empty());
    CHECK(lines->back().find("deregister") != std::string::npos);
  }
}

TEST_CASE("a node failing on the ps aborts the step on the worker and names the ps task") {
  two_task_cluster cluster;
  auto g = std::make_shared<graph>();
  output broken;
  {
    auto d = g->device("/job:ps/task:0");
    auto p = ops::placeholder(*g, dtype::float32, {-1}, "p");
    auto q = ops::placeholder(*g, dtype::float32, {-1}, "q");
    broken = ops::add(p, q, "broken");
  }
  {
    // The worker waits for `broken`, which fails on the ps when p and q do not broadcast.
    auto d = g->device("/job:worker/task:0");
    ops::square(broken, "waiting");
  }
  REQUIRE(g->status().ok());
  auto created = cluster.create(g);
  REQUIRE(created.outcome.ok());

  auto failed = cluster.run(created.handle,
                            {{"p:0", tensor::from_vector<float>({1, 2, 3})},
                             {"q:0", tensor::from_vector<float>({1, 2})}},
                            {"waiting:0"}, {});
  REQUIRE_FALSE(failed.outcome.ok());
  INFO(failed.outcome.to_string());
  CHECK(failed.outcome.message().find(std::string{"node 'broken' on "} + ps_device) !=
        std::string::npos);
  // Where it came from is a field: the ps task, in the incarnation it listed its devices with.
  REQUIRE(failed.outcome.origin());
  CHECK(failed.outcome.origin()->job == "ps");
  CHECK(failed.outcome.origin()->task == 0);
  CHECK(failed.outcome.origin()->incarnation != 0);
  CHECK(failed.fetched.empty());

  // The ps reports its failure; the master's step coordinator aborts the step on both tasks;
  // the worker, whose _Recv for `broken` would otherwise wait forever, ends the step aborted.
  auto base = id_base_of(cluster.seen->both);
  auto ps = normalised(cluster.seen->ps, base);
  auto worker = normalised(cluster.seen->worker, base);
  for (auto& line : cluster.seen->both)
    UNSCOPED_INFO(normalised(line, base));
  REQUIRE(ps.size() == 4);
  CHECK(ps[0] == "/device:CPU:0 register 1");
  CHECK(ps[1] == "/device:CPU:0 run step 1");
  CHECK(ps[2].rfind("/device:CPU:0 finished step 1 with ", 0) == 0);
  CHECK(ps[2].find("node 'broken'") != std::string::npos);
  CHECK(ps[3] == "/device:CPU:0 abort step 1");
  REQUIRE(worker.size() == 4);
  CHECK(worker[0] == "/device:CPU:0 register 2");
  CHECK(worker[1] == "/device:CPU:0 run step 1");
  CHECK(worker[2] == "/device:CPU:0 abort step 1");
  CHECK(worker[3].rfind("/device:CPU:0 finished step 1 with ", 0) == 0);
  CHECK(worker[3].find("aborted on " + std::string{worker_device}) != std::string::npos);
  CHECK(worker[3].find("node 'broken' on " + std::string{ps_device}) != std::string::npos);

  // Nothing is left waiting: the same session runs the step once the feeds fit.
  auto ok = cluster.run(created.handle,
                        {{"p:0", tensor::from_vector<float>({1, 2})},
                         {"q:0", tensor::from_vector<float>({3, 4})}},
                        {"waiting:0"}, {});
  INFO(ok.outcome.to_string());
  REQUIRE(ok.outcome.ok());
  REQUIRE(ok.fetched.size() == 1);
  CHECK(ok.fetched[0].to_vector<float>() == std::vector<float>{16, 36});
  CHECK(cluster.close(created.handle).ok());
}

TEST_CASE("a step with the ps hung names it after the step bound and a probe, and closing the session does not wait for it") {
  two_task_cluster cluster;
  linreg_graph model;
  constexpr std::int64_t step_bound_ms = 2000;
  const auto probe_ms = std::chrono::milliseconds{500}; // device_actor.cpp: step bound / 4
  auto created = cluster.create(model.g, make_session_config(false, false, step_bound_ms));
  REQUIRE(created.outcome.ok());
  REQUIRE(cluster.run(created.handle, {}, {}, {model.init}).outcome.ok());
  auto x = tensor::from_vector<float>({1, 2, 3, 4});
  // A first step registers the step's partitions.
  REQUIRE(cluster.run(created.handle, {{model.x, x}}, {model.loss}, {model.train}).outcome.ok());

  // The ps is stopped from here on; only the worker's node runs, and only its clock moves.
  caf::scoped_actor client{cluster.worker_node.system()};
  master_run_request step;
  step.handle = created.handle;
  step.feeds = {{model.x, x}};
  step.fetches = {model.loss};
  step.targets = {model.train};
  client->send(cluster.master, run_atom::value, std::move(step));
  cluster.run_worker_node_only();
  auto& clock = cluster.worker_node.scheduler();
  auto answer = [&]() -> std::optional<master_run_result> {
    cluster.run_worker_node_only();
    std::optional<master_run_result> got;
    client->receive([&](master_run_result& r) { got = std::move(r); },
                    caf::after(std::chrono::seconds(0)) >> [] {});
    return got;
  };
  clock.advance_time(std::chrono::milliseconds{step_bound_ms} - std::chrono::milliseconds{1});
  CHECK_FALSE(answer());
  // The step's bound passes: both devices are probed, and the worker answers at once.
  clock.advance_time(std::chrono::milliseconds{1});
  CHECK_FALSE(answer());
  clock.advance_time(probe_ms - std::chrono::milliseconds{1});
  CHECK_FALSE(answer());
  // The probe's bound passes: the ps is named, nothing waits for a second step bound.
  clock.advance_time(std::chrono::milliseconds{1});
  auto failed = answer();
  REQUIRE(failed.has_value());
  INFO(failed->outcome.to_string());
  CHECK(failed->outcome.code() == errc::deadline_exceeded);
  CHECK(failed->outcome.message().rfind(std::string{ps_device} + " did not answer step", 0) == 0);
  CHECK(failed->outcome.message().find("nor a probe after it: hung or unreachable") !=
        std::string::npos);
  REQUIRE(failed->outcome.origin());
  CHECK(failed->outcome.origin()->name() == "/job:ps/replica:0/task:0");

  // The close answers with the ps still stopped, without any more time passing.
  client->send(cluster.master, close_atom::value, created.handle);
  cluster.run_worker_node_only();
  std::optional<status> closed;
  client->receive([&](status& s) { closed = s; }, caf::after(std::chrono::seconds(0)) >> [] {});
  REQUIRE(closed.has_value());
  INFO(closed->to_string());
  CHECK(closed->ok());

  // Resumed, the ps still gets the close: its partitions (the initialiser's and the step's)
  // are freed.
  auto ps_lines_with = [&](const std::string& word) {
    return std::count_if(cluster.seen->ps.begin(), cluster.seen->ps.end(),
                         [&](const std::string& line) { return line.find(word) != std::string::npos; });
  };
  CHECK(ps_lines_with(" deregister ") == 0);
  cluster.net.exec_all();
  CHECK(ps_lines_with(" register ") == 2);
  CHECK(ps_lines_with(" deregister ") == 2);
}

TEST_CASE("a partition the hung ps never registers fails the step naming the ps task as its origin") {
  two_task_cluster cluster;
  linreg_graph model;
  auto created = cluster.create(model.g, make_session_config(false, false, 2000));
  REQUIRE(created.outcome.ok());
  REQUIRE(cluster.run(created.handle, {}, {}, {model.init}).outcome.ok());

  // The ps is stopped before the training step's first run, which must register its
  // partitions there: the registration's request times out on the worker's clock.
  caf::scoped_actor client{cluster.worker_node.system()};
  master_run_request step;
  step.handle = created.handle;
  step.feeds = {{model.x, tensor::from_vector<float>({1, 2, 3, 4})}};
  step.fetches = {model.loss};
  step.targets = {model.train};
  client->send(cluster.master, run_atom::value, std::move(step));
  cluster.run_worker_node_only();
  // The master's request bound (master_options::timeout_seconds, 10 s by default) passes.
  cluster.worker_node.scheduler().advance_time(std::chrono::seconds{10});
  cluster.run_worker_node_only();
  std::optional<master_run_result> failed;
  client->receive([&](master_run_result& r) { failed = std::move(r); },
                  caf::after(std::chrono::seconds(0)) >> [] {});
  REQUIRE(failed.has_value());
  INFO(failed->outcome.to_string());
  CHECK_FALSE(failed->outcome.ok());
  CHECK(failed->outcome.message().find(std::string{"registering a partition on "} + ps_device) !=
        std::string::npos);
  // A timeout is no answer from the ps: the training library's lost-ps test reads this field.
  REQUIRE(failed->outcome.origin());
  CHECK(failed->outcome.origin()->name() == "/job:ps/replica:0/task:0");
  CHECK(failed->outcome.origin()->incarnation != 0);
}

TEST_CASE("steps in flight on a hung ps each fail at their own bound, though the coordinator keeps one timer") {
  two_task_cluster cluster;
  linreg_graph model;
  constexpr std::int64_t step_bound_ms = 2000;
  const auto ms = [](std::int64_t n) { return std::chrono::milliseconds{n}; };
  auto created = cluster.create(model.g, make_session_config(false, false, step_bound_ms));
  REQUIRE(created.outcome.ok());
  REQUIRE(cluster.run(created.handle, {}, {}, {model.init}).outcome.ok());
  auto x = tensor::from_vector<float>({1, 2, 3, 4});
  REQUIRE(cluster.run(created.handle, {{model.x, x}}, {model.loss}, {model.train}).outcome.ok());

  // The ps is stopped; step A starts at 0 ms, step B at 1000 ms.
  caf::scoped_actor client{cluster.worker_node.system()};
  auto send_step = [&] {
    master_run_request step;
    step.handle = created.handle;
    step.feeds = {{model.x, x}};
    step.fetches = {model.loss};
    step.targets = {model.train};
    client->send(cluster.master, run_atom::value, std::move(step));
    cluster.run_worker_node_only();
  };
  auto& clock = cluster.worker_node.scheduler();
  auto answers = [&] {
    cluster.run_worker_node_only();
    std::vector<master_run_result> got;
    bool more = true;
    while (more)
      client->receive([&](master_run_result& r) { got.push_back(std::move(r)); },
                      caf::after(std::chrono::seconds(0)) >> [&] { more = false; });
    return got;
  };
  send_step();
  clock.advance_time(ms(1000));
  send_step();
  CHECK(answers().empty());
  // A's bound passes at 2000 ms: its devices are probed; B's bound has not passed.
  clock.advance_time(ms(999));
  CHECK(answers().empty());
  clock.advance_time(ms(1));
  CHECK(answers().empty());
  // A's probe bound (a quarter of the step's) passes at 2500 ms: A alone fails, naming the ps.
  clock.advance_time(ms(499));
  CHECK(answers().empty());
  clock.advance_time(ms(1));
  auto first = answers();
  REQUIRE(first.size() == 1);
  CHECK(first[0].outcome.code() == errc::deadline_exceeded);
  CHECK(first[0].outcome.message().rfind(std::string{ps_device} + " did not answer step", 0) == 0);
  // B's bound passes at 3000 ms, its probe's at 3500 ms.
  clock.advance_time(ms(499));
  CHECK(answers().empty());
  clock.advance_time(ms(1));
  CHECK(answers().empty());
  clock.advance_time(ms(499));
  CHECK(answers().empty());
  clock.advance_time(ms(1));
  auto second = answers();
  REQUIRE(second.size() == 1);
  INFO(second[0].outcome.to_string());
  CHECK(second[0].outcome.code() == errc::deadline_exceeded);
  CHECK(second[0].outcome.message().find("nor a probe after it: hung or unreachable") !=
        std::string::npos);
  cluster.net.exec_all();
}

TEST_CASE("a task service published on one node lists its devices to another node") {
  testing::test_network net;
  auto& server = net.add_node();
  auto& client = net.add_node();
  net.prepare_connection(server, client, "ps", ps_port);
  task_service_options options;
  options.threads = 1;
  options.run_inline = true;
  auto service = spawn_task_service(server.system(), "ps", 0, options);
  server.stop_at_teardown(service);
  auto published = net.publish(server, service, ps_port);
  REQUIRE(published);
  CHECK(*published == ps_port);

  auto remote = net.remote_actor<task_actor>(client, "ps", ps_port);
  REQUIRE(remote);
  CHECK(remote->node() == service.node());
  CHECK(remote->node() != client.system().node());

  caf::scoped_actor self{client.system()};
  self->send(*remote, devices_atom::value);
  net.exec_all();
  std::optional<device_list> listed;
  self->receive([&](device_list& l) { listed = std::move(l); },
                caf::after(std::chrono::seconds(0)) >> [] {});
  REQUIRE(listed.has_value());
  REQUIRE(listed->devices.size() == 1);
  CHECK(listed->devices[0].first == ps_device);
  // A proxy on the client's node for the device actor living on the server's node.
  CHECK(listed->devices[0].second.node() == server.system().node());
}

TEST_CASE("a master that cannot reach the ps fails the session once its bound passes") {
  testing::test_network net;
  auto& ps_node = net.add_node();
  auto& worker_node = net.add_node();
  // The worker's connection to "ps:2221" opens, but nothing on the ps node accepts it: the
  // ps task never answers the handshake.
  net.prepare_connection(ps_node, worker_node, "ps", ps_port);
  task_service_options options;
  options.threads = 1;
  options.run_inline = true;
  auto worker_service = spawn_task_service(worker_node.system(), "worker", 0, options);
  worker_node.stop_at_teardown(worker_service);
  auto spec = cluster_spec::parse(cluster_text);
  REQUIRE(spec.ok());
  master_options master_config;
  master_config.task_services = {worker_service};
  master_config.cluster = std::make_shared<const cluster_spec>(std::move(*spec));
  master_config.timeout_seconds = 5;
  auto master = spawn_master(worker_node.system(), master_config);
  worker_node.stop_at_teardown(master);

  caf::scoped_actor client{worker_node.system()};
  auto g = std::make_shared<graph>();
  ops::constant(*g, 1.f, "c");
  client->send(master, create_atom::value, session_config{}, graph_def{g});
  net.exec_all();
  bool early = false;
  client->receive([&](session_created&) { early = true; },
                  caf::after(std::chrono::seconds(0)) >> [] {});
  CHECK_FALSE(early);

  // Time passes only on the virtual clock.
  CHECK(net.trigger_timeouts() > 0);
  std::optional<session_created> created;
  client->receive([&](session_created& s) { created = std::move(s); },
                  caf::after(std::chrono::seconds(0)) >> [] {});
  REQUIRE(created.has_value());
  INFO(created->outcome.to_string());
  CHECK_FALSE(created->outcome.ok());
  CHECK(created->outcome.code() == errc::unavailable);
  CHECK(created->outcome.message().find("cannot reach task /job:ps/replica:0/task:0 at ps:2221") !=
        std::string::npos);
  REQUIRE(created->outcome.origin());
  CHECK(created->outcome.origin()->name() == "/job:ps/replica:0/task:0");
}

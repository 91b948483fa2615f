// sync_round_client (a worker's part in synchronous rounds, actors/sync_rounds.hpp) on CAF's
// test scheduler: three workers' clients against one ps task's two shards, every push begun
// before the scheduler runs, so that each round is decided message by message, the same in
// every run: a round of two fresh gradients, a backup's late one dropped as stale, the backup in
// the next round, and a shard gone failing the push from its task.
#include "actors/master.hpp"
#include "actors/protocols/task.hpp"
#include "actors/session.hpp"
#include "actors/session_actor.hpp"
#include "actors/sync_rounds.hpp"
#include "actors/task_client.hpp"
#include "actors/task_service.hpp"
#include "actors/testing.hpp"
#include "graph/ops.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

using namespace actorflow;
using namespace std::chrono_literals;

namespace {

/// The ps task with "w" (2 floats) and "b" (1), initialised through a session of its own.
struct ps_with_w_and_b {
  testing::deterministic_system sys;
  protocol::task_actor ps = spawn_task_service(sys.system(), "ps", 0, sys.task_options("ps"));
  protocol::master_actor master;
  graph g;
  actorflow::variable w, b;
  std::unique_ptr<session> s;

  ps_with_w_and_b() {
    {
      auto on_ps = g.device("/job:ps/task:0");
      w = ops::variable(g, ops::constant(g, std::vector<float>{1.f, 2.f}, {2}), "w");
      b = ops::variable(g, ops::constant(g, std::vector<float>{1.f}, {1}), "b");
    }
    master_options config;
    config.task_services = {ps};
    master = spawn_master(sys.system(), config);
    auto options = sys.session_options();
    options.master = existing_master(master);
    s = std::make_unique<session>(sys.system(), g, options);
    REQUIRE(s->run_targets({ops::global_variables_initializer(g)}).ok());
  }
  ~ps_with_w_and_b() {
    s.reset();
    protocol::send_stop(master);
    protocol::send_stop(ps);
    sys.run_all();
  }

  /// The shards as the task's manifest lists them.
  std::map<std::string, shard_location> shards() {
    caf::scoped_actor self{sys.system()};
    self->send(ps, protocol::manifest_atom::value);
    sys.run_all();
    std::map<std::string, shard_location> out;
    self->receive(
      [&](protocol::task_manifest& manifest) {
        for (auto& [variable, shard] : manifest.shards)
          out[variable] = shard_location{shard, "", task_origin{"ps", 0, manifest.devices.incarnation}};
      },
      caf::after(0s) >> [] { FAIL("no manifest"); });
    return out;
  }

  std::vector<float> read(const actorflow::variable& v) {
    auto r = s->run({v.read});
    REQUIRE(r.ok());
    return r->at(0).to_vector<float>();
  }
};

std::vector<std::pair<std::string, tensor>> gradients(float value) {
  return {{"w", tensor::from_vector<float>({value, value})}, {"b", tensor::from_vector<float>({value})}};
}

} // namespace

TEST_CASE("sync_round_client on the test scheduler: a round of two, a backup's late gradient dropped as stale, the backup in the next round, and a lost shard fails the push from its ps") {
  ps_with_w_and_b cluster;
  auto shards = cluster.shards();
  REQUIRE(shards.size() == 2);
  // Three workers, rounds of two (one backup), gradient descent at 0.5.
  std::vector<std::unique_ptr<sync_round_client>> workers;
  for (int task = 0; task < 3; ++task) {
    sync_round_settings settings;
    settings.worker_task = task;
    settings.incarnation = 10 + static_cast<std::uint64_t>(task);
    settings.learning_rate = 0.5;
    settings.replicas_to_aggregate = 2;
    settings.answer_bound = 1s;
    settings.drive = [&cluster] { cluster.sys.run_all(); };
    workers.push_back(std::make_unique<sync_round_client>(cluster.sys.system(), cluster_spec{},
                                                          "ps", settings));
    workers.back()->use_shards(shards);
  }

  // Round 0: workers 0 and 1; the mean gradient 3 applied once: w = (1, 2) - 0.5 * 3.
  auto first = workers[0]->begin_push(0, gradients(2.f), 1.0, 0.5);
  auto second = workers[1]->begin_push(0, gradients(4.f), 3.0, 1.0);
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  for (auto* sent : {&first, &second}) {
    auto which = sent == &first ? 0 : 1;
    auto outcome = workers[static_cast<std::size_t>(which)]->finish_push(***sent);
    INFO("worker " << which);
    REQUIRE(outcome.ok());
    CHECK(outcome->applied);
    CHECK(outcome->global_step == 1);
    CHECK(outcome->round_gradients == 2);
    CHECK(outcome->round_loss == 2.0);
    CHECK(outcome->round_accuracy == 0.75);
    CHECK(outcome->stale_dropped == 0);
  }
  CHECK(cluster.read(cluster.w) == std::vector<float>{-0.5f, 0.5f});
  CHECK(cluster.read(cluster.b) == std::vector<float>{-0.5f});

  // The backup's gradient of round 0 comes after the round closed: answered at once, dropped
  // on both shards, nothing applied.
  auto late = workers[2]->push(0, gradients(100.f), 0, 0);
  REQUIRE(late.ok());
  CHECK_FALSE(late->applied);
  CHECK(late->global_step == 1);
  CHECK(late->stale_dropped == 1);
  CHECK(cluster.read(cluster.b) == std::vector<float>{-0.5f});

  // Round 1 closes with the former backup and worker 0; worker 1's comes too late.
  auto backup = workers[2]->begin_push(1, gradients(1.f), 0, 0);
  auto chief = workers[0]->begin_push(1, gradients(3.f), 0, 0);
  auto slow = workers[1]->begin_push(1, gradients(50.f), 0, 0);
  REQUIRE(backup.ok());
  REQUIRE(chief.ok());
  REQUIRE(slow.ok());
  auto backup_outcome = workers[2]->finish_push(**backup);
  auto chief_outcome = workers[0]->finish_push(**chief);
  auto slow_outcome = workers[1]->finish_push(**slow);
  REQUIRE(backup_outcome.ok());
  REQUIRE(chief_outcome.ok());
  REQUIRE(slow_outcome.ok());
  CHECK(backup_outcome->applied);
  CHECK(chief_outcome->applied);
  CHECK_FALSE(slow_outcome->applied);
  CHECK(slow_outcome->global_step == 2);
  CHECK(slow_outcome->stale_dropped == 2);
  CHECK(cluster.read(cluster.b) == std::vector<float>{-1.5f}); // -0.5 - 0.5 * (1 + 3) / 2

  // The shard of "b" goes away: the next push fails at once, from the ps task.
  caf::anon_send_exit(shards.at("b").shard, caf::exit_reason::kill);
  cluster.sys.run_all();
  auto lost = workers[0]->push(2, gradients(1.f), 0, 0);
  REQUIRE_FALSE(lost.ok());
  INFO(lost.error().to_string());
  CHECK(lost.error().code() == errc::unavailable);
  REQUIRE(lost.error().origin());
  CHECK(lost.error().origin()->name() == "/job:ps/replica:0/task:0");

  // A push that names a variable without a shard is refused before anything is sent.
  auto unknown = workers[0]->push(2, {{"nope", tensor::from_vector<float>({1.f})}}, 0, 0);
  CHECK(unknown.error().code() == errc::failed_precondition);
  CHECK(unknown.error().message().find("'nope'") != std::string::npos);
}

// Between-graph initialisation (TensorFlow's SessionManager), on CAF's test scheduler: a worker
// that is not the chief waits until the chief has initialised the variables it shares on the
// ps, each worker through a master of its own; the wait is bounded and says what is missing.
// train::session_manager: the chief restores or initialises, recovers after a lost ps (keeping
// what a ps still holds), and a lost ps is told by the failure's origin.
#include "actors/master.hpp"
#include "actors/session.hpp"
#include "actors/session_actor.hpp"
#include "actors/task_service.hpp"
#include "actors/testing.hpp"
#include "train/session_manager.hpp"
#include "train/trainer.hpp"
#include "graph/ops.hpp"
#include "support/temp_dir.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

using namespace actorflow;
using namespace std::chrono_literals;

namespace {

/// One worker's program: its own graph with the shared variable "w" on the ps, and a session
/// through its own master.
struct worker_program {
  graph g;
  actorflow::variable w, global_step;
  std::unique_ptr<saver> checkpoints_saver;
  protocol::master_actor master;
  std::unique_ptr<session> s;

  /// `id_base`: the ps serves both workers' masters, whose partition ids must not collide.
  worker_program(testing::deterministic_system& sys, const protocol::task_actor& ps,
                 std::int64_t id_base) {
    {
      auto on_ps = g.device("/job:ps/task:0");
      w = ops::variable(g, ops::constant(g, std::vector<float>{1, 2}, {2}), "w");
      global_step = ops::variable(g, ops::constant(g, std::int64_t{0}), "global_step");
    }
    checkpoints_saver = std::make_unique<saver>(g);
    master_options config;
    config.task_services = {ps};
    config.id_base = id_base;
    master = spawn_master(sys.system(), config);
    auto options = sys.session_options();
    options.master = existing_master(master);
    s = std::make_unique<session>(sys.system(), g, options);
  }
  // Stops the master even when a REQUIRE fails: the actor system waits for it otherwise.
  ~worker_program() {
    s.reset();
    protocol::send_stop(master);
  }
};

/// The ps task, stopped at the end of the test however it ends (after the workers).
struct ps_task {
  testing::deterministic_system& sys;
  protocol::task_actor actor;
  explicit ps_task(testing::deterministic_system& s)
    : sys(s), actor(spawn_task_service(s.system(), "ps", 0, s.task_options("ps"))) {}
  ~ps_task() {
    protocol::send_stop(actor);
    sys.run_all();
  }
};

} // namespace

TEST_CASE("a worker that is not the chief waits until the chief initialised the shared variables") {
  testing::deterministic_system sys;
  ps_task ps{sys};
  worker_program chief{sys, ps.actor, 0};
  worker_program other{sys, ps.actor, std::int64_t{1} << 40};

  std::vector<status> refused;
  train::readiness_wait wait;
  wait.check = [&] {
    auto st = other.s->run({other.w.read}).error();
    if (!st.ok())
      refused.push_back(st);
    return st;
  };
  // The chief initialises during the non-chief's second pause.
  int pauses = 0;
  wait.pause = [&] {
    if (++pauses == 2)
      REQUIRE(chief.s->run_targets({ops::global_variables_initializer(chief.g)}).ok());
  };
  auto tries = train::wait_until_ready(wait);
  REQUIRE(tries.ok());
  CHECK(*tries == 3);
  REQUIRE(refused.size() == 2);
  for (auto& st : refused) {
    CHECK(st.code() == errc::failed_precondition);
    CHECK(st.message().find("uninitialized value 'w'") != std::string::npos);
  }
  // What the non-chief reads now is what the chief wrote.
  auto now = other.s->run({other.w.read});
  REQUIRE(now.ok());
  CHECK(now->at(0).to_vector<float>() == std::vector<float>{1, 2});
}

TEST_CASE("a non-chief's wait for the variables is bounded and names what is still uninitialised") {
  testing::deterministic_system sys;
  ps_task ps{sys};
  worker_program other{sys, ps.actor, 0};

  // No chief: a clock the pauses move on by one second each.
  std::chrono::steady_clock::time_point clock{};
  train::readiness_wait wait;
  wait.check = [&] { return other.s->run({other.w.read}).error(); };
  wait.timeout = 3s;
  wait.now = [&] { return clock; };
  wait.pause = [&] { clock += 1s; };
  std::vector<status> told;
  wait.waiting = [&](const status& why) { told.push_back(why); };
  auto tries = train::wait_until_ready(wait);
  REQUIRE_FALSE(tries.ok());
  // The wait said once, at its start, what it was waiting for.
  REQUIRE(told.size() == 1);
  CHECK(told[0].message().find("uninitialized value 'w'") != std::string::npos);
  CHECK(tries.error().code() == errc::failed_precondition);
  auto message = tries.error().message();
  CHECK(message.find("not ready within 3 s (--init-timeout)") != std::string::npos);
  INFO(message);
  CHECK(message.find("uninitialized value 'w'") != std::string::npos);

  SECTION("an error that waiting cannot cure ends the wait at once") {
    int checks = 0;
    wait.check = [&] {
      ++checks;
      return other.s->run({other.w.read}, {{other.w.read, tensor::from_vector<std::int32_t>({1})}}).error();
    };
    auto refused = train::wait_until_ready(wait);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code() == errc::invalid_argument);
    CHECK(checks == 1);
  }

  SECTION("a task lost during the wait is waited for, whatever its failure's code") {
    // What a read answers while a ps dies and restarts: its connection aborted, data lost on
    // it, then unreachable, then ready.
    std::vector<status> answers{make_error(errc::aborted, "the step was aborted"),
                                make_error(errc::data_loss, "registering a partition"),
                                make_error(errc::unavailable, "cannot reach task ps:0"), {}};
    std::size_t checks = 0;
    wait.check = [&] { return answers.at(checks++); };
    auto waited = train::wait_until_ready(wait);
    REQUIRE(waited.ok());
    CHECK(*waited == 4);
  }
}

namespace {

/// The session_manager of `p`'s variables, restoring from `checkpoints`, its lines in `said`.
train::session_manager manager_of(worker_program& p, train::checkpoint_files& checkpoints,
                                  std::vector<std::string>& said) {
  train::session_manager_options ready;
  ready.global_step = p.global_step.read;
  ready.variables = {p.w.read, p.global_step.read};
  ready.initializer = ops::global_variables_initializer(p.g);
  ready.checkpoints = &checkpoints;
  ready.init_timeout_seconds = 0;
  ready.say = [&said](const std::string& line) { said.push_back(line); };
  return train::session_manager{std::move(ready)};
}

/// Sets `p`'s variables to w = {7, 8} at global step `step`.
void train_to(worker_program& p, std::int64_t step) {
  auto set_w = ops::assign(p.w, ops::constant(p.g, std::vector<float>{7, 8}, {2}));
  auto set_step = ops::assign(p.global_step, ops::constant(p.g, step));
  REQUIRE(p.s->run_targets({set_w, set_step}).ok());
}

} // namespace

TEST_CASE("session_manager: the chief initialises or restores, the others wait, and after a lost ps the chief keeps what it holds or restores") {
  testing::deterministic_system sys;
  actorflow::test::temp_dir dir;
  ps_task ps{sys};
  worker_program chief{sys, ps.actor, 0};
  train::checkpoint_files checkpoints{dir.path(), 3, *chief.checkpoints_saver};
  std::vector<std::string> said;
  auto manager = manager_of(chief, checkpoints, said);

  // Nothing to restore yet: initialised, at step 0; the non-chief then reads step 0.
  auto started = manager.prepare_session(*chief.s, {true, false});
  REQUIRE(started.ok());
  CHECK(*started == 0);
  CHECK(said.empty());
  worker_program other{sys, ps.actor, std::int64_t{1} << 40};
  train::checkpoint_files none;
  std::vector<std::string> other_said;
  auto waited = manager_of(other, none, other_said).wait_for_session(*other.s);
  REQUIRE(waited.ok());
  CHECK(*waited == 0);

  train_to(chief, 40);
  REQUIRE(checkpoints.writer().save(*chief.s, 40).ok());
  REQUIRE(checkpoints.written().ok());

  SECTION("a ps that kept its variables (frozen, cut off) is not initialised again") {
    auto kept = manager.recover_session(*chief.s, true);
    REQUIRE(kept.ok());
    CHECK(*kept == 40);
    REQUIRE(said.size() == 1);
    CHECK(said[0] == "the ps tasks still hold every variable: training goes on from global step 40");
  }

  SECTION("a ps that came back empty gets the latest checkpoint, said") {
    ps_task restarted{sys};
    worker_program after{sys, restarted.actor, std::int64_t{2} << 40};
    std::vector<std::string> after_said;
    // The same directory, through this program's saver (a saver belongs to one graph).
    train::checkpoint_files same{dir.path(), 3, *after.checkpoints_saver};
    auto recovered = manager_of(after, same, after_said).recover_session(*after.s, true);
    INFO(recovered.error().to_string());
    REQUIRE(recovered.ok());
    CHECK(*recovered == 40);
    REQUIRE(after_said.size() == 1);
    CHECK(after_said[0] == "restored " + dir.path() +
                             "/ckpt-40.afckpt: training returns to global step 40; the updates "
                             "since are lost");
    auto w = after.s->run({after.w.read});
    REQUIRE(w.ok());
    CHECK(w->at(0).to_vector<float>() == std::vector<float>{7, 8});
  }

  SECTION("a ps that came back empty, with no checkpoints, starts again from the initial values") {
    ps_task restarted{sys};
    worker_program after{sys, restarted.actor, std::int64_t{2} << 40};
    std::vector<std::string> after_said;
    auto recovered = manager_of(after, none, after_said).recover_session(*after.s, true);
    REQUIRE(recovered.ok());
    CHECK(*recovered == 0);
    REQUIRE(after_said.size() == 1);
    CHECK(after_said[0].rfind("no checkpoint to restore", 0) == 0);
  }

  SECTION("a chief started again restores the latest checkpoint") {
    ps_task restarted{sys};
    worker_program again{sys, restarted.actor, std::int64_t{2} << 40};
    std::vector<std::string> again_said;
    train::checkpoint_files same{dir.path(), 3, *again.checkpoints_saver};
    auto restored = manager_of(again, same, again_said).prepare_session(*again.s, {true, false});
    INFO(restored.error().to_string());
    REQUIRE(restored.ok());
    CHECK(*restored == 40);
    REQUIRE(again_said.size() == 1);
    CHECK(again_said[0] == "restored " + dir.path() + "/ckpt-40.afckpt: training goes on from global step 40");
  }
}

TEST_CASE("session_manager: a lost ps is told by the failure's origin, or by a ps that does not answer") {
  train::checkpoint_files none;
  train::session_manager_options options;
  options.ps_job = "ps";
  bool ps_answers = true;
  int probes = 0;
  options.probe_ps = [&]() -> status {
    ++probes;
    return ps_answers ? status{} : make_error(errc::unavailable, "cannot reach task /job:ps/replica:0/task:0");
  };
  train::session_manager manager{options};
  auto lost = make_error(errc::unavailable, "connection closed");
  CHECK(manager.lost_ps(lost.with_origin({"ps", 1, 0})));
  // The text does not count: a worker's failure that mentions the ps is the worker's.
  auto worker = make_error(errc::unavailable, "waiting for /job:ps/replica:0/task:0's tensor")
                  .with_origin({"worker", 1, 0});
  CHECK_FALSE(manager.lost_ps(worker));
  // Unless the ps does not answer now.
  ps_answers = false;
  CHECK(manager.lost_ps(worker));
  // A failure no connection causes is never a lost ps, and asks nobody.
  probes = 0;
  CHECK_FALSE(manager.lost_ps(make_error(errc::invalid_argument, "bad feed").with_origin({"ps", 0, 0})));
  CHECK(probes == 0);
}

// Between-graph initialisation (TensorFlow's SessionManager), on CAF's test scheduler: a worker
// that is not the chief waits until the chief has initialised the variables it shares on the
// ps, each worker through a master of its own; the wait is bounded and says what is missing.
#include "actors/master.hpp"
#include "actors/session.hpp"
#include "actors/session_actor.hpp"
#include "actors/task_service.hpp"
#include "actors/testing.hpp"
#include "train/trainer.hpp"
#include "graph/ops.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

using namespace actorflow;
using namespace std::chrono_literals;

namespace {

/// One worker's program: its own graph with the shared variable "w" on the ps, and a session
/// through its own master.
struct worker_program {
  graph g;
  actorflow::variable w;
  protocol::master_actor master;
  std::unique_ptr<session> s;

  /// `id_base`: the ps serves both workers' masters, whose partition ids must not collide.
  worker_program(testing::deterministic_system& sys, const protocol::task_actor& ps,
                 std::int64_t id_base) {
    {
      auto on_ps = g.device("/job:ps/task:0");
      w = ops::variable(g, ops::constant(g, std::vector<float>{1, 2}, {2}), "w");
    }
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
}

// The session actor: a session that actors use without blocking, on a one-thread scheduler and
// on CAF's test scheduler, and what it says when its master goes away.
#include "actors/master.hpp"
#include "actors/session_actor.hpp"
#include "actors/task_service.hpp"
#include "actors/testing.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

using namespace actorflow;
using namespace std::chrono_literals;

namespace {

/// y = 2 x + 1 learned from a few points by gradient descent: the host actor's model.
struct linear_model {
  graph g;
  output x = ops::placeholder(g, dtype::float32, {-1}, "x");
  output y = ops::placeholder(g, dtype::float32, {-1}, "y");
  actorflow::variable w = ops::variable(g, 0.f, "w");
  actorflow::variable b = ops::variable(g, 0.f, "b");
  output loss = ops::reduce_mean(ops::square(w * x + b - y), {}, false, "loss");
  output train = gradient_descent_optimizer{0.1}.minimize(loss);
  output init = ops::global_variables_initializer(g);

  feed_list batch() const {
    std::vector<float> xs{0, 1, 2, 3};
    std::vector<float> ys;
    for (auto v : xs)
      ys.push_back(2 * v + 1);
    return {{x, tensor::from_vector<float>(xs)}, {y, tensor::from_vector<float>(ys)}};
  }
};

/// What the host actor reports: the trained values, or the first failure.
struct host_report {
  status outcome;
  float w = 0;
  float b = 0;
};

/// A host application's actor: initialises, trains `steps` steps, fetches w and b, each
/// request sent only when the previous answer arrived, and tells `report_to`.
caf::behavior host_actor(caf::event_based_actor* self, protocol::session_actor session,
                         const linear_model* model, int steps, caf::actor report_to) {
  auto fail = [=](const status& s) { self->send(report_to, host_report{s, 0, 0}); self->quit(); };
  auto fetch = [=] {
    self->request(session, 30s, protocol::run_atom::value,
                  *protocol::make_session_run({model->w.read, model->b.read}))
      .then([=](protocol::master_run_result& r) {
        if (!r.outcome.ok())
          return fail(r.outcome);
        self->send(report_to, host_report{{}, r.fetched.at(0).scalar_value<float>(),
                                          r.fetched.at(1).scalar_value<float>()});
        self->quit();
      });
  };
  auto step = std::make_shared<std::function<void(int)>>();
  // The function holds itself weakly (no cycle); the pending request's handler holds it.
  std::weak_ptr<std::function<void(int)>> weak_step = step;
  *step = [=](int left) {
    if (left == 0)
      return fetch();
    auto next = weak_step.lock();
    self->request(session, 30s, protocol::run_atom::value,
                  *protocol::make_session_run({}, model->batch(), {model->train}))
      .then([=](protocol::master_run_result& r) {
        if (!r.outcome.ok())
          return fail(r.outcome);
        (*next)(left - 1);
      });
  };
  self->request(session, 30s, protocol::run_atom::value,
                *protocol::make_session_run({}, {}, {model->init}))
    .then([=](protocol::master_run_result& r) {
      if (!r.outcome.ok())
        return fail(r.outcome);
      (*step)(steps);
    });
  return {[](int) {}};
}

} // namespace

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(host_report)

TEST_CASE("an actor trains through a session actor on a one-thread scheduler without blocking it") {
  caf::actor_system_config config;
  config.set("scheduler.max-threads", std::size_t{1});
  caf::actor_system sys{config};
  linear_model model;
  session_options options;
  options.inter_op_parallelism_threads = 1;
  options.intra_op_parallelism_threads = 1;
  options.use_per_session_threads = true;
  auto session = spawn_session(sys, model.g, options);
  REQUIRE(session.ok());

  caf::scoped_actor waiter{sys};
  sys.spawn(host_actor, *session, &model, 200, caf::actor{waiter});
  std::optional<host_report> report;
  waiter->receive([&](host_report& r) { report = std::move(r); },
                  caf::after(60s) >> [] {});
  REQUIRE(report.has_value());
  INFO(report->outcome.to_string());
  REQUIRE(report->outcome.ok());
  CHECK(report->w == Approx(2.f).margin(0.05));
  CHECK(report->b == Approx(1.f).margin(0.1));
  caf::anon_send_exit(*session, caf::exit_reason::user_shutdown);
}

TEST_CASE("a session actor under CAF's test scheduler gives the same messages in the same order") {
  auto run_once = [] {
    testing::deterministic_system sys;
    linear_model model;
    session_options base;
    base.in_process_cluster = {{"ps", 1}, {"worker", 1}};
    auto session = spawn_session(sys.system(), model.g, sys.session_options(base));
    REQUIRE(session.ok());
    caf::scoped_actor waiter{sys.system()};
    sys.system().spawn(host_actor, *session, &model, 3, caf::actor{waiter});
    sys.run_all();
    std::optional<host_report> report;
    waiter->receive([&](host_report& r) { report = std::move(r); }, caf::after(0s) >> [] {});
    REQUIRE(report.has_value());
    REQUIRE(report->outcome.ok());
    caf::anon_send_exit(*session, caf::exit_reason::user_shutdown);
    sys.run_all();
    return std::make_pair(report->w, sys.trace());
  };
  auto [first_w, first_trace] = run_once();
  auto [second_w, second_trace] = run_once();
  CHECK(first_w == second_w);
  CHECK(first_w != 0.f);
  CHECK(first_trace == second_trace);
  // The ps registers the initializer's partition before it runs its first step.
  auto position = [&](const std::string& line) {
    auto i = std::find(first_trace.begin(), first_trace.end(), line);
    return i == first_trace.end() ? -1 : static_cast<int>(i - first_trace.begin());
  };
  CHECK(position("/device:CPU:0 register 1") >= 0);
  CHECK(position("/device:CPU:0 run step 1") > position("/device:CPU:0 register 1"));
}

TEST_CASE("a session actor whose master goes down fails the next run at once, naming it") {
  testing::deterministic_system sys;
  task_service_options task_options;
  task_options.threads = 1;
  task_options.run_inline = true;
  auto task = spawn_task_service(sys.system(), "worker", 0, task_options);
  master_options master_config;
  master_config.task_services = {task};
  auto master = spawn_master(sys.system(), master_config);
  graph g;
  auto c = ops::constant(g, 3.f, "c") * ops::constant(g, 2.f, "d");
  auto options = sys.session_options();
  options.master = existing_master(master);
  auto session = spawn_session(sys.system(), g, options);
  REQUIRE(session.ok());

  caf::scoped_actor client{sys.system()};
  auto ask = [&] {
    std::optional<protocol::master_run_result> answer;
    client->send(*session, protocol::run_atom::value, *protocol::make_session_run({c}));
    sys.run_all();
    client->receive([&](protocol::master_run_result& r) { answer = std::move(r); },
                    caf::after(0s) >> [] {});
    REQUIRE(answer.has_value());
    return *answer;
  };
  auto ok = ask();
  REQUIRE(ok.outcome.ok());
  CHECK(ok.fetched.at(0).scalar_value<float>() == 6.f);

  caf::anon_send_exit(master, caf::exit_reason::kill);
  sys.run_all();
  auto failed = ask();
  REQUIRE_FALSE(failed.outcome.ok());
  CHECK(failed.outcome.code() == errc::unavailable);
  CHECK(failed.outcome.message().find("the master went down") != std::string::npos);
  protocol::send_stop(task);
  caf::anon_send_exit(*session, caf::exit_reason::user_shutdown);
  sys.run_all();
}

TEST_CASE("closing a session actor frees its partitions and stops it") {
  testing::deterministic_system sys;
  graph g;
  auto c = ops::constant(g, 1.f, "c") + ops::constant(g, 2.f, "d");
  auto session = spawn_session(sys.system(), g, sys.session_options());
  REQUIRE(session.ok());
  caf::scoped_actor client{sys.system()};
  client->send(*session, protocol::run_atom::value, *protocol::make_session_run({c}));
  sys.run_all();
  client->receive([](protocol::master_run_result& r) { REQUIRE(r.outcome.ok()); },
                  caf::after(0s) >> [] { FAIL("no answer to the run"); });
  client->monitor(*session);
  client->send(*session, protocol::close_atom::value);
  sys.run_all();
  std::optional<status> closed;
  client->receive([&](status& s) { closed = s; }, caf::after(0s) >> [] {});
  REQUIRE(closed.has_value());
  CHECK(closed->ok());
  bool down = false;
  client->receive([&](caf::down_msg&) { down = true; }, caf::after(0s) >> [] {});
  CHECK(down);
  auto deregistered = std::count_if(sys.trace().begin(), sys.trace().end(), [](auto& line) {
    return line.find(" deregister ") != std::string::npos;
  });
  CHECK(deregistered == 1);
}

TEST_CASE("run requests are made from outputs and checked before they are sent") {
  graph g;
  auto x = ops::placeholder(g, dtype::float32, {2}, "x");
  auto y = x * 2.0;
  auto good = protocol::make_session_run({y}, {{x, tensor::from_vector<float>({1, 2})}});
  REQUIRE(good.ok());
  CHECK(good->fetches == std::vector<std::string>{y.tensor_name()});
  CHECK(good->feeds.at(0).first == "x:0");
  auto wrong_shape = protocol::make_session_run({y}, {{x, tensor::from_vector<float>({1, 2, 3})}});
  REQUIRE_FALSE(wrong_shape.ok());
  CHECK(wrong_shape.error().message().find("'x:0'") != std::string::npos);
  graph other;
  auto z = ops::constant(other, 1.f, "z");
  auto mixed = protocol::make_session_run({y, z});
  REQUIRE_FALSE(mixed.ok());
  CHECK(mixed.error().message().find("another graph") != std::string::npos);
}

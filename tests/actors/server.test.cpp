// server: tf.train.Server for actorflow, in its own actor system or in the host's.
#include "actors/protocols/wire.hpp"
#include "actors/server.hpp"
#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "support/processes.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <string>

using namespace actorflow;
using namespace std::chrono_literals;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// 2 * 21 on the server at `target`.
result<float> answer_on(const std::string& target) {
  graph g;
  auto c = ops::constant(g, 2.f, "two") * ops::constant(g, 21.f, "x");
  session_options options;
  options.target = target;
  options.timeout_seconds = 10;
  session s{g, options};
  auto r = s.run({c});
  if (!r)
    return r.error();
  return r->at(0).scalar_value<float>();
}

} // namespace

TEST_CASE("create_local_server picks a free port and serves sessions at its target") {
  server_options options;
  options.threads = 1;
  auto local = server::create_local_server(options);
  REQUIRE(local.ok());
  auto& s = **local;
  CHECK(s.port() != 0);
  CHECK(s.target() == "caf://127.0.0.1:" + std::to_string(s.port()));
  CHECK(s.name() == "/job:localhost/replica:0/task:0");
  auto r = answer_on(s.target());
  INFO((r.ok() ? std::string{} : r.error().to_string()));
  REQUIRE(r.ok());
  CHECK(*r == 42.f);
  s.stop();
  s.join(); // returns at once: the server has stopped
}

TEST_CASE("a server started from a cluster spec serves its task at the spec's address") {
  auto port = testing::free_loopback_port();
  auto spec = cluster_spec::parse("ps=127.0.0.1:" + std::to_string(port));
  REQUIRE(spec.ok());
  server_options options;
  options.threads = 1;
  auto ps = server::start(std::make_shared<const cluster_spec>(*spec), "ps", 0, options);
  REQUIRE(ps.ok());
  CHECK((*ps)->port() == port);
  CHECK((*ps)->task());
  auto r = answer_on((*ps)->target());
  REQUIRE(r.ok());
  CHECK(*r == 42.f);
}

TEST_CASE("a server whose task is told to stop ends, and join returns") {
  server_options options;
  options.threads = 1;
  auto local = server::create_local_server(options);
  REQUIRE(local.ok());
  auto joined = std::async(std::launch::async, [&] { (*local)->join(); });
  protocol::send_stop((*local)->task());
  CHECK(joined.wait_for(10s) == std::future_status::ready);
}

TEST_CASE("a server for a task the spec does not have names the task") {
  auto spec = cluster_spec::parse("ps=127.0.0.1:2221");
  REQUIRE(spec.ok());
  auto missing = server::start(std::make_shared<const cluster_spec>(*spec), "ps", 3);
  REQUIRE_FALSE(missing.ok());
  CHECK(contains(missing.error().message(), "/job:ps/replica:0/task:3"));
  auto no_job = server::start(std::make_shared<const cluster_spec>(*spec), "worker", 0);
  REQUIRE_FALSE(no_job.ok());
  CHECK(contains(no_job.error().message(), "job 'worker'"));
}

TEST_CASE("a server on a port in use names the address it cannot listen on") {
  server_options options;
  options.threads = 1;
  auto first = server::create_local_server(options);
  REQUIRE(first.ok());
  options.port = (*first)->port();
  auto second = server::create_local_server(options);
  REQUIRE_FALSE(second.ok());
  CHECK(contains(second.error().message(),
                 "cannot listen on 127.0.0.1:" + std::to_string(options.port)));
}

TEST_CASE("a server runs in the host's actor system when given one, and checks it first") {
  caf::actor_system_config config;
  config.load<caf::io::middleman>();
  add_actorflow_message_types(config);
  caf::actor_system sys{config};
  server_options options;
  options.threads = 1;
  options.system = &sys;
  {
    auto hosted = server::create_local_server(options);
    REQUIRE(hosted.ok());
    CHECK(&(*hosted)->system() == &sys);
    auto r = answer_on((*hosted)->target());
    REQUIRE(r.ok());
    CHECK(*r == 42.f);
  }
  caf::actor_system_config bare;
  caf::actor_system bare_system{bare};
  options.system = &bare_system;
  auto refused = server::create_local_server(options);
  REQUIRE_FALSE(refused.ok());
  CHECK(contains(refused.error().message(), "a server needs CAF's middleman"));
}

TEST_CASE("a cluster task's master hands out session handles nobody can guess from their own") {
  auto port = testing::free_loopback_port();
  auto spec = cluster_spec::parse("ps=127.0.0.1:" + std::to_string(port));
  REQUIRE(spec.ok());
  server_options options;
  options.threads = 1;
  auto ps = server::start(std::make_shared<const cluster_spec>(*spec), "ps", 0, options);
  REQUIRE(ps.ok());
  graph g;
  ops::constant(g, 1.f, "one");
  auto def = protocol::make_graph_def(g);
  REQUIRE(def.ok());
  auto& sys = (*ps)->system();
  caf::scoped_actor client{sys};
  std::vector<std::int64_t> handles;
  for (int i = 0; i < 2; ++i)
    client->request((*ps)->master(), 10s, protocol::create_atom::value,
                    protocol::make_session_config(), *def)
      .receive([&](protocol::session_created& made) {
                 REQUIRE(made.outcome.ok());
                 handles.push_back(made.handle);
               },
               [](caf::error&) { FAIL("no session"); });
  REQUIRE(handles.size() == 2);
  // Not a counter: the neighbour of one client's handle is nobody's session.
  CHECK(std::abs(handles[1] - handles[0]) > 1);
  for (auto guess : {handles[1] - 1, handles[1] + 1}) {
    if (guess == handles[0])
      continue;
    status extended;
    client->request((*ps)->master(), 10s, protocol::extend_atom::value, guess, *def)
      .receive([&](status& s) { extended = s; }, [](caf::error&) { FAIL("no answer"); });
    CHECK(extended.code() == errc::not_found);
  }
}

// What an embedder's actor system must have, and the errors that say so instead of a throw or
// a hang; sessions that notice their master going down.
#include "actors/master.hpp"
#include "actors/protocols/wire.hpp"
#include "actors/session.hpp"
#include "actors/session_actor.hpp"
#include "actors/task_service.hpp"
#include "actors/testing.hpp"
#include "devices/runtime_env.hpp"
#include "graph/ops.hpp"
#include "support/processes.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

using namespace actorflow;
using namespace std::chrono_literals;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string nobody_listening() {
  return "127.0.0.1:" + std::to_string(testing::free_loopback_port());
}

} // namespace

TEST_CASE("a target on an actor system without the middleman is an error saying to load it") {
  caf::actor_system_config config; // the host forgot config.load<caf::io::middleman>()
  caf::actor_system sys{config};
  graph g;
  auto c = ops::constant(g, 1.f, "c");
  session_options options;
  options.target = "caf://" + nobody_listening();
  session s{sys, g, options}; // no throw
  auto r = s.run({c});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == errc::failed_precondition);
  CHECK(contains(r.error().message(), "config.load<caf::io::middleman>()"));
  auto actor = spawn_session(sys, g, options);
  REQUIRE_FALSE(actor.ok());
  CHECK(contains(actor.error().message(), "middleman"));
}

TEST_CASE("a cluster on an actor system without the middleman fails at once instead of hanging") {
  caf::actor_system_config config;
  caf::actor_system sys{config};
  graph g;
  auto c = ops::constant(g, 1.f, "c");
  session_options options;
  options.cluster = std::make_shared<const cluster_spec>(
    *cluster_spec::parse("worker=" + nobody_listening()));
  options.timeout_seconds = 2;
  session s{sys, g, options};
  auto started = std::chrono::steady_clock::now();
  auto r = s.run({c});
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.error().message(), "middleman"));
  CHECK(std::chrono::steady_clock::now() - started < 2s);
}

TEST_CASE("a master of a cluster in a system without the middleman answers with an error") {
  testing::deterministic_system sys;
  master_options options;
  options.cluster = std::make_shared<const cluster_spec>(*cluster_spec::parse("ps=127.0.0.1:1"));
  auto master = spawn_master(sys.system(), options);
  graph g;
  ops::constant(g, 1.f, "c");
  auto def = protocol::make_graph_def(g);
  REQUIRE(def.ok());
  caf::scoped_actor client{sys.system()};
  client->send(master, protocol::create_atom::value, protocol::make_session_config(), *def);
  sys.run_all();
  std::optional<protocol::session_created> created;
  client->receive([&](protocol::session_created& s) { created = std::move(s); },
                  caf::after(0s) >> [] {});
  REQUIRE(created.has_value());
  REQUIRE_FALSE(created->outcome.ok());
  CHECK(contains(created->outcome.message(), "no middleman"));
  protocol::send_stop(master);
  sys.run_all();
}

TEST_CASE("a target on an actor system without actorflow's message types says to add them") {
  caf::actor_system_config config;
  config.load<caf::io::middleman>(); // but no add_actorflow_message_types(config)
  caf::actor_system sys{config};
  graph g;
  auto c = ops::constant(g, 1.f, "c");
  session_options options;
  options.target = "caf://" + nobody_listening();
  session s{sys, g, options};
  auto r = s.run({c});
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.error().message(), "add_actorflow_message_types(config)"));
}

TEST_CASE("a target whose actor is not an actorflow master says so") {
  caf::actor_system_config config;
  config.load<caf::io::middleman>();
  add_actorflow_message_types(config);
  caf::actor_system sys{config};
  auto stranger = sys.spawn([]() -> caf::behavior { return {[](int x) { return x; }}; });
  auto port = sys.middleman().publish(stranger, 0, "127.0.0.1");
  REQUIRE(port);
  graph g;
  auto c = ops::constant(g, 1.f, "c");
  session_options options;
  options.target = "caf://127.0.0.1:" + std::to_string(*port);
  session s{sys, g, options};
  auto r = s.run({c});
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.error().message(), "is not an actorflow master or task"));
  static_cast<void>(sys.middleman().unpublish(stranger, *port));
  caf::anon_send_exit(stranger, caf::exit_reason::user_shutdown);
}

TEST_CASE("a blocking session notices its master going down instead of waiting for it") {
  caf::actor_system_config config;
  caf::actor_system sys{config};
  task_service_options task_options;
  task_options.threads = 1;
  auto task = spawn_task_service(sys, "localhost", 0, task_options);
  master_options master_config;
  master_config.task_services = {task};
  auto master = spawn_master(sys, master_config);
  graph g;
  auto c = ops::constant(g, 2.f, "c") * ops::constant(g, 5.f, "d");
  session_options options; // no timeout: only the monitor can end a wait
  options.master = existing_master(master);
  session s{sys, g, options};
  auto r = s.run({c});
  REQUIRE(r.ok());
  CHECK(r->at(0).scalar_value<float>() == 10.f);
  caf::anon_send_exit(master, caf::exit_reason::kill);
  auto failed = s.run({c});
  REQUIRE_FALSE(failed.ok());
  CHECK(contains(failed.error().message(), "the master went down"));
  protocol::send_stop(task);
}

namespace {

/// An allocator a host application might install as the process default.
class host_allocator final : public allocator {
public:
  void* allocate(std::size_t bytes) override { return std::aligned_alloc(tensor_alignment, bytes); }
  void deallocate(void* ptr, std::size_t) override { std::free(ptr); }
  const char* name() const override { return "host application"; }
};

} // namespace

TEST_CASE("a session with an env of its own leaves the process's BLAS threads and allocator alone") {
  auto saved_blas = blas_threads();
  auto* saved_allocator = default_host_allocator();
  // The host's own allocator, which actorflow's default env would replace by its pool. Static:
  // the session's tasks end asynchronously and may free their tensors after this test.
  static host_allocator mine;
  set_default_host_allocator(&mine);
  set_blas_threads(1);
  auto env = std::make_shared<runtime_env>(runtime_env::settings{false, false});
  graph g;
  auto c = ops::constant(g, 2.f, "c") * ops::constant(g, 3.f, "d");
  session_options options;
  options.env = env;
  options.use_per_session_threads = true;
  options.intra_op_parallelism_threads = 3;
  options.inter_op_parallelism_threads = 1;
  {
    session s{g, options};
    auto r = s.run({c});
    REQUIRE(r.ok());
    CHECK(r->at(0).scalar_value<float>() == 6.f);
  }
  CHECK(blas_threads() == 1);
  CHECK(default_host_allocator() == &mine);
  set_default_host_allocator(saved_allocator);
  set_blas_threads(saved_blas);
}

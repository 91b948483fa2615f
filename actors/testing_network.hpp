#pragma once
/// Several simulated processes ("nodes") in one test: each is an actor system on CAF's
/// deterministic test scheduler whose middleman talks through CAF's test multiplexer.
///   testing::test_network net;
///   auto& ps = net.add_node();  auto& worker = net.add_node();
///   net.prepare_connection(ps, worker, "ps", 2221);          // before publish
///   REQUIRE(net.publish(ps, service, 2221));
///   auto remote = net.remote_actor(worker, "ps", 2221);     // or let an actor connect
///   net.exec_all();                                         // runs every node until quiet
/// One thread does everything: messages, broker events and "network" reads happen in the order
/// exec_all() picks, which is the same in every run. No wall clock; request timeouts fire only
/// when a test calls trigger_timeouts().
///
/// This is our own small counterpart of CAF's caf/test/io_dsl.hpp, which depends on CAF's test
/// runner rather than on the embedder's test framework. Installed for embedders as
/// <actorflow/actors/testing_network.hpp>; tests/actors/multi_task_network.test.cpp uses it.

#include "actors/protocols/wire.hpp"

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/exit_reason.hpp>
#include <caf/expected.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/network/test_multiplexer.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/send.hpp>
#include <caf/timestamp.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace actorflow::testing {

/// One simulated process: an actor system with the middleman loaded, CAF's test scheduler and
/// CAF's test multiplexer as network backend, and every actorflow message type registered.
/// Created by test_network::add_node, which owns it; references stay valid as long as the
/// network. Only the test's thread may touch it.
class test_node {
public:
  test_node() {
    config_.set("scheduler.policy", caf::atom("testing"));
    config_.set("middleman.network-backend", caf::atom("testing"));
    // Both follow from the testing backend; set here so that nothing depends on that rule.
    config_.set("middleman.manual-multiplexing", true);
    config_.set("middleman.attach-utility-actors", true);
    // No BASP worker threads (they would deserialize messages concurrently) and no
    // heartbeats (timers would make traffic depend on the clock).
    config_.set("middleman.workers", std::size_t{0});
    config_.set("middleman.heartbeat-interval", caf::timespan{0});
    config_.load<caf::io::middleman>();
    add_actorflow_message_types(config_);
    system_ = std::make_unique<caf::actor_system>(config_);
    scheduler_ = &dynamic_cast<caf::scheduler::test_coordinator&>(system_->scheduler());
    multiplexer_ =
      &dynamic_cast<caf::io::network::test_multiplexer&>(system_->middleman().backend());
  }

  test_node(const test_node&) = delete;
  test_node& operator=(const test_node&) = delete;

  /// Kills the actors handed to `stop_at_teardown`, lets this node run until quiet, then
  /// shuts the actor system down (which waits for every actor that is not hidden).
  ~test_node() { teardown(); }

  caf::actor_system& system() { return *system_; }
  caf::scheduler::test_coordinator& scheduler() { return *scheduler_; }
  caf::io::network::test_multiplexer& multiplexer() { return *multiplexer_; }
  caf::io::middleman& middleman() { return system_->middleman(); }

  /// Exits `actor` with exit_reason::kill when the network is torn down, so that a test that
  /// stops early (a failed REQUIRE) does not leave the actor system waiting for it forever.
  template <class Handle>
  void stop_at_teardown(const Handle& actor) {
    owned_.push_back(caf::actor_cast<caf::actor>(actor));
  }

  /// Does one unit of work, if there is any: a scheduled actor's message, a broker's message,
  /// an incoming "network" read, or a pending connection. Returns whether it did something.
  bool step() {
    // Brokers before reads: test_multiplexer::read_data() first runs every pending broker job
    // and reports only the reads, so work it did that way would look like no progress (and
    // bytes a broker just wrote would sit unread when exec_all() stops).
    return scheduler_->try_run_once() || multiplexer_->try_exec_runnable() ||
           multiplexer_->read_data() || multiplexer_->try_accept_connection();
  }

  /// Sends the teardown exits (once); the caller runs the network afterwards.
  void kill_owned() {
    for (auto& actor : owned_)
      caf::anon_send_exit(actor, caf::exit_reason::kill);
    owned_.clear();
  }

private:
  void teardown() {
    kill_owned();
    while (step())
      ;
  }

  caf::actor_system_config config_;
  std::unique_ptr<caf::actor_system> system_;
  caf::scheduler::test_coordinator* scheduler_ = nullptr;
  caf::io::network::test_multiplexer* multiplexer_ = nullptr;
  std::vector<caf::actor> owned_;
};

/// The nodes of one test and the simulated connections between them. Destroyed, it stops the
/// nodes' owned actors, runs everything until quiet and then destroys the nodes, last added
/// first.
class test_network {
public:
  test_network() = default;
  test_network(const test_network&) = delete;
  test_network& operator=(const test_network&) = delete;

  ~test_network() {
    for (auto& n : nodes_)
      n->kill_owned();
    exec_all();
    while (!nodes_.empty())
      nodes_.pop_back();
  }

  /// A new node, run until its start-up jobs (the middleman's actors) are done; the
  /// reference lives as long as the network.
  test_node& add_node() {
    nodes_.push_back(std::make_unique<test_node>());
    exec_all();
    return *nodes_.back();
  }

  /// Lets `client` connect to `host`:`port` once and have `server` accept that connection
  /// (on the acceptor that `server` publishes `port` with). Call it before publishing on
  /// `server`: publishing takes the acceptor prepared here. One call per connection.
  void prepare_connection(test_node& server, test_node& client, const std::string& host,
                          std::uint16_t port) {
    auto acceptor = caf::io::accept_handle::from_int(++last_handle_);
    auto server_side = caf::io::connection_handle::from_int(++last_handle_);
    auto client_side = caf::io::connection_handle::from_int(++last_handle_);
    server.multiplexer().prepare_connection(acceptor, server_side, client.multiplexer(), host,
                                            port, client_side);
  }

  /// Publishes `whom` on `port` of `node` (prepared with prepare_connection). Runs the network
  /// until quiet first; then the middleman's blocking call is answered inside it, because the
  /// middleman actor runs as soon as the request is enqueued. (An actor already waiting in the
  /// scheduler's queue is not enqueued again, hence the quiet network first.)
  template <class Handle>
  caf::expected<std::uint16_t> publish(test_node& node, const Handle& whom,
                                       std::uint16_t port) {
    exec_all();
    node.scheduler().inline_next_enqueue();
    return node.middleman().publish(whom, port);
  }

  /// The actor published at `host`:`port`, as seen from `node` (a connection prepared with
  /// prepare_connection). The middleman's blocking call returns once the whole network ran
  /// until quiet: right after the connect request is enqueued, exec_all() runs (the network
  /// is run until quiet before, too; see publish).
  template <class Handle = caf::actor>
  caf::expected<Handle> remote_actor(test_node& node, const std::string& host,
                                         std::uint16_t port) {
    exec_all();
    node.scheduler().after_next_enqueue([this] { exec_all(); });
    return node.middleman().remote_actor<Handle>(host, port);
  }

  /// Runs every node until none has anything left to do: scheduled actors, broker messages,
  /// reads of "network" data and pending connections. Always gives the first node with work
  /// the next step, so the interleaving is a function of the messages alone. Returns the
  /// number of steps taken. Timeouts are not triggered (see trigger_timeouts()).
  std::size_t exec_all() {
    std::size_t steps = 0;
    while (std::any_of(nodes_.begin(), nodes_.end(), [](auto& n) { return n->step(); }))
      ++steps;
    return steps;
  }

  /// Fires every pending timeout (request timeouts, delayed sends) on every node and runs the
  /// network until quiet again; returns how many timeouts fired.
  std::size_t trigger_timeouts() {
    std::size_t fired = 0;
    for (auto& n : nodes_)
      fired += n->scheduler().trigger_timeouts();
    exec_all();
    return fired;
  }

private:
  std::vector<std::unique_ptr<test_node>> nodes_;
  /// Accept and connection handles must be unique per multiplexer; one counter for all keeps
  /// them unique across the network too.
  std::int64_t last_handle_ = 0;
};

} // namespace actorflow::testing

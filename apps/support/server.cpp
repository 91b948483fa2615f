#include "support/server.hpp"

#include "actors/protocols/task.hpp"
#include "actors/protocols/wire.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>
#include <iostream>
#include <pthread.h>

namespace actorflow::apps {

namespace {

/// Stops the served actor and waits (bounded) until it has gone.
void stop_served(const std::string& app, caf::actor_system& sys, const caf::actor& served) {
  caf::scoped_actor self{sys};
  self->monitor(served);
  self->send(served, protocol::stop_atom::value);
  self->receive([](const caf::down_msg&) {},
                caf::after(std::chrono::seconds(10)) >> [&] {
                  std::cerr << app << ": did not stop within 10 s; killing it" << std::endl;
                });
  self->send_exit(served, caf::exit_reason::kill);
}

} // namespace

std::optional<sigset_t> block_stop_signals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  if (pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr) != 0)
    return std::nullopt;
  std::signal(SIGPIPE, SIG_IGN);
  return stop_signals;
}

int serve_until_signal(const std::string& app, const std::string& what, const std::string& host,
                       std::uint16_t port, const sigset_t& stop_signals,
                       const std::function<caf::actor(caf::actor_system&)>& spawn) {
  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  add_actorflow_message_types(cfg);
  // A shared queue: idle scheduler threads sleep instead of polling (see actors/session.cpp).
  cfg.set("scheduler.policy", caf::atom("sharing"));
  // Actors here only dispatch (kernels run on the task's own pools), so one scheduler thread
  // is enough and keeps message hops from contending for the cores the kernels use: the
  // classic example's step rate on 4 processes rose from 899-936 to 1058-1064 steps/s.
  cfg.set("scheduler.max-threads", std::size_t{1});
  // Messages are deserialized on the I/O thread instead of being handed to BASP's worker
  // threads: one thread handoff less per hop (5-10% more steps/s on the classic example), and
  // large tensors bypass BASP anyway (actors/bulk_channel.hpp).
  cfg.set("middleman.workers", std::size_t{0});
  caf::actor_system sys{cfg};

  auto served = spawn(sys);
  auto published = sys.middleman().publish(served, port, host.empty() ? nullptr : host.c_str(), true);
  auto shown_host = host.empty() ? std::string{"0.0.0.0"} : host;
  if (!published) {
    stop_served(app, sys, served);
    std::cerr << app << ": cannot listen on " << shown_host << ':' << port << " for " << what
              << ": " << sys.render(published.error()) << std::endl;
    return 1;
  }
  std::cout << app << ": " << what << " serving on " << shown_host << ':' << *published
            << std::endl;

  int received = 0;
  while (sigwait(&stop_signals, &received) != 0) {
  }
  std::cerr << app << ": " << what << " stopping on signal " << received << std::endl;
  sys.middleman().unpublish(served, *published);
  stop_served(app, sys, served);
  return 0;
}

} // namespace actorflow::apps

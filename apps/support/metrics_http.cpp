#include "support/metrics_http.hpp"

#include "graph/metrics.hpp"

#include <httplib.h>

#include <iostream>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace actorflow::apps {

struct metrics_endpoint::impl {
  httplib::Server server;
  std::thread thread;
};

result<std::unique_ptr<metrics_endpoint>>
metrics_endpoint::start(const std::string& host, std::uint16_t port, metrics_registry& registry) {
  auto state = std::make_unique<impl>();
  state->server.Get("/metrics", [&registry](const httplib::Request&, httplib::Response& response) {
    response.set_content(registry.render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  int bound = port;
  if (port == 0)
    bound = state->server.bind_to_any_port(host);
  else if (!state->server.bind_to_port(host, port))
    bound = -1;
  if (bound <= 0)
    return make_error(errc::unavailable, "--metrics-port: cannot listen on " + host + ":" +
                                           std::to_string(port) + " (" + std::strerror(errno) + ")");
  registry.set_enabled(true);
  auto* server = &state->server;
  state->thread = std::thread{[server] { server->listen_after_bind(); }};
  // stop() is a no-op before the loop runs: a quick destruction would leave it listening.
  for (int i = 0; i < 5000 && !server->is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return std::unique_ptr<metrics_endpoint>{
    new metrics_endpoint{std::move(state), host, static_cast<std::uint16_t>(bound)}};
}

result<std::unique_ptr<metrics_endpoint>> metrics_endpoint::start(const std::string& host,
                                                                  std::uint16_t port) {
  return start(host, port, default_metrics());
}

metrics_endpoint::metrics_endpoint(std::unique_ptr<impl> state, std::string host, std::uint16_t port)
  : impl_(std::move(state)), host_(std::move(host)), port_(port) {}

metrics_endpoint::~metrics_endpoint() {
  impl_->server.stop();
  if (impl_->thread.joinable())
    impl_->thread.join();
}

std::string metrics_endpoint::url() const {
  return "http://" + host_ + ":" + std::to_string(port_) + "/metrics";
}

result<std::unique_ptr<metrics_endpoint>> serve_metrics(const std::string& app, const std::string& bind,
                                                        int port) {
  if (port == 0)
    return std::unique_ptr<metrics_endpoint>{};
  auto served = metrics_endpoint::start(bind.empty() ? "0.0.0.0" : bind, static_cast<std::uint16_t>(port));
  if (served)
    std::cout << app << ": metrics on " << (*served)->url() << std::endl;
  return served;
}

} // namespace actorflow::apps

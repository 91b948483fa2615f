#pragma once
/// Serves the process's metrics (graph/metrics.hpp) over HTTP for Prometheus: GET /metrics
/// answers the text exposition format; anything else is 404. What --metrics-port starts in
/// every app. Starting it turns counting on (metrics_registry::set_enabled).
///   auto served = metrics_endpoint::start("0.0.0.0", 9100);   // error names the address
///   std::cout << (*served)->port();

#include "graph/status.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace actorflow {
class metrics_registry;
}

namespace actorflow::apps {

class metrics_endpoint {
public:
  /// Listens on `host`:`port` (0: a port the kernel picks) and serves from a thread of its own
  /// until destroyed. An address that cannot be bound is an error naming it.
  static result<std::unique_ptr<metrics_endpoint>> start(const std::string& host, std::uint16_t port,
                                                         metrics_registry& registry);
  static result<std::unique_ptr<metrics_endpoint>> start(const std::string& host, std::uint16_t port);
  ~metrics_endpoint();

  std::uint16_t port() const { return port_; }
  /// "http://HOST:PORT/metrics".
  std::string url() const;

private:
  struct impl;
  explicit metrics_endpoint(std::unique_ptr<impl> state, std::string host, std::uint16_t port);
  std::unique_ptr<impl> impl_;
  std::string host_;
  std::uint16_t port_ = 0;
};

/// What --metrics-port starts: nothing for port 0; otherwise the endpoint on `bind` (an app's
/// --bind host, or every interface when empty: a scraper runs elsewhere), after printing
/// "<app>: metrics on http://HOST:PORT/metrics". An error names the flag and the address.
result<std::unique_ptr<metrics_endpoint>> serve_metrics(const std::string& app, const std::string& bind,
                                                        int port);

} // namespace actorflow::apps

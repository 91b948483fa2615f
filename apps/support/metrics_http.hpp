#pragma once
/// Serves the process's metrics (graph/metrics.hpp) for Prometheus: GET /metrics answers the
/// text exposition format; anything else is 404. What --metrics-port starts in every app.
/// Starting it turns counting on (metrics_registry::set_enabled).
///   auto served = serve_metrics("actorflow-worker", metrics_host(bind, task_host), 9100,
///                               process_transport_security());   // errors name address or file
///   std::cout << (*served)->url();   // https://10.0.0.5:9100/metrics with TLS
/// Who may read it follows the cluster's own settings (docs/security.md): with a cluster token a
/// scrape presents "Authorization: Bearer TOKEN"; with TLS it speaks HTTPS only, and the scraper
/// presents a certificate of the cluster CA.

#include "graph/status.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace actorflow {
class metrics_registry;
struct transport_security;
} // namespace actorflow

namespace actorflow::apps {

class metrics_endpoint {
public:
  struct options {
    /// The address to listen on: a name or an address of one interface, or 0.0.0.0 for every
    /// interface (only when a user asked for it; metrics_host() gives the default).
    std::string host;
    /// 0: a port the kernel picks.
    std::uint16_t port = 0;
    /// Not empty: every request must carry "Authorization: Bearer <bearer_token>" (compared in
    /// constant time) or is answered 401.
    std::string bearer_token;
    /// All three or none (PEM files): HTTPS with this certificate and key, and a client must
    /// present a certificate that chains to `tls_ca`. Plain HTTP is then not served at all.
    std::string tls_certificate;
    std::string tls_key;
    std::string tls_ca;
  };

  /// Listens as `given` says and serves `registry` from threads of its own until destroyed;
  /// `registry` must outlive the endpoint. Its threads keep SIGPIPE blocked (cpp-httplib's and
  /// OpenSSL's writes raise it when a client hangs up). Errors: invalid_argument naming the
  /// TLS file that cannot be used (no silent fallback to HTTP), unavailable naming the address
  /// that cannot be bound.
  static result<std::unique_ptr<metrics_endpoint>> start(const options& given,
                                                         metrics_registry& registry);
  /// The same on the process's registry (default_metrics()).
  static result<std::unique_ptr<metrics_endpoint>> start(const options& given);
  ~metrics_endpoint();

  std::uint16_t port() const { return port_; }
  /// "http://HOST:PORT/metrics", or https:// with TLS.
  std::string url() const;

private:
  struct impl;
  explicit metrics_endpoint(std::unique_ptr<impl> state, std::string url_base, std::uint16_t port);
  std::unique_ptr<impl> impl_;
  std::string url_base_;
  std::uint16_t port_ = 0;
};

/// Where --metrics-port listens by default: `bind` (an app's --bind or --host) when given, else
/// the host of this process's task address in its cluster spec (`task_host`, empty for a
/// process that is no task), else 127.0.0.1. Every interface only when `bind` says 0.0.0.0.
std::string metrics_host(const std::string& bind, const std::string& task_host);

/// What --metrics-port starts: nothing for port 0; otherwise the endpoint on `host`, guarded by
/// `security`'s cluster token (bearer) and TLS files (HTTPS), after printing
/// "<app>: metrics on http(s)://HOST:PORT/metrics". Errors name the flag and the address or
/// the file; metrics_exit_code() says which exit code they lead to.
result<std::unique_ptr<metrics_endpoint>> serve_metrics(const std::string& app, const std::string& host,
                                                        int port, const transport_security& security);

/// An app's exit code for a serve_metrics() error: 2 for a TLS file that cannot be used (a
/// startup error, as for bad flags), 1 for an address that cannot be bound.
int metrics_exit_code(const status& failure);

} // namespace actorflow::apps

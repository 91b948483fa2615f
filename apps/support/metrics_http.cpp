#include "support/metrics_http.hpp"

#include "actors/sigpipe.hpp"
#include "actors/transport_security.hpp"
#include "graph/metrics.hpp"

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <iostream>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <strings.h>
#include <thread>

namespace actorflow::apps {

namespace {

/// HTTPS as every other port of the task speaks TLS (docs/security.md): TLS 1.2 or later, this
/// process's certificate, and a client certificate that chains to the cluster CA (no host-name
/// check: the CA is the cluster's own).
status configure_tls(SSL_CTX& context, const metrics_endpoint::options& o) {
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(&context, TLS1_2_VERSION);
  SSL_CTX_set_options(&context, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  transport_security files;
  files.tls_certificate = o.tls_certificate;
  files.tls_key = o.tls_key;
  files.tls_ca = o.tls_ca;
  AF_RETURN_IF_ERROR(load_tls_files(context, files).with_context("--metrics-port"));
  // The CA's name in the server's certificate request: clients with several certificates pick
  // the cluster's.
  if (auto* names = SSL_load_client_CA_file(o.tls_ca.c_str()))
    SSL_CTX_set_client_CA_list(&context, names);
  ERR_clear_error();
  SSL_CTX_set_verify(&context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return {};
}

/// Whether an Authorization header carries the bearer token whose digest is `expected`. The
/// digests are compared, in constant time: how long a refusal takes says nothing about how
/// much of the token was right, nor how long it is.
bool bearer_matches(const std::string& header, const token_preamble& expected) {
  // The scheme's name is case-insensitive (RFC 7235 section 2.1); then one or more spaces.
  if (header.size() < 7 || ::strncasecmp(header.c_str(), "Bearer", 6) != 0 || header[6] != ' ')
    return false;
  auto token = header.find_first_not_of(' ', 6);
  if (token == std::string::npos)
    return false;
  auto presented = make_token_preamble(header.substr(token));
  return preamble_matches(presented.data(), expected);
}

} // namespace

struct metrics_endpoint::impl {
  std::unique_ptr<httplib::Server> server;
  std::thread thread;
};

result<std::unique_ptr<metrics_endpoint>> metrics_endpoint::start(const options& given,
                                                                  metrics_registry& registry) {
  auto state = std::make_unique<impl>();
  bool tls = !given.tls_certificate.empty() || !given.tls_key.empty() || !given.tls_ca.empty();
  if (tls) {
    if (given.tls_certificate.empty() || given.tls_key.empty() || given.tls_ca.empty())
      return make_error(errc::invalid_argument,
                        "--metrics-port: TLS needs a certificate, its key and the cluster CA together");
    status configured;
    state->server = std::make_unique<httplib::SSLServer>([&](SSL_CTX& context) {
      configured = configure_tls(context, given);
      return configured.ok();
    });
    if (!configured.ok())
      return configured;
    if (!state->server->is_valid())
      return make_error(errc::invalid_argument, "--metrics-port: no TLS context");
  } else {
    state->server = std::make_unique<httplib::Server>();
  }
  auto& server = *state->server;
  if (!given.bearer_token.empty()) {
    server.set_pre_routing_handler(
      [expected = make_token_preamble(given.bearer_token)](const httplib::Request& request,
                                                           httplib::Response& response) {
        if (bearer_matches(request.get_header_value("Authorization"), expected))
          return httplib::Server::HandlerResponse::Unhandled;
        response.status = 401;
        response.set_header("WWW-Authenticate", "Bearer realm=\"actorflow metrics\"");
        response.set_content("a bearer token is required\n", "text/plain");
        return httplib::Server::HandlerResponse::Handled;
      });
  }
  server.Get("/metrics", [&registry](const httplib::Request&, httplib::Response& response) {
    response.set_content(registry.render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  int bound = given.port;
  if (given.port == 0)
    bound = server.bind_to_any_port(given.host);
  else if (!server.bind_to_port(given.host, given.port))
    bound = -1;
  if (bound <= 0)
    return make_error(errc::unavailable, "--metrics-port: cannot listen on " + given.host + ":" +
                                           std::to_string(given.port) + " (" + std::strerror(errno) + ")");
  registry.set_enabled(true);
  auto* serving = &server;
  state->thread = std::thread{[serving] {
    // Debian's cpp-httplib sends without MSG_NOSIGNAL and OpenSSL writes with write(2): a
    // scraper that hangs up in the middle of an answer must cost that answer (EPIPE), not the
    // process. Its worker threads start from this one and inherit the block.
    block_sigpipe_in_this_thread();
    serving->listen_after_bind();
  }};
  // stop() is a no-op before the loop runs: a quick destruction would leave it listening.
  for (int i = 0; i < 5000 && !serving->is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto url_base = std::string{tls ? "https://" : "http://"} + given.host;
  return std::unique_ptr<metrics_endpoint>{
    new metrics_endpoint{std::move(state), std::move(url_base), static_cast<std::uint16_t>(bound)}};
}

result<std::unique_ptr<metrics_endpoint>> metrics_endpoint::start(const options& given) {
  return start(given, default_metrics());
}

metrics_endpoint::metrics_endpoint(std::unique_ptr<impl> state, std::string url_base, std::uint16_t port)
  : impl_(std::move(state)), url_base_(std::move(url_base)), port_(port) {}

metrics_endpoint::~metrics_endpoint() {
  impl_->server->stop();
  if (impl_->thread.joinable())
    impl_->thread.join();
}

std::string metrics_endpoint::url() const {
  return url_base_ + ":" + std::to_string(port_) + "/metrics";
}

std::string metrics_host(const std::string& bind, const std::string& task_host) {
  if (!bind.empty())
    return bind;
  return task_host.empty() ? std::string{"127.0.0.1"} : task_host;
}

result<std::unique_ptr<metrics_endpoint>> serve_metrics(const std::string& app, const std::string& host,
                                                        int port, const transport_security& security) {
  if (port == 0)
    return std::unique_ptr<metrics_endpoint>{};
  metrics_endpoint::options o;
  o.host = host;
  o.port = static_cast<std::uint16_t>(port);
  o.bearer_token = security.cluster_token;
  if (security.tls()) {
    o.tls_certificate = security.tls_certificate;
    o.tls_key = security.tls_key;
    o.tls_ca = security.tls_ca;
  }
  auto served = metrics_endpoint::start(o);
  if (served)
    std::cout << app << ": metrics on " << (*served)->url() << std::endl;
  return served;
}

int metrics_exit_code(const status& failure) {
  return failure.code() == errc::invalid_argument ? 2 : 1;
}

} // namespace actorflow::apps

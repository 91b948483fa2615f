#pragma once
/// The transport security flags every actorflow program takes (actors/transport_security.hpp):
///   apps::security_flags security;
///   apps::add_security_flags(flags, security);     // --token-file, --tls-cert/-key/-ca
///   ... parse ...
///   if (auto s = apps::apply_security_flags(security); !s.ok()) ...   // before any actor system
/// Flags override the environment (ACTORFLOW_CLUSTER_TOKEN(_FILE), ACTORFLOW_TLS_*).

#include "actors/transport_security.hpp"
#include "support/flags.hpp"

#include <string>

namespace actorflow::apps {

struct security_flags {
  std::string token_file;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
};

inline constexpr const char* security_flags_help =
  R"(  --token-file F     the cluster token (first line of F): every connection presents it
                     before anything else is read (or ACTORFLOW_CLUSTER_TOKEN[_FILE])
  --tls-cert F       mutual TLS: this process's certificate (PEM), with --tls-key and --tls-ca
  --tls-key F        its private key (PEM)
  --tls-ca F         the cluster CA that signed every task's certificate (PEM); make one with
                     deploy/tls/make-cluster-certs.sh
)";

inline void add_security_flags(flag_set& flags, security_flags& out) {
  flags.values["--token-file"] = [&out](const std::string& v) { out.token_file = v; return status{}; };
  flags.values["--tls-cert"] = [&out](const std::string& v) { out.tls_cert = v; return status{}; };
  flags.values["--tls-key"] = [&out](const std::string& v) { out.tls_key = v; return status{}; };
  flags.values["--tls-ca"] = [&out](const std::string& v) { out.tls_ca = v; return status{}; };
}

/// The environment's settings with the flags on top, made the process's; errors name the flag
/// or variable at fault. Call before the first actor system.
inline status apply_security_flags(const security_flags& given) {
  auto settings = transport_security_from_environment();
  if (!settings)
    return settings.error();
  if (!given.token_file.empty()) {
    auto token = read_token_file(given.token_file, "--token-file");
    if (!token)
      return token.error();
    settings->cluster_token = std::move(*token);
  }
  if (!given.tls_cert.empty() || !given.tls_key.empty() || !given.tls_ca.empty()) {
    settings->tls_certificate = given.tls_cert;
    settings->tls_key = given.tls_key;
    settings->tls_ca = given.tls_ca;
  }
  if (auto s = settings->check(); !s.ok())
    return s.with_context("--tls-cert/--tls-key/--tls-ca");
  return set_process_transport_security(std::move(*settings));
}

} // namespace actorflow::apps

#include "actors/transport_security.hpp"

#include "actors/protocols/wire.hpp"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>

namespace actorflow {

namespace {

/// Why `path` cannot be read as a file ("does not exist", "is a directory", "cannot be
/// read"), or nothing when it can.
std::optional<std::string> unreadable(const std::string& path) {
  std::error_code ignored;
  auto kind = std::filesystem::status(path, ignored).type();
  if (kind == std::filesystem::file_type::not_found)
    return "does not exist";
  if (kind == std::filesystem::file_type::directory)
    return "is a directory";
  std::ifstream in{path};
  if (!in)
    return "cannot be read";
  return std::nullopt;
}

status check_readable(const std::string& path, const std::string& what) {
  if (auto why = unreadable(path))
    return make_error(errc::invalid_argument, what + " '" + path + "' " + *why);
  return {};
}

/// What OpenSSL said first on this thread (the cause, e.g. "PEM routines::no start line"),
/// its queue emptied.
std::string openssl_error() {
  auto code = ERR_peek_error();
  char text[256] = "no reason given";
  if (code != 0)
    ERR_error_string_n(code, text, sizeof text);
  ERR_clear_error();
  return text;
}

status unusable(const std::string& what, const std::string& path) {
  return make_error(errc::invalid_argument,
                    what + " '" + path + "' cannot be used (" + openssl_error() + ")");
}

std::string environment(const char* name) {
  const char* text = std::getenv(name);
  return text == nullptr ? std::string{} : std::string{text};
}

std::mutex settings_mutex;
std::optional<transport_security> settings;
/// Why the environment's settings were refused, until set_process_transport_security replaces them.
std::optional<status> environment_error;
std::atomic<bool> frozen{false};

} // namespace

result<std::string> read_token_file(const std::string& path, const std::string& what) {
  if (auto why = unreadable(path))
    return make_error(errc::invalid_argument, what + ": '" + path + "' " + *why);
  std::ifstream in{path};
  std::string line;
  std::getline(in, line);
  if (in.bad())
    return make_error(errc::invalid_argument, what + ": '" + path + "' cannot be read");
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
    line.pop_back();
  if (line.empty())
    return make_error(errc::invalid_argument, what + ": '" + path + "' holds no token");
  return line;
}

status transport_security::check() const {
  int given = !tls_certificate.empty() + !tls_key.empty() + !tls_ca.empty();
  if (given != 0 && given != 3)
    return make_error(errc::invalid_argument,
                      "TLS needs a certificate, its key and the cluster CA together; got only " +
                        std::string{tls_certificate.empty() ? "" : "the certificate "} +
                        (tls_key.empty() ? "" : "the key ") + (tls_ca.empty() ? "" : "the CA"));
  if (given == 3) {
    AF_RETURN_IF_ERROR(check_readable(tls_certificate, "TLS certificate"));
    AF_RETURN_IF_ERROR(check_readable(tls_key, "TLS key"));
    AF_RETURN_IF_ERROR(check_readable(tls_ca, "TLS CA"));
    AF_RETURN_IF_ERROR(validate_tls_files(*this));
  }
  return {};
}

status validate_tls_files(const transport_security& security) {
  if (!security.tls())
    return {};
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> made{SSL_CTX_new(TLS_method()), SSL_CTX_free};
  if (!made)
    return make_error(errc::internal, "cannot make a TLS context (" + openssl_error() + ")");
  return load_tls_files(*made, security);
}

status load_tls_files(ssl_ctx_st& loaded_into, const transport_security& security) {
  auto* context = &loaded_into;
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(context, security.tls_certificate.c_str()) != 1)
    return unusable("TLS certificate", security.tls_certificate);
  if (SSL_CTX_use_PrivateKey_file(context, security.tls_key.c_str(), SSL_FILETYPE_PEM) != 1) {
    // OpenSSL loads the key, then compares it with the certificate: tell the two apart.
    auto code = ERR_peek_last_error();
    if (ERR_GET_LIB(code) == ERR_LIB_X509 && (ERR_GET_REASON(code) == X509_R_KEY_VALUES_MISMATCH ||
                                              ERR_GET_REASON(code) == X509_R_KEY_TYPE_MISMATCH)) {
      ERR_clear_error();
      return make_error(errc::invalid_argument, "TLS key '" + security.tls_key +
                                                  "' is not the key of certificate '" +
                                                  security.tls_certificate + "'");
    }
    return unusable("TLS key", security.tls_key);
  }
  if (SSL_CTX_check_private_key(context) != 1) {
    ERR_clear_error();
    return make_error(errc::invalid_argument, "TLS key '" + security.tls_key +
                                                "' is not the key of certificate '" +
                                                security.tls_certificate + "'");
  }
  if (SSL_CTX_load_verify_locations(context, security.tls_ca.c_str(), nullptr) != 1)
    return unusable("TLS CA", security.tls_ca);
  ERR_clear_error();
  return {};
}

result<transport_security> transport_security_from_environment() {
  transport_security out;
  out.cluster_token = environment("ACTORFLOW_CLUSTER_TOKEN");
  auto token_file = environment("ACTORFLOW_CLUSTER_TOKEN_FILE");
  if (!token_file.empty()) {
    if (!out.cluster_token.empty())
      return make_error(errc::invalid_argument,
                        "both ACTORFLOW_CLUSTER_TOKEN and ACTORFLOW_CLUSTER_TOKEN_FILE are set");
    auto token = read_token_file(token_file, "ACTORFLOW_CLUSTER_TOKEN_FILE");
    if (!token)
      return token.error();
    out.cluster_token = std::move(*token);
  }
  out.tls_certificate = environment("ACTORFLOW_TLS_CERT");
  out.tls_key = environment("ACTORFLOW_TLS_KEY");
  out.tls_ca = environment("ACTORFLOW_TLS_CA");
  if (auto s = out.check(); !s.ok())
    return s.with_context("ACTORFLOW_TLS_CERT/KEY/CA");
  return out;
}

const transport_security& process_transport_security() {
  std::lock_guard<std::mutex> lock{settings_mutex};
  if (!settings) {
    auto from_environment = transport_security_from_environment();
    if (from_environment) {
      settings = std::move(*from_environment);
    } else {
      std::cerr << "actorflow: the transport security environment is unusable: "
                << from_environment.error().message() << std::endl;
      environment_error = from_environment.error();
      settings = transport_security{};
    }
  }
  return *settings;
}

status process_transport_security_usable() {
  (void)process_transport_security();
  std::lock_guard<std::mutex> lock{settings_mutex};
  if (environment_error)
    return *environment_error;
  return {};
}

status set_process_transport_security(transport_security next) {
  AF_RETURN_IF_ERROR(next.check());
  std::lock_guard<std::mutex> lock{settings_mutex};
  if (frozen.load())
    return make_error(errc::failed_precondition,
                      "transport security is set before the first actor system is made; this "
                      "process already has one");
  settings = std::move(next);
  environment_error.reset();
  return {};
}

void freeze_process_transport_security() { frozen = true; }

token_preamble make_token_preamble(const std::string& token) {
  static constexpr char label[] = "actorflow cluster token v1";
  token_preamble out{};
  unsigned int length = 0;
  auto* context = EVP_MD_CTX_new();
  EVP_DigestInit_ex(context, EVP_sha256(), nullptr);
  EVP_DigestUpdate(context, label, sizeof label);
  EVP_DigestUpdate(context, token.data(), token.size());
  EVP_DigestFinal_ex(context, out.data(), &length);
  EVP_MD_CTX_free(context);
  return out;
}

bool preamble_matches(const std::uint8_t* data, const token_preamble& expected) {
  return CRYPTO_memcmp(data, expected.data(), expected.size()) == 0;
}

std::size_t max_network_message_bytes() {
  static const std::size_t bytes = size_from_environment(
    "ACTORFLOW_WIRE_MAX_MESSAGE_BYTES", max_tensor_message_bytes + (std::size_t{1} << 20));
  return bytes;
}

} // namespace actorflow

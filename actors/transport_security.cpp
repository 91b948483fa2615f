#include "actors/transport_security.hpp"

#include "actors/protocols/wire.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>

namespace actorflow {

namespace {

status check_readable(const std::string& path, const std::string& what) {
  std::ifstream in{path};
  if (!in)
    return make_error(errc::invalid_argument, what + " '" + path + "' cannot be read");
  return {};
}

std::string environment(const char* name) {
  const char* text = std::getenv(name);
  return text == nullptr ? std::string{} : std::string{text};
}

std::mutex settings_mutex;
std::optional<transport_security> settings;
std::atomic<bool> frozen{false};

} // namespace

result<std::string> read_token_file(const std::string& path, const std::string& what) {
  std::ifstream in{path};
  if (!in)
    return make_error(errc::invalid_argument, what + ": '" + path + "' cannot be read");
  std::string line;
  std::getline(in, line);
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
  }
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
      std::cerr << "actorflow: ignoring the transport security environment: "
                << from_environment.error().message() << std::endl;
      settings = transport_security{};
    }
  }
  return *settings;
}

status set_process_transport_security(transport_security next) {
  AF_RETURN_IF_ERROR(next.check());
  std::lock_guard<std::mutex> lock{settings_mutex};
  if (frozen.load())
    return make_error(errc::failed_precondition,
                      "transport security is set before the first actor system is made; this "
                      "process already has one");
  settings = std::move(next);
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

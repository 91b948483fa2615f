#pragma once
/// Who may talk to a process's actorflow ports, and how much one peer may make it allocate:
/// the settings every connection of the process (CAF's and the bulk channel's) obeys.
///   transport_security s;
///   s.cluster_token = "…";                 // or tls_certificate / tls_key / tls_ca
///   set_process_transport_security(s);     // before the first actor system is made
///
/// A process takes them from the environment unless a program sets them first:
/// ACTORFLOW_CLUSTER_TOKEN or ACTORFLOW_CLUSTER_TOKEN_FILE, and ACTORFLOW_TLS_CERT,
/// ACTORFLOW_TLS_KEY, ACTORFLOW_TLS_CA. docs/security.md says what each defends against.
/// No CAF here: the CAF side is actors/transport_guard.cpp.

#include "graph/status.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

/// OpenSSL's SSL_CTX, named without its headers.
struct ssl_ctx_st;

namespace actorflow {

struct transport_security {
  /// A secret shared by the cluster's processes: every connection presents a digest of it
  /// before anything else is read from it, and a peer without it is cut off. Empty: none.
  std::string cluster_token;
  /// Mutual TLS for CAF's connections (PEM files): this process's certificate and key, and the
  /// cluster CA that signs every peer's certificate. All three or none.
  std::string tls_certificate;
  std::string tls_key;
  std::string tls_ca;
  /// A new connection has this long to present its token (and, on CAF's connections, its first
  /// message) before it is closed: a peer that connects and says nothing holds nothing for long.
  int handshake_timeout_ms = 10000;
  /// A message begun on a CAF connection (or announced by its header) must arrive whole within
  /// this long, and a message over 1 MiB must make 1 MiB of progress within it: a peer that
  /// trickles bytes holds a connection for no longer. Idle connections are left alone.
  int message_timeout_ms = 30000;

  bool tls() const { return !tls_certificate.empty(); }
  bool token() const { return !cluster_token.empty(); }

  /// Ok, or an error naming the setting at fault: TLS files given in part, a file that cannot
  /// be read, a certificate, key or CA that OpenSSL cannot load, a key of another certificate
  /// (validate_tls_files).
  status check() const;
};

/// Whether OpenSSL can load `security`'s TLS files as every TLS channel of the process (CAF's,
/// the bulk channel's, the metrics endpoint's) will: the certificate chain, the key, that the
/// key is the certificate's, and the CA. Ok when TLS is not configured; else an error naming
/// the file and what is wrong with it. Programs call it (through check()) before they serve,
/// so that no channel finds out later and none goes on without TLS.
status validate_tls_files(const transport_security& security);

/// What validate_tls_files checks, into `context` (OpenSSL's SSL_CTX, for a server of its own
/// that speaks the cluster's TLS, e.g. the metrics endpoint): `security`'s certificate chain,
/// its key (which must be the certificate's) and the CA to verify peers with. Errors as
/// validate_tls_files's; OpenSSL's error queue is left empty.
status load_tls_files(ssl_ctx_st& context, const transport_security& security);

/// The settings of ACTORFLOW_CLUSTER_TOKEN(_FILE) and ACTORFLOW_TLS_*; errors name the variable
/// (a token file that cannot be read, TLS files given in part).
result<transport_security> transport_security_from_environment();

/// The token in file `path`: its first line without trailing white space; errors start with
/// `what` (the flag or variable that named the file).
result<std::string> read_token_file(const std::string& path, const std::string& what);

/// The process's settings: those set_process_transport_security() set, else the environment's
/// (read once; a bad environment is reported on stderr once and leaves no token and no TLS
/// here, and process_transport_security_usable() says why).
const transport_security& process_transport_security();

/// Whether the process's settings are the ones asked for: the environment's error (a token
/// file that cannot be read, TLS files given in part, a certificate that does not load) until
/// set_process_transport_security() replaces them. Servers and sessions across processes fail
/// with it instead of serving or connecting without the security the environment asked for.
status process_transport_security_usable();

/// Sets the process's settings after check(); fails (failed_precondition) once an actor system
/// has read them, since its connections are already made under the old ones.
status set_process_transport_security(transport_security settings);

/// Marks the settings as in use (network_config calls it).
void freeze_process_transport_security();

/// The bytes a connection presents first when a token is set: SHA-256 over a fixed label and
/// the token, so the token itself never crosses the network.
inline constexpr std::size_t token_preamble_bytes = 32;
using token_preamble = std::array<std::uint8_t, token_preamble_bytes>;
token_preamble make_token_preamble(const std::string& token);

/// Whether `data` (token_preamble_bytes long) equals `expected`, in constant time.
bool preamble_matches(const std::uint8_t* data, const token_preamble& expected);

/// The largest message (in bytes) a peer may announce on a CAF connection: larger is refused
/// before anything is allocated, and messages above 1 MiB are read in pieces, so a header
/// alone makes the process allocate at most 1 MiB. 257 MiB (the largest tensor or graph one
/// message carries, and room for the rest of the message) unless ACTORFLOW_WIRE_MAX_MESSAGE_BYTES
/// says otherwise.
std::size_t max_network_message_bytes();

} // namespace actorflow

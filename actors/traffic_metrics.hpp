#pragma once
/// Bytes sent to and received from each peer, per channel, for the process's metrics
/// (actorflow_sent_bytes_total / actorflow_received_bytes_total): what every connection counts.
///   auto traffic = traffic_with("10.0.0.2:2222", "caf");   // once per connection
///   traffic.sent.add(n);
///   auto& bulk_out = sent_to("10.0.0.2:2223", "bulk");      // a one-way channel

#include "graph/metrics.hpp"

#include <string>

namespace actorflow {

struct peer_traffic {
  metric_counter& sent;
  metric_counter& received;
};

/// `peer` is the address the connection goes to: "host:port" for one this process dialled (the
/// peer's listening address), "host" for one it accepted (the peer's port is an ephemeral one).
/// `channel` is "caf" (actor messages) or "bulk" (large tensors). A one-way channel (the bulk
/// channel's sender or receiver) takes only the series it counts, so no series stays at 0.
inline metric_counter& sent_to(const std::string& peer, const std::string& channel) {
  return default_metrics().counter("actorflow_sent_bytes_total", "Bytes sent, by peer and channel.",
                                   {{"peer", peer}, {"channel", channel}});
}
inline metric_counter& received_from(const std::string& peer, const std::string& channel) {
  return default_metrics().counter("actorflow_received_bytes_total",
                                   "Bytes received, by peer and channel.",
                                   {{"peer", peer}, {"channel", channel}});
}
/// Both ways, for a connection that carries both (CAF's).
inline peer_traffic traffic_with(const std::string& peer, const std::string& channel) {
  return {sent_to(peer, channel), received_from(peer, channel)};
}

} // namespace actorflow

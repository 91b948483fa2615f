#pragma once
/// Bytes sent to and received from each peer, per channel, for the process's metrics
/// (actorflow_sent_bytes_total / actorflow_received_bytes_total): what every connection counts.
///   auto traffic = traffic_with("10.0.0.2:2222", "caf");   // once per connection
///   traffic.sent.add(n);

#include "graph/metrics.hpp"

#include <string>

namespace actorflow {

struct peer_traffic {
  metric_counter& sent;
  metric_counter& received;
};

/// `peer` is the address the connection goes to: "host:port" for one this process dialled (the
/// peer's listening address), "host" for one it accepted (the peer's port is an ephemeral one).
/// `channel` is "caf" (actor messages) or "bulk" (large tensors).
inline peer_traffic traffic_with(const std::string& peer, const std::string& channel) {
  metric_labels labels{{"peer", peer}, {"channel", channel}};
  auto& registry = default_metrics();
  return {registry.counter("actorflow_sent_bytes_total", "Bytes sent, by peer and channel.", labels),
          registry.counter("actorflow_received_bytes_total", "Bytes received, by peer and channel.",
                           labels)};
}

} // namespace actorflow

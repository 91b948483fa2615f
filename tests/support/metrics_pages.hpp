#pragma once
/// Reading a program's --metrics-port page in tests: the page, and the sum of a metric's
/// samples on it.
///   auto page = fetch_metrics(port);                        // empty when it does not answer
///   auto bytes = sum_of(page, "actorflow_sent_bytes_total");

#include <httplib.h>

#include <cstdint>
#include <sstream>
#include <string>

namespace actorflow::test {

/// The page a --metrics-port endpoint on loopback serves; empty when it does not answer.
inline std::string fetch_metrics(std::uint16_t port) {
  httplib::Client client{"127.0.0.1", port};
  client.set_connection_timeout(5);
  client.set_read_timeout(5);
  auto response = client.Get("/metrics");
  return response && response->status == 200 ? response->body : std::string{};
}

/// The sum of every sample of `name` (with any labels) on a page.
inline double sum_of(const std::string& page, const std::string& name) {
  double total = 0;
  std::istringstream lines{page};
  std::string line;
  while (std::getline(lines, line))
    if (line.rfind(name + "{", 0) == 0 || line.rfind(name + " ", 0) == 0)
      total += std::stod(line.substr(line.rfind(' ') + 1));
  return total;
}

} // namespace actorflow::test

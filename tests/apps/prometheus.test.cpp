// --metrics-port against the real Prometheus tools: every page passes `promtool check metrics`,
// and a Prometheus server on loopback scraping a cluster that trained answers a query for the
// step counter with what the tasks' pages say; with a cluster token and TLS it scrapes over
// HTTPS with the bearer token, as README says to. Debian's prometheus package provides both
// programs (a build package in the Makefile).
#include "support/processes.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include "support/metrics_pages.hpp"

#include <httplib.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace actorflow;
using namespace actorflow::test;
using namespace actorflow::testing;
using namespace std::chrono_literals;

namespace {

/// `promtool check metrics` on a page: its exit code and what it said.
command_result promtool_check(const temp_dir& dir, const std::string& page, const std::string& name) {
  auto path = dir.path() + "/" + name + ".prom";
  std::ofstream{path} << page;
  return run_command("promtool check metrics < " + path);
}

/// A Prometheus server on a free loopback port scraping as `scrape_configs` (the YAML list
/// under "scrape_configs:") says, every second, its files in `dir`; and that port.
std::pair<std::unique_ptr<child_process>, std::uint16_t> start_prometheus(
  const temp_dir& dir, const std::string& scrape_configs) {
  std::ofstream{dir.path() + "/prometheus.yml"}
    << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
    << scrape_configs;
  auto port = free_loopback_port();
  auto prometheus = std::make_unique<child_process>(
    "/usr/bin/prometheus",
    std::vector<std::string>{"--config.file=" + dir.path() + "/prometheus.yml",
                             "--storage.tsdb.path=" + dir.path() + "/tsdb",
                             "--web.listen-address=127.0.0.1:" + std::to_string(port)},
    true);
  REQUIRE(prometheus->started());
  return {std::move(prometheus), port};
}

} // namespace

TEST_CASE("every page --metrics-port serves passes promtool, and Prometheus scraping a cluster "
          "answers a query for the step counter") {
  INFO("prometheus and promtool come with Debian's prometheus package (make deps installs it)");
  REQUIRE(run_command("command -v prometheus && command -v promtool").exit_code == 0);
  temp_dir dir;
  std::map<std::string, std::uint16_t> metrics_ports;
  cluster_processes cluster{ACTORFLOW_WORKER_BINARY, {{"ps", 1}, {"worker", 2}}, 1,
                            [&](const std::string& job, int task) -> std::vector<std::string> {
                              auto port = free_loopback_port();
                              metrics_ports[job + std::to_string(task)] = port;
                              return {"--metrics-port", std::to_string(port)};
                            }};
  REQUIRE(cluster.ready());
  auto master_port = free_loopback_port();
  auto master_metrics = free_loopback_port();
  child_process master{ACTORFLOW_MASTER_BINARY,
                       {"--cluster", cluster.spec_json(), "--port", std::to_string(master_port),
                        "--metrics-port", std::to_string(master_metrics)}};
  REQUIRE(master.wait_for_line("serving on", 20s));
  // The classic example's model over the cluster, through the master.
  child_process client{ACTORFLOW_TRAIN_BINARY,
                       {"--target", "caf://127.0.0.1:" + std::to_string(master_port), "--cluster",
                        cluster.spec_json(), "--model", "linreg", "--steps", "300", "--threads", "1",
                        "--output-dir", dir.path() + "/out"}};
  REQUIRE(client.wait_exit(120s) == 0);

  std::map<std::string, std::string> pages;
  for (auto& [task, port] : metrics_ports)
    pages[task] = fetch_metrics(port);
  pages["master"] = fetch_metrics(master_metrics);
  for (auto& [name, page] : pages) {
    INFO(name << ":\n" << page);
    REQUIRE_FALSE(page.empty());
    auto checked = promtool_check(dir, page, name);
    INFO(checked.output);
    CHECK(checked.exit_code == 0);
    CHECK(checked.output.empty());
  }
  // Every step ran a partition on some worker device; bytes went both ways over CAF.
  auto device_steps = sum_of(pages["worker0"], "actorflow_device_steps_total") +
                      sum_of(pages["worker1"], "actorflow_device_steps_total") +
                      sum_of(pages["ps0"], "actorflow_device_steps_total");
  CHECK(device_steps >= 300);
  // W and b live on the ps, served by shard actors: 300 updates each, after their initial values.
  CHECK(sum_of(pages["ps0"], "actorflow_shard_updates_total") >= 600);
  CHECK(sum_of(pages["worker0"] + pages["worker1"] + pages["ps0"],
               "actorflow_allocator_peak_bytes_in_use") > 0);
  CHECK(sum_of(pages["master"], "actorflow_sent_bytes_total") > 0);
  CHECK(sum_of(pages["worker0"], "actorflow_received_bytes_total") > 0);
  CHECK(pages["master"].find("actorflow_master_sessions_open 0\n") != std::string::npos);
  CHECK(pages["master"].find("actorflow_task_up{job=\"ps\",task=\"0\"} 1\n") != std::string::npos);

  // Prometheus scrapes them all each second; its answer must be the pages' total (training has
  // ended, so the counters stand still).
  std::string targets;
  for (auto& [task, port] : metrics_ports)
    targets += "'127.0.0.1:" + std::to_string(port) + "', ";
  targets += "'127.0.0.1:" + std::to_string(master_metrics) + "'";
  auto [prometheus, prometheus_port] = start_prometheus(
    dir, "  - job_name: actorflow\n    static_configs:\n      - targets: [" + targets + "]\n");
  httplib::Client api{"127.0.0.1", prometheus_port};
  api.set_connection_timeout(2);
  std::string answer;
  double answered = -1;
  auto deadline = std::chrono::steady_clock::now() + 60s;
  std::regex value_of{R"re("value":\[[0-9.]+,"([0-9.e+]+)"\])re"};
  while (std::chrono::steady_clock::now() < deadline && answered != device_steps) {
    std::this_thread::sleep_for(500ms);
    auto r = api.Get("/api/v1/query?query=sum(actorflow_device_steps_total)");
    if (!r || r->status != 200)
      continue;
    answer = r->body;
    std::smatch m;
    if (std::regex_search(answer, m, value_of))
      answered = std::stod(m[1]);
  }
  INFO("Prometheus answered: " << answer);
  CHECK(answered == device_steps);
  // Every target up: the master's page (no device steps) may be scraped a moment later.
  std::string up;
  while (std::chrono::steady_clock::now() < deadline && up.find("\"4\"]") == std::string::npos) {
    if (auto r = api.Get("/api/v1/query?query=sum(up)"); r && r->status == 200)
      up = r->body;
    if (up.find("\"4\"]") == std::string::npos)
      std::this_thread::sleep_for(500ms);
  }
  INFO(up);
  CHECK(up.find("\"4\"]") != std::string::npos);
}

namespace {

/// The value Prometheus's API answers for an instant `query` (percent-encoded) once it is one
/// that `wanted` accepts, asking for at most `limit`: the last value it answered (-1 for none).
double query_value(httplib::Client& api, const std::string& query,
                   const std::function<bool(double)>& wanted, std::chrono::seconds limit) {
  std::regex value_of{R"re("value":\[[0-9.]+,"([0-9.e+]+)"\])re"};
  double value = -1;
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto r = api.Get(("/api/v1/query?query=" + query).c_str()); r && r->status == 200) {
      std::smatch m;
      if (std::regex_search(r->body, m, value_of) && wanted(value = std::stod(m[1])))
        return value;
    }
    std::this_thread::sleep_for(500ms);
  }
  return value;
}

} // namespace

// No ';' in a test's name: CMake splits ctest entries there (docs/design.md, "Tests").
TEST_CASE("Prometheus scrapes a task of a cluster with a token and TLS over HTTPS, with the "
          "bearer token and a certificate of the cluster CA, and without the token the target is "
          "down", "[metrics]") {
  INFO("prometheus comes with Debian's prometheus package (make deps installs it)");
  REQUIRE(run_command("command -v prometheus").exit_code == 0);
  temp_dir dir;
  auto certs = dir.path() + "/certs";
  {
    // Prometheus checks the name it dialled in the certificate: 127.0.0.1.
    child_process script{ACTORFLOW_CERT_SCRIPT, {certs, "ps0", "prometheus"}, true,
                         {"ACTORFLOW_CERT_SAN=IP:127.0.0.1"}};
    REQUIRE(script.wait_exit(60s) == 0);
  }
  auto token_file = dir.path() + "/token";
  std::ofstream{token_file} << "a token only this cluster knows\n";
  auto metrics_port = free_loopback_port();
  child_process worker{ACTORFLOW_WORKER_BINARY,
                       {"--cluster", "ps=127.0.0.1:" + std::to_string(free_loopback_port()), "--job", "ps",
                        "--token-file", token_file, "--tls-cert", certs + "/ps0.pem", "--tls-key",
                        certs + "/ps0.key", "--tls-ca", certs + "/ca.pem", "--metrics-port",
                        std::to_string(metrics_port)}};
  REQUIRE(worker.wait_for_line("metrics on https://", 20s));

  // What README's "Securing a cluster" tells a Prometheus to say, and the same without the token.
  auto scrape = [&](const std::string& job, bool token) {
    return "  - job_name: " + job + "\n    scheme: https\n" +
           (token ? "    authorization:\n      credentials_file: " + token_file + "\n" : "") +
           "    tls_config:\n      ca_file: " + certs + "/ca.pem\n      cert_file: " + certs +
           "/prometheus.pem\n      key_file: " + certs + "/prometheus.key\n" +
           "    static_configs:\n      - targets: ['127.0.0.1:" + std::to_string(metrics_port) + "']\n";
  };
  auto [prometheus, prometheus_port] =
    start_prometheus(dir, scrape("secured", true) + scrape("tokenless", false));
  httplib::Client api{"127.0.0.1", prometheus_port};
  api.set_connection_timeout(2);
  // up{job="secured"}, and the samples it took: the task's page.
  auto is = [](double want) { return [want](double v) { return v == want; }; };
  CHECK(query_value(api, "up%7Bjob%3D%22secured%22%7D", is(1), 60s) == 1);
  CHECK(query_value(api, "scrape_samples_scraped%7Bjob%3D%22secured%22%7D",
                    [](double v) { return v > 0; }, 10s) > 0);
  // Refused with 401 on every scrape: never up.
  CHECK(query_value(api, "up%7Bjob%3D%22tokenless%22%7D", is(0), 20s) == 0);
  CHECK(query_value(api, "max_over_time(up%7Bjob%3D%22tokenless%22%7D%5B1m%5D)", is(0), 10s) == 0);
}

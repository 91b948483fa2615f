// Issue 25: bad security settings stop a program at once (exit code 2, one line naming the
// file), before it serves anything; none starts with TLS left out of one of its channels.
#include "security/attack_util.hpp"
#include "support/processes.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

using namespace actorflow::testing;
using namespace std::chrono_literals;

namespace {

struct program {
  std::string name;
  std::string binary;
  /// Flags with which it would start and serve, were its security settings good.
  std::vector<std::string> args;
};

/// What a program is started with: its TLS files and, when set, its token file.
struct settings {
  std::string what; // the case, for the report
  std::string cert, key, ca, token_file;
  std::string named; // the file the one line must name
};

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out{path};
  out << text;
}

/// The lines of `text` that are not empty.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::string::size_type start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos)
      end = text.size();
    if (end > start)
      lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

} // namespace

TEST_CASE("a worker, a master or a trainer with an unusable certificate, key, CA or token file exits 2 at once, naming the file", "[security][tls][flags]") {
  // Made once: Catch runs the test case again for each section.
  static actorflow::test::temp_dir dir;
  static const bool made = [] {
    make_certificates(dir.path() + "/cluster", {"task", "other"});
    return true;
  }();
  REQUIRE(made);
  auto certs = dir.path() + "/cluster";
  auto garbage = dir.path() + "/garbage.pem";
  write_file(garbage, "this is no PEM file\n");
  auto empty_token = dir.path() + "/empty-token";
  write_file(empty_token, "\n");
  auto missing = dir.path() + "/no-such-file.pem";
  auto cert = certs + "/task.pem", key = certs + "/task.key", ca = certs + "/ca.pem";

  auto port = std::to_string(free_loopback_port());
  auto spec = "{\"worker\": [\"127.0.0.1:" + port + "\"]}";
  std::vector<program> programs{
    {"actorflow-worker", ACTORFLOW_WORKER_BINARY, {"--cluster", spec, "--job", "worker", "--task", "0"}},
    {"actorflow-master", ACTORFLOW_MASTER_BINARY, {"--port", port}},
    {"actorflow-train", ACTORFLOW_TRAIN_BINARY,
     {"--target", "caf://127.0.0.1:" + port, "--epochs", "1", "--output-dir", dir.path()}},
  };
  std::vector<settings> cases{
    {"a certificate that is no PEM", garbage, key, ca, "", garbage},
    {"a key that is no PEM", cert, garbage, ca, "", garbage},
    {"a CA that is no PEM", cert, key, garbage, "", garbage},
    {"the key of another certificate", cert, certs + "/other.key", ca, "", certs + "/other.key"},
    {"a certificate that does not exist", missing, key, ca, "", missing},
    {"a CA that is a directory", cert, key, certs, "", certs},
    {"an empty token file", "", "", "", empty_token, empty_token},
    {"a token file that does not exist", "", "", "", missing, missing},
    {"a token file that is a directory", "", "", "", certs, certs},
  };

  for (auto& p : programs) {
    for (auto& c : cases) {
      DYNAMIC_SECTION(p.name << " with " << c.what) {
        auto args = p.args;
        if (!c.cert.empty())
          args.insert(args.end(), {"--tls-cert", c.cert, "--tls-key", c.key, "--tls-ca", c.ca});
        if (!c.token_file.empty())
          args.insert(args.end(), {"--token-file", c.token_file});
        auto started = std::chrono::steady_clock::now();
        child_process child{p.binary, args};
        auto code = child.wait_exit(10000ms);
        auto took = std::chrono::steady_clock::now() - started;
        auto err = child.stderr_text();
        INFO(err);
        CHECK(code == 2);
        CHECK(took < 5s);
        auto lines = lines_of(err);
        REQUIRE(lines.size() == 1);
        CHECK(lines[0].find(c.named) != std::string::npos);
        CHECK(lines[0].find("travel through CAF") == std::string::npos);
      }
    }
  }
}

TEST_CASE("with good certificates the same flags pass the security check", "[security][tls][flags]") {
  // The control for the cases above: what makes them exit is the bad file, not the flags.
  actorflow::test::temp_dir dir;
  auto certs = dir.path() + "/cluster";
  make_certificates(certs, {"task"});
  auto port = free_loopback_port();
  REQUIRE(port != 0);
  child_process master{ACTORFLOW_MASTER_BINARY,
                       {"--port", std::to_string(port), "--tls-cert", certs + "/task.pem",
                        "--tls-key", certs + "/task.key", "--tls-ca", certs + "/ca.pem"}};
  REQUIRE(master.wait_for_line("serving on", 20000ms).has_value());
  master.signal(SIGTERM);
  CHECK(master.wait_exit(10000ms) == 0);
}

TEST_CASE("a program that reads its security from the environment and finds it unusable neither connects nor serves without it", "[security][tls]") {
  actorflow::test::temp_dir dir;
  write_file(dir.path() + "/garbage.pem", "not a certificate\n");
  make_certificates(dir.path() + "/cluster", {"client"});
  // A plain cluster: were TLS dropped, the classic example would train on it and exit 0.
  cluster_processes cluster{ACTORFLOW_WORKER_BINARY, {{"canshu", 2}, {"gongzuo", 2}}};
  REQUIRE(cluster.ready());
  auto environment = tls_environment(dir.path() + "/cluster", "client", dir.path() + "/cluster");
  environment[0] = "ACTORFLOW_TLS_CERT=" + dir.path() + "/garbage.pem";
  child_process client{ACTORFLOW_EXAMPLE_BINARY,
                       {"--target", "caf://" + cluster.address(2), "--cluster",
                        cluster.spec_json(), "--steps", "10"},
                       true, environment};
  auto output = client.read_all_lines(30000ms);
  auto code = client.wait_exit(10000ms);
  auto errors = client.stderr_text();
  INFO(output << errors);
  CHECK(code != 0);
  CHECK(output.find("0 ") == std::string::npos); // not a step
  CHECK(errors.find(dir.path() + "/garbage.pem") != std::string::npos);
  CHECK(errors.find("a session on caf://") != std::string::npos);
  CHECK(cluster.stop());
}

// Cluster specs in every form (JSON file, JSON text, inline string, TF_CONFIG), the errors that
// quote the part at fault, and replica_device_setter_for counting a cluster's ps tasks.
#include "actors/cluster_spec.hpp"

#include "graph/graph.hpp"
#include "graph/ops.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

using namespace actorflow;
using actorflow::test::temp_dir;
using Catch::Matchers::Contains;

namespace {

/// The seed example: parameters ("canshu") on two tasks, workers ("gongzuo") on two tasks.
const char* const seed_json = R"({"canshu": ["localhost:2221", "localhost:2222"],
                                  "gongzuo": ["localhost:2223", "localhost:2224"]})";
const char* const seed_inline =
  "canshu=localhost:2221,localhost:2222;gongzuo=localhost:2223,localhost:2224";

cluster_spec must(result<cluster_spec> spec) {
  INFO(spec.error().to_string());
  REQUIRE(spec.ok());
  return *spec;
}

std::vector<std::string> names(const std::vector<device_name>& devices) {
  std::vector<std::string> out;
  for (auto& d : devices)
    out.push_back(d.to_string());
  return out;
}

/// The error message of a spec that must fail with invalid_argument.
std::string invalid_message(const result<cluster_spec>& spec) {
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.error().code() == errc::invalid_argument);
  return spec.error().message();
}

std::string invalid_message(const result<tf_config>& config) {
  REQUIRE_FALSE(config.ok());
  CHECK(config.error().code() == errc::invalid_argument);
  return config.error().message();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out{path};
  out << text;
  REQUIRE(out.good());
}

} // namespace

TEST_CASE("the seed example's JSON gives jobs canshu and gongzuo with two tasks each",
          "[actors][cluster_spec]") {
  auto spec = must(cluster_spec::from_json(seed_json));
  CHECK(spec.jobs() == std::vector<std::string>{"canshu", "gongzuo"});
  CHECK(spec.num_tasks("canshu") == 2);
  CHECK(spec.num_tasks("gongzuo") == 2);
  CHECK(spec.num_tasks("ps") == 0);
  CHECK(*spec.address("canshu", 0) == "localhost:2221");
  CHECK(*spec.address("canshu", 1) == "localhost:2222");
  CHECK(*spec.address("gongzuo", 0) == "localhost:2223");
  CHECK(*spec.address("gongzuo", 1) == "localhost:2224");
  CHECK(names(spec.tasks("canshu")) ==
        std::vector<std::string>{"/job:canshu/replica:0/task:0", "/job:canshu/replica:0/task:1"});
  CHECK(names(spec.tasks()) ==
        std::vector<std::string>{"/job:canshu/replica:0/task:0", "/job:canshu/replica:0/task:1",
                                 "/job:gongzuo/replica:0/task:0", "/job:gongzuo/replica:0/task:1"});
  CHECK(spec.tasks("nope").empty());
}

TEST_CASE("the inline form, JSON text and a JSON file give the same spec",
          "[actors][cluster_spec]") {
  temp_dir dir;
  auto path = dir.path() + "/cluster.json";
  write_text(path, seed_json);
  auto from_text = must(cluster_spec::from_json(seed_json));
  CHECK(must(cluster_spec::from_inline(seed_inline)) == from_text);
  CHECK(must(cluster_spec::from_json_file(path)) == from_text);
  // parse() tells the three apart, as a --cluster flag needs.
  CHECK(must(cluster_spec::parse(seed_json)) == from_text);
  CHECK(must(cluster_spec::parse(seed_inline)) == from_text);
  CHECK(must(cluster_spec::parse(path)) == from_text);
}

TEST_CASE("the SPEC's example spec keeps task order and lets tasks share a machine",
          "[actors][cluster_spec]") {
  auto spec = must(cluster_spec::parse(" ps = machine-a:2221 ; worker = machine-a:2222 , "
                                       "machine-b:2222 ; "));
  CHECK(spec.jobs() == std::vector<std::string>{"ps", "worker"});
  CHECK(*spec.address("ps", 0) == "machine-a:2221");
  CHECK(*spec.address("worker", 0) == "machine-a:2222");
  CHECK(*spec.address("worker", 1) == "machine-b:2222");
  CHECK(names(spec.tasks("ps")) == std::vector<std::string>{"/job:ps/replica:0/task:0"});
}

TEST_CASE("to_json and to_inline read back as the same spec", "[actors][cluster_spec]") {
  auto spec = must(cluster_spec::from_inline(seed_inline));
  CHECK(spec.to_json() == R"({"canshu":["localhost:2221","localhost:2222"],)"
                          R"("gongzuo":["localhost:2223","localhost:2224"]})");
  CHECK(spec.to_inline() == seed_inline);
  CHECK(must(cluster_spec::from_json(spec.to_json())) == spec);
  CHECK(must(cluster_spec::from_inline(spec.to_inline())) == spec);
}

TEST_CASE("IPv6 literals and host names with dots, dashes and underscores are accepted",
          "[actors][cluster_spec]") {
  auto spec = must(cluster_spec::from_inline(
    "ps=[::1]:2221;worker=ps-0.ps.default.svc.cluster.local:2222,my_host:65535,10.0.0.1:1"));
  CHECK(*spec.address("ps", 0) == "[::1]:2221");
  CHECK(spec.num_tasks("worker") == 3);
}

TEST_CASE("looking up an unknown job or a task past the end is an error",
          "[actors][cluster_spec]") {
  auto spec = must(cluster_spec::from_inline(seed_inline));
  auto job = spec.address("ps", 0);
  REQUIRE_FALSE(job.ok());
  CHECK(job.error().code() == errc::not_found);
  CHECK_THAT(job.error().message(), Contains("'ps'") && Contains("canshu, gongzuo"));
  auto task = spec.address("gongzuo", 2);
  REQUIRE_FALSE(task.ok());
  CHECK(task.error().code() == errc::out_of_range);
  CHECK_THAT(task.error().message(), Contains("'gongzuo' has no task 2"));
}

TEST_CASE("a TF_CONFIG value gives the cluster and this task's job and index",
          "[actors][cluster_spec]") {
  auto config = parse_tf_config(std::string{R"({"cluster": )"} + seed_json +
                                R"(, "task": {"type": "gongzuo", "index": 1},
                                    "environment": "cloud"})");
  INFO(config.error().to_string());
  REQUIRE(config.ok());
  CHECK(config->cluster == must(cluster_spec::from_json(seed_json)));
  CHECK(config->job == "gongzuo");
  CHECK(config->task_index == 1);
  CHECK(config->task().to_string() == "/job:gongzuo/replica:0/task:1");

  auto no_index = parse_tf_config(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker"}})");
  REQUIRE(no_index.ok());
  CHECK(no_index->task_index == 0);
}

TEST_CASE("TF_CONFIG is read from the environment", "[actors][cluster_spec]") {
  const char* variable = "ACTORFLOW_TEST_TF_CONFIG";
  ::unsetenv(variable);
  auto unset = tf_config_from_environment(variable);
  REQUIRE_FALSE(unset.ok());
  CHECK(unset.error().code() == errc::not_found);
  CHECK_THAT(unset.error().message(), Contains(variable));

  ::setenv(variable, R"({"cluster": {"ps": ["a:1"], "worker": ["b:2", "c:3"]},
                         "task": {"type": "worker", "index": 1}})", 1);
  auto config = tf_config_from_environment(variable);
  INFO(config.error().to_string());
  REQUIRE(config.ok());
  CHECK(config->job == "worker");
  CHECK(config->task_index == 1);

  ::setenv(variable, R"({"cluster": {"ps": ["a:1"]}, "task": {"type": "worker"}})", 1);
  auto bad = tf_config_from_environment(variable);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message(), Contains(variable) && Contains("'worker'"));
  ::unsetenv(variable);
}

TEST_CASE("an address listed twice is an error quoting it and both places",
          "[actors][cluster_spec]") {
  auto across_jobs = invalid_message(
    cluster_spec::from_inline("ps=machine-a:2222;worker=machine-b:2222,machine-a:2222"));
  CHECK_THAT(across_jobs, Contains("'machine-a:2222' appears twice") &&
                            Contains("job 'ps' task 0") && Contains("job 'worker' task 1"));
  auto same_job = invalid_message(cluster_spec::from_json(R"({"worker": ["h:1", "h:1"]})"));
  CHECK_THAT(same_job, Contains("'h:1' appears twice"));
  // The same host and port spelled differently is still the same address.
  auto spelled = invalid_message(cluster_spec::from_inline("ps=Host:2222;worker=host:02222"));
  CHECK_THAT(spelled, Contains("'host:02222' appears twice"));
}

TEST_CASE("parse refuses a spec naming one address twice literally, in either form, naming both tasks",
          "[actors][cluster_spec]") {
  for (auto text : {"ps=127.0.0.1:2222;worker=127.0.0.1:2223,127.0.0.1:2222",
                    R"({"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223", "127.0.0.1:2222"]})"}) {
    INFO(text);
    auto message = invalid_message(cluster_spec::parse(text));
    CHECK_THAT(message, Contains("'127.0.0.1:2222' appears twice") &&
                          Contains("job 'ps' task 0") && Contains("job 'worker' task 1"));
  }
}

TEST_CASE("check_distinct_addresses refuses localhost and 127.0.0.1 with one port, naming both tasks and the address",
          "[actors][cluster_spec]") {
  // parse accepts it: the spellings differ, and parse looks no names up.
  auto spec = cluster_spec::parse("ps=127.0.0.1:2222;worker=127.0.0.1:2223,localhost:2222");
  REQUIRE(spec);
  auto distinct = check_distinct_addresses(*spec);
  REQUIRE_FALSE(distinct.ok());
  CHECK(distinct.code() == errc::invalid_argument);
  CHECK(distinct.message() == "cluster spec: ps task 0 (127.0.0.1:2222) and worker task 1 "
                              "(localhost:2222) name the same address 127.0.0.1:2222");
  // Host names are case-insensitive to the resolver too.
  auto upper = cluster_spec::parse("ps=LocalHost:2222;worker=127.0.0.1:2222");
  REQUIRE(upper);
  CHECK_THAT(check_distinct_addresses(*upper).message(),
             Contains("ps task 0 (LocalHost:2222)") && Contains("worker task 0 (127.0.0.1:2222)"));
}

TEST_CASE("check_distinct_addresses accepts one host on distinct ports", "[actors][cluster_spec]") {
  auto spec = cluster_spec::parse(
    "ps=127.0.0.1:2222,localhost:2223;worker=127.0.0.1:2224,localhost:2225,[::1]:2226");
  REQUIRE(spec);
  CHECK(check_distinct_addresses(*spec).ok());
}

TEST_CASE("check_distinct_addresses accepts host names that do not resolve, as a Kubernetes spec's before its pods run",
          "[actors][cluster_spec]") {
  // ".invalid" never resolves (RFC 6761); the cluster.local names do not resolve here.
  auto spec = cluster_spec::parse(
    "ps=demo-ps-0.default.svc.cluster.local:2222,demo-ps-1.default.svc.cluster.local:2222;"
    "worker=demo-worker-0.default.svc.cluster.local:2222,no-such-host.invalid:2222,"
    "127.0.0.1:2222");
  REQUIRE(spec);
  CHECK(check_distinct_addresses(*spec).ok());
}

TEST_CASE("a bad port is an error quoting the address and the port", "[actors][cluster_spec]") {
  CHECK_THAT(invalid_message(cluster_spec::from_inline("ps=h:65536")),
             Contains("address 'h:65536' has a bad port '65536'"));
  CHECK_THAT(invalid_message(cluster_spec::from_inline("ps=h:0")), Contains("bad port '0'"));
  CHECK_THAT(invalid_message(cluster_spec::from_inline("ps=h:http")), Contains("bad port 'http'"));
  CHECK_THAT(invalid_message(cluster_spec::from_inline("ps=h:-1")), Contains("bad port '-1'"));
  CHECK_THAT(invalid_message(cluster_spec::from_inline("ps=h:")), Contains("bad port ''"));
  CHECK_THAT(invalid_message(cluster_spec::from_inline("ps=a:1;worker=b:1,c:99999999999")),
             Contains("job 'worker' task 1") && Contains("bad port '99999999999'"));
  CHECK_THAT(invalid_message(cluster_spec::from_inline("ps=machine-a")),
             Contains("address 'machine-a' has no port"));
}

TEST_CASE("an address without a host or with a bad host is an error quoting it",
          "[actors][cluster_spec]") {
  CHECK_THAT(invalid_message(cluster_spec::from_json(R"({"ps": [":2222"]})")),
             Contains("address ':2222' has no host"));
  CHECK_THAT(invalid_message(cluster_spec::from_json(R"({"ps": ["a b:2222"]})")),
             Contains("bad host 'a b'"));
  CHECK_THAT(invalid_message(cluster_spec::from_json(R"({"ps": ["a:b:2222"]})")),
             Contains("bad host 'a:b'"));
  CHECK_THAT(invalid_message(cluster_spec::from_json(R"({"ps": [""]})")),
             Contains("job 'ps' task 0: the address is empty"));
  CHECK_THAT(invalid_message(cluster_spec::from_inline("ps=a:1,,b:2")),
             Contains("job 'ps' task 1: the address is empty"));
}

TEST_CASE("an empty job name, a job with no tasks and no jobs at all are errors",
          "[actors][cluster_spec]") {
  CHECK_THAT(invalid_message(cluster_spec::from_inline("=a:1")),
             Contains("a job name is empty in '=a:1'"));
  CHECK_THAT(invalid_message(cluster_spec::from_json(R"({"": ["a:1"]})")),
             Contains("a job name is empty"));
  CHECK_THAT(invalid_message(cluster_spec::from_json(R"({"ps": [], "worker": ["a:1"]})")),
             Contains("job 'ps' has no tasks"));
  CHECK_THAT(invalid_message(cluster_spec::from_inline("ps=;worker=a:1")),
             Contains("job 'ps' has no tasks"));
  CHECK_THAT(invalid_message(cluster_spec::from_json("{}")), Contains("no jobs"));
  CHECK_THAT(invalid_message(cluster_spec::parse("  ")), Contains("empty"));
}

TEST_CASE("job names follow the device name rule for jobs", "[actors][cluster_spec]") {
  for (std::string bad : {"1ps", "my job", "ps/0", "*", "ps:1", "_ps"}) {
    INFO(bad);
    CHECK_THAT(invalid_message(cluster_spec::from_jobs({{bad, {"a:1"}}})),
               Contains("bad job name '" + bad + "'"));
  }
  CHECK(must(cluster_spec::from_jobs({{"ps_2-b", {"a:1"}}})).num_tasks("ps_2-b") == 1);
}

TEST_CASE("the inline form rejects a part without '=' and a job named twice",
          "[actors][cluster_spec]") {
  CHECK_THAT(invalid_message(cluster_spec::from_inline("ps=a:1;worker")),
             Contains("part 'worker' has no '='"));
  CHECK_THAT(invalid_message(cluster_spec::from_inline("ps=a:1;ps=b:2")),
             Contains("job 'ps' appears twice"));
}

TEST_CASE("malformed JSON is reported with its byte position", "[actors][cluster_spec]") {
  auto message = invalid_message(cluster_spec::from_json(R"({"ps": ["a:1",]})"));
  CHECK_THAT(message, Contains("malformed JSON") && Contains("at byte 15"));
  CHECK_THAT(invalid_message(cluster_spec::from_json(R"({"ps": ["a:1"], "ps": ["b:2"]})")),
             Contains("key 'ps' appears twice"));
  CHECK_THAT(invalid_message(cluster_spec::from_json(R"(["a:1"])")),
             Contains("expected a JSON object") && Contains(R"(["a:1"])"));
  CHECK_THAT(invalid_message(cluster_spec::from_json(R"({"ps": "a:1"})")),
             Contains("job 'ps': expected a list") && Contains(R"("a:1")"));
  CHECK_THAT(invalid_message(cluster_spec::from_json(R"({"ps": ["a:1", 2222]})")),
             Contains("job 'ps' task 1: expected a \"host:port\" string, got 2222"));
}

TEST_CASE("JSON that is not an object is refused as the wrong shape, not looked up as a file",
          "[actors][cluster_spec]") {
  for (std::string text : {"[1,2,3]", "\"ps\""}) {
    INFO(text);
    auto spec = cluster_spec::parse(text);
    REQUIRE_FALSE(spec.ok());
    CHECK(spec.error().code() == errc::invalid_argument);
    CHECK(spec.error().message().find("expected a JSON object") != std::string::npos);
    CHECK(spec.error().message().find("file") == std::string::npos);
  }
}

TEST_CASE("a file that cannot be read is an error naming it", "[actors][cluster_spec]") {
  temp_dir dir;
  auto missing = cluster_spec::from_json_file(dir.path() + "/missing.json");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code() == errc::not_found);
  CHECK_THAT(missing.error().message(), Contains(dir.path() + "/missing.json"));

  auto directory = cluster_spec::parse(dir.path());
  REQUIRE_FALSE(directory.ok());
  CHECK_THAT(directory.error().message(), Contains("'" + dir.path() + "'"));

  auto path = dir.path() + "/broken.json";
  write_text(path, R"({"ps": ["a:1")");
  auto broken = cluster_spec::from_json_file(path);
  REQUIRE_FALSE(broken.ok());
  CHECK_THAT(broken.error().message(), Contains(path) && Contains("malformed JSON"));
}

TEST_CASE("a TF_CONFIG task that is not in the cluster is an error quoting it",
          "[actors][cluster_spec]") {
  auto with_task = [](const std::string& task) {
    return parse_tf_config(std::string{R"({"cluster": )"} + seed_json + R"(, "task": )" + task +
                           "}");
  };
  CHECK_THAT(invalid_message(with_task(R"({"type": "worker", "index": 0})")),
             Contains("task type 'worker' is not a job of the cluster") &&
               Contains("canshu, gongzuo"));
  CHECK_THAT(invalid_message(with_task(R"({"type": "gongzuo", "index": 2})")),
             Contains("task index 2 is out of range: job 'gongzuo' has 2 tasks"));
  CHECK_THAT(invalid_message(with_task(R"({"type": "gongzuo", "index": -1})")),
             Contains("task index -1 is out of range"));
  CHECK_THAT(invalid_message(with_task(R"({"type": "gongzuo", "index": "1"})")),
             Contains(R"(task index "1" is not an integer)"));
  CHECK_THAT(invalid_message(with_task(R"({"index": 1})")), Contains("\"type\""));
  CHECK_THAT(invalid_message(parse_tf_config(R"({"task": {"type": "ps"}})")),
             Contains("no \"cluster\""));
  CHECK_THAT(invalid_message(parse_tf_config(std::string{R"({"cluster": )"} + seed_json + "}")),
             Contains("no \"task\""));
  CHECK_THAT(invalid_message(parse_tf_config(R"({"cluster": {"ps": ["h:0"]}, "task": {}})")),
             Contains("bad port '0'"));
  CHECK_THAT(invalid_message(parse_tf_config(R"({"cluster": )")),
             Contains("malformed JSON in TF_CONFIG at byte"));
}

TEST_CASE("replica_device_setter_for counts the cluster's ps tasks", "[actors][cluster_spec]") {
  auto spec = must(cluster_spec::from_inline("ps=a:1,a:2,a:3;worker=b:1"));
  auto setter = replica_device_setter_for(spec);
  INFO(setter.error().to_string());
  REQUIRE(setter.ok());
  graph g;
  std::vector<variable> vars;
  {
    auto dev = g.device(*setter);
    for (int i = 0; i < 4; ++i)
      vars.push_back(ops::variable(g, 1.f, "v" + std::to_string(i)));
  }
  REQUIRE(g.status().ok());
  CHECK(vars[0].ref.producer().requested_device == "/job:ps/task:0");
  CHECK(vars[1].ref.producer().requested_device == "/job:ps/task:1");
  CHECK(vars[2].ref.producer().requested_device == "/job:ps/task:2");
  CHECK(vars[3].ref.producer().requested_device == "/job:ps/task:0");
}

TEST_CASE("replica_device_setter_for uses the job names of ps_device and worker_device",
          "[actors][cluster_spec]") {
  auto spec = must(cluster_spec::from_json(seed_json));
  replica_device_setter_options options;
  options.ps_device = "/job:canshu";
  options.worker_device = "/job:gongzuo";
  auto setter = replica_device_setter_for(spec, options);
  INFO(setter.error().to_string());
  REQUIRE(setter.ok());
  graph g;
  variable w, b, c;
  output y;
  {
    auto dev = g.device(*setter);
    w = ops::variable(g, 1.f, "w");
    b = ops::variable(g, 1.f, "b");
    c = ops::variable(g, 1.f, "c");
    y = w * b;
  }
  REQUIRE(g.status().ok());
  CHECK(w.ref.producer().requested_device == "/job:canshu/task:0");
  CHECK(b.ref.producer().requested_device == "/job:canshu/task:1");
  CHECK(c.ref.producer().requested_device == "/job:canshu/task:0");
  CHECK(y.producer().requested_device == "/job:gongzuo");
}

TEST_CASE("replica_device_setter_for fails when the cluster lacks the ps or worker job",
          "[actors][cluster_spec]") {
  auto spec = must(cluster_spec::from_json(seed_json));
  auto no_ps = replica_device_setter_for(spec);
  REQUIRE_FALSE(no_ps.ok());
  CHECK(no_ps.error().code() == errc::not_found);
  CHECK_THAT(no_ps.error().message(),
             Contains("no ps job 'ps'") && Contains("canshu, gongzuo"));
  replica_device_setter_options options;
  options.ps_device = "/job:canshu";
  auto no_worker = replica_device_setter_for(spec, options);
  REQUIRE_FALSE(no_worker.ok());
  CHECK_THAT(no_worker.error().message(), Contains("no worker job 'worker'"));
}

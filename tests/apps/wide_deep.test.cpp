// actorflow-train --model wide-deep and its synthetic click log (apps/train/click_log.hpp): the
// generator's determinism and skew, the AUC, a run on hash tables sharded over two ps tasks
// against the same run in one process, and between-graph workers as processes sharing them.
#include "support/processes.hpp"
#include "train/click_log.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>
#include <unistd.h>

namespace {

actorflow::testing::command_result run_train(const std::string& args) {
  return actorflow::testing::run_command(std::string{ACTORFLOW_TRAIN_BINARY} + " " + args);
}

/// (model AUC, ceiling) from a run's "auc: " line; fails the test without one.
std::pair<double, double> auc_of(const std::string& output) {
  std::istringstream in{output};
  for (std::string line; std::getline(in, line);)
    if (line.rfind("auc: ", 0) == 0) {
      auto ceiling_at = line.find("true model's: ");
      REQUIRE(ceiling_at != std::string::npos);
      return {std::stod(line.substr(5)), std::stod(line.substr(ceiling_at + 14))};
    }
  FAIL("no auc line in:\n" << output);
  return {};
}

} // namespace

TEST_CASE("the AUC is the chance a positive outscores a negative, ties counting half", "[apps][wide_deep]") {
  using actorflow::train::auc;
  CHECK(auc({0.1, 0.4, 0.35, 0.8}, {0, 0, 1, 1}) == Approx(0.75));
  CHECK(auc({1, 2, 3}, {0, 1, 1}) == Approx(1.0));
  CHECK(auc({3, 2, 1}, {0, 1, 1}) == Approx(0.0));
  CHECK(auc({0.5, 0.5}, {0, 1}) == Approx(0.5));
  CHECK(auc({0.2, 0.9}, {1, 1}) == 0.5);  // one class only
}

TEST_CASE("the click log is the same for a seed, skewed towards few ids, and its true model ranks clicks", "[apps][wide_deep]") {
  using namespace actorflow::train;
  click_log a{{1000, 7}}, b{{1000, 7}}, other{{1000, 8}};
  auto first = a.next(5000);
  auto again = b.next(5000);
  CHECK(first.user.to_vector<std::int64_t>() == again.user.to_vector<std::int64_t>());
  CHECK(first.label_values == again.label_values);
  CHECK(other.next(5000).label_values != first.label_values);
  CHECK(a.next(5000).user.to_vector<std::int64_t>() != first.user.to_vector<std::int64_t>());
  CHECK(a.evaluation(100).true_logits == b.evaluation(100).true_logits);
  // Zipf: the most frequent user id has about 1 / ln(1000) of the examples (14%).
  std::map<std::int64_t, int> counts;
  for (auto id : first.user.to_vector<std::int64_t>())
    ++counts[id];
  int most = 0;
  for (auto& [id, n] : counts)
    most = std::max(most, n);
  CHECK(most > 5000 / 10);
  CHECK(most < 5000 / 5);
  CHECK(counts.size() > 300);
  auto ceiling = auc(first.true_logits, first.label_values);
  CHECK(ceiling > 0.7);
  CHECK(ceiling < 0.85);
}

TEST_CASE("wide-deep learns clicks on hash tables sharded over two ps tasks as it does in one process", "[apps][wide_deep][sparse]") {
  auto dir = std::filesystem::temp_directory_path() / ("af-wide-deep-" + std::to_string(::getpid()));
  const std::string args = "--model wide-deep --threads 1 --steps 3000 --ids-per-field 10000 "
                           "--log-every 100000 --output-dir " + dir.string();
  auto cluster = run_train(args + " --ps-tasks 2");
  INFO(cluster.output);
  REQUIRE(cluster.exit_code == 0);
  auto local = run_train(args + " --local");
  INFO(local.output);
  REQUIRE(local.exit_code == 0);
  auto [cluster_auc, ceiling] = auc_of(cluster.output);
  auto [local_auc, local_ceiling] = auc_of(local.output);
  CHECK(ceiling == local_ceiling);
  // 384k examples of 10000 ids a field: well above chance, within 0.12 of the true model's.
  CHECK(cluster_auc > 0.65);
  CHECK(cluster_auc > ceiling - 0.12);
  CHECK(cluster_auc == Approx(local_auc).margin(0.005));
  std::filesystem::remove_all(dir);
}

TEST_CASE("wide-deep between-graph: two worker processes share hash tables on two ps processes and clear the in-graph test's AUC bars, every process ending by itself", "[apps][wide_deep][sparse]") {
  using actorflow::testing::child_process;
  using namespace std::chrono_literals;
  auto cluster = actorflow::testing::start_ps_cluster(ACTORFLOW_WORKER_BINARY, 2, 2);
  REQUIRE(cluster.ready);
  const auto& spec = cluster.spec;
  auto dir = std::filesystem::temp_directory_path() / ("af-wide-deep-bg-" + std::to_string(::getpid()));
  // Each worker 1500 steps: 3000 updates of the shared model, as the in-graph test's run.
  auto worker = [&](int task) {
    return std::make_unique<child_process>(
      ACTORFLOW_TRAIN_BINARY,
      std::vector<std::string>{"--model", "wide-deep", "--cluster", spec, "--job", "worker",
                               "--task", std::to_string(task), "--threads", "1", "--steps", "1500",
                               "--ids-per-field", "10000", "--log-every", "100000",
                               "--output-dir", (dir / ("w" + std::to_string(task))).string()});
  };
  auto second = worker(1);
  auto chief = worker(0);
  auto output = chief->read_all_lines(240000ms);
  INFO(output << chief->stderr_text());
  REQUIRE(chief->wait_exit(20000ms) == 0);
  auto second_output = second->read_all_lines(60000ms);
  INFO(second_output << second->stderr_text());
  CHECK(second->wait_exit(20000ms) == 0);
  auto [auc, ceiling] = auc_of(output);
  CHECK(auc > 0.65);
  CHECK(auc > ceiling - 0.12);
  // The chief's global step counts the other worker's updates too (all of them at most).
  auto global_at = output.find("global step: ");
  REQUIRE(global_at != std::string::npos);
  auto global = std::stoll(output.substr(global_at + 13));
  CHECK(global > 1500);
  CHECK(global <= 3000);
  CHECK(second_output.find("global step: ") != std::string::npos);
  // The ps tasks stop by themselves once both workers said they are done.
  for (auto& p : cluster.ps) {
    CHECK(p->wait_exit(20000ms) == 0);
    CHECK(p->stderr_text().find("all 2 tasks of job 'worker' finished; stopping") != std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

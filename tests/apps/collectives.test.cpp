// Collectives across real processes on loopback: collective_worker processes (a server per
// task, the group joined as tasks reach each other) all-reduce to the exact sum, and a worker
// killed between two all-reduces (or inside one) fails the next one on every other process at
// once, naming it; actorflow-train --strategy mirrored on two workers keeps equal replicas and
// goes on from the chief's checkpoint after a lost worker; on three, with gradients in several
// buckets, its variables are one process's on the concatenated batches.
#include "serialization/checkpoint.hpp"
#include "support/metrics_csv.hpp"
#include "support/processes.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

using namespace actorflow::testing;
using namespace std::chrono_literals;

namespace {

const std::string worker_binary = ACTORFLOW_COLLECTIVE_WORKER_BINARY;


} // namespace

TEST_CASE("collective all-reduces across three worker processes on loopback give every process the exact sum") {
  // 200003 float32: 800 KiB, so the ring, in segments of odd sizes.
  cluster_processes cluster{worker_binary, {{"worker", 3}}, 1, [](const std::string&, int) {
    return std::vector<std::string>{"--elements", "200003", "--rounds", "3"};
  }};
  REQUIRE(cluster.ready());
  for (std::size_t t = 0; t < 3; ++t) {
    INFO("task " << t);
    auto joined = cluster.task(t).wait_for_line("joined rank", 30000ms);
    REQUIRE(joined);
    CHECK(*joined == "joined rank " + std::to_string(t) + " of 3");
    for (int round = 0; round < 3; ++round)
      CHECK(cluster.task(t).wait_for_line("round " + std::to_string(round) + " sum", 30000ms) ==
            "round " + std::to_string(round) + " sum exact");
    CHECK(cluster.task(t).wait_for_line("done", 30000ms));
  }
}

TEST_CASE("a worker process killed between collectives fails the next all-reduce on every other process at once naming the lost task") {
  cluster_processes cluster{worker_binary, {{"worker", 3}}, 1, [](const std::string&, int task) {
    std::vector<std::string> args{"--elements", "1001", "--rounds", "2"};
    if (task == 1) {
      args.push_back("--leave-in-round");
      args.push_back("1");
    }
    return args;
  }};
  REQUIRE(cluster.ready());
  for (std::size_t t : {0, 2})
    REQUIRE(cluster.task(t).wait_for_line("round 0 sum", 30000ms) == "round 0 sum exact");
  REQUIRE(cluster.task(1).wait_for_line("waiting in round 1", 30000ms));
  auto killed = std::chrono::steady_clock::now();
  cluster.task(1).signal(SIGKILL);
  for (std::size_t t : {0, 2}) {
    INFO("task " << t);
    auto failed = cluster.task(t).wait_for_line("round 1 failed", 20000ms);
    REQUIRE(failed);
    INFO(*failed);
    CHECK(failed->find("round 1 failed: unavailable") == 0);
    CHECK(failed->find("member 1 (/job:worker/replica:0/task:1/device:CPU:0) was lost") !=
          std::string::npos);
    CHECK(failed->find("origin /job:worker/replica:0/task:1") != std::string::npos);
    CHECK(cluster.task(t).wait_exit(10000ms) == 1);
  }
  // Told by the lost connection, not by the collective's 30 s bound.
  CHECK(std::chrono::steady_clock::now() - killed < 10s);
}

TEST_CASE("a worker process killed inside a 64 MiB all-reduce leaves no other process waiting, and a failure names the lost task") {
  // 16M float32 pieces take the bulk channel; the kill lands while the ring runs (or, on a
  // fast day, after the others finished it: then they have their sum).
  cluster_processes cluster{worker_binary, {{"worker", 3}}, 1, [](const std::string&, int) {
    return std::vector<std::string>{"--elements", "16777216", "--rounds", "2"};
  }};
  REQUIRE(cluster.ready());
  REQUIRE(cluster.task(1).wait_for_line("round 1 starting", 60000ms));
  cluster.task(1).signal(SIGKILL);
  auto killed = std::chrono::steady_clock::now();
  for (std::size_t t : {0, 2}) {
    INFO("task " << t);
    auto outcome = cluster.task(t).wait_for_line("round 1 ", 20000ms);
    while (outcome && outcome->find("starting") != std::string::npos)
      outcome = cluster.task(t).wait_for_line("round 1 ", 20000ms);
    REQUIRE(outcome);
    INFO(*outcome);
    if (*outcome == "round 1 sum exact")
      continue;
    CHECK(outcome->find("round 1 failed: ") == 0);
    CHECK(outcome->find("origin /job:worker/replica:0/task:1") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - killed < 15s);
}

TEST_CASE("actorflow-train --strategy mirrored on two worker processes keeps the replicas equal and reaches the accuracy of one process on the concatenated batches") {
  const std::string train_binary = ACTORFLOW_TRAIN_BINARY;
  actorflow::test::temp_dir out;
  auto p0 = free_loopback_port(), p1 = free_loopback_port();
  REQUIRE(p0 != 0);
  REQUIRE(p1 != 0);
  REQUIRE(p0 != p1);
  auto spec = "{\"worker\": [\"127.0.0.1:" + std::to_string(p0) + "\", \"127.0.0.1:" +
              std::to_string(p1) + "\"]}";
  std::vector<std::unique_ptr<child_process>> workers;
  for (int task = 0; task < 2; ++task)
    workers.push_back(std::make_unique<child_process>(
      train_binary,
      std::vector<std::string>{"--strategy", "mirrored", "--cluster", spec, "--job", "worker",
                               "--task", std::to_string(task), "--threads", "1", "--epochs", "1",
                               "--check-replicas", "50", "--output-dir",
                               out.path() + "/w" + std::to_string(task)}));
  // One process at the global batch (2 x 128), the same shared order.
  child_process single{train_binary, {"--local", "--batch-size", "256", "--epochs", "1",
                                      "--threads", "1", "--output-dir", out.path() + "/single"}};
  auto accuracy_of = [](child_process& p) {
    auto line = p.wait_for_line("test accuracy: ", 240000ms);
    REQUIRE(line);
    return std::stod(line->substr(line->find(": ") + 2));
  };
  for (auto& w : workers)
    REQUIRE(w->wait_for_line("replicas equal after 234 steps", 240000ms));
  auto mirrored = accuracy_of(*workers[0]);
  auto alone = accuracy_of(single);
  INFO("mirrored " << mirrored << ", one process " << alone);
  CHECK(std::abs(mirrored - alone) <= 0.005);
  CHECK(mirrored > 0.7);
  for (auto& w : workers)
    CHECK(w->wait_exit(30000ms) == 0);
  CHECK(single.wait_exit(30000ms) == 0);
}

TEST_CASE("actorflow-train --strategy mirrored on three workers with gradients in several buckets ends with the variables of one process on the concatenated batches") {
  const std::string train_binary = ACTORFLOW_TRAIN_BINARY;
  actorflow::test::temp_dir out;
  auto ports = free_loopback_ports(3);
  REQUIRE(ports.size() == 3);
  std::string spec = "{\"worker\": [";
  for (std::size_t t = 0; t < ports.size(); ++t)
    spec += (t > 0 ? ", " : "") + std::string{"\"127.0.0.1:"} + std::to_string(ports[t]) + "\"";
  spec += "]}";
  // Unfused on both sides: the fused kernels round by how the batch is cut (the between-graph
  // sync test says more), and the comparison is of the all-reduce's arithmetic.
  const std::vector<std::string> unfused{"ACTORFLOW_FUSION=0"};
  std::vector<std::unique_ptr<child_process>> workers;
  for (int task = 2; task >= 0; --task)
    workers.push_back(std::make_unique<child_process>(
      train_binary,
      std::vector<std::string>{"--strategy", "mirrored", "--cluster", spec, "--job", "worker",
                               "--task", std::to_string(task), "--threads", "1", "--steps", "20",
                               "--bucket-mb", "0.1", "--check-replicas", "10", "--checkpoint-dir",
                               out.path() + "/ckpt" + std::to_string(task), "--output-dir",
                               out.path() + "/w" + std::to_string(task)},
      true, unfused));
  for (auto& w : workers) {
    // Buckets of 0.1 MiB from the last layer back: the logits' gradients with hidden2's
    // biases, hidden2's weights (128 KiB), hidden1's biases, hidden1's weights (784 KiB).
    CHECK(w->wait_for_line("gradients in 4 buckets", 60000ms));
    REQUIRE(w->wait_for_line("replicas equal after 20 steps", 120000ms));
  }
  for (auto& w : workers)
    CHECK(w->wait_exit(30000ms) == 0);
  child_process single{train_binary,
                       {"--local", "--batch-size", "384", "--steps", "20", "--threads", "1",
                        "--checkpoint-dir", out.path() + "/single", "--output-dir",
                        out.path() + "/single_out"},
                       true, unfused};
  REQUIRE(single.wait_exit(120000ms) == 0);
  auto mirrored = actorflow::read_checkpoint(out.path() + "/ckpt0/ckpt-20.afckpt");
  auto alone = actorflow::read_checkpoint(out.path() + "/single/ckpt-20.afckpt");
  REQUIRE(mirrored.ok());
  REQUIRE(alone.ok());
  REQUIRE(mirrored->entries.size() == alone->entries.size());
  double moved = 0;
  for (auto& [name, value] : alone->entries) {
    INFO("variable " << name);
    auto found = mirrored->entries.find(name);
    REQUIRE(found != mirrored->entries.end());
    REQUIRE(found->second.shape() == value.shape());
    double worst = 0;
    for (std::int64_t i = 0; i < value.num_elements(); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(found->second.data<float>()[i]) -
                                       value.data<float>()[i]));
    CHECK(worst <= 1e-5);
    // The biases start at zero: that they moved shows 20 steps trained, not two idle models.
    if (name.size() >= 6 && name.compare(name.size() - 6, 6, "biases") == 0)
      for (std::int64_t i = 0; i < value.num_elements(); ++i)
        moved = std::max(moved, std::abs(static_cast<double>(value.data<float>()[i])));
  }
  CHECK(moved > 1e-4);
}

TEST_CASE("a mirrored worker killed mid-training fails the other's step at once naming the lost task") {
  const std::string train_binary = ACTORFLOW_TRAIN_BINARY;
  actorflow::test::temp_dir out;
  auto p0 = free_loopback_port(), p1 = free_loopback_port();
  REQUIRE(p0 != 0);
  REQUIRE(p1 != 0);
  REQUIRE(p0 != p1);
  auto spec = "{\"worker\": [\"127.0.0.1:" + std::to_string(p0) + "\", \"127.0.0.1:" +
              std::to_string(p1) + "\"]}";
  std::vector<std::unique_ptr<child_process>> workers;
  for (int task = 0; task < 2; ++task)
    workers.push_back(std::make_unique<child_process>(
      train_binary,
      std::vector<std::string>{"--strategy", "mirrored", "--cluster", spec, "--job", "worker",
                               "--task", std::to_string(task), "--threads", "1", "--epochs", "3",
                               "--log-every", "10", "--output-dir",
                               out.path() + "/w" + std::to_string(task)}));
  REQUIRE(workers[1]->wait_for_line("step 20 ", 240000ms));
  workers[1]->signal(SIGKILL);
  auto killed = std::chrono::steady_clock::now();
  CHECK(workers[0]->wait_exit(20000ms) == 1);
  CHECK(std::chrono::steady_clock::now() - killed < 15s);
  auto why = workers[0]->stderr_text();
  INFO(why);
  CHECK(why.find("member 1 (/job:worker/replica:0/task:1/device:CPU:0)") != std::string::npos);
}

TEST_CASE("a mirrored run that lost a worker goes on from the chief's checkpoint once it is back, and ends as an uninterrupted run does") {
  const std::string train_binary = ACTORFLOW_TRAIN_BINARY;
  actorflow::test::temp_dir out;
  // Two workers, 2 epochs of 234 steps, a checkpoint each epoch into `checkpoints`.
  struct pair_run {
    std::string spec;
    std::vector<std::unique_ptr<child_process>> workers;
  };
  auto worker_args = [&](const std::string& spec, int task, const std::string& tag,
                         std::vector<std::string> extra) {
    std::vector<std::string> args{"--strategy", "mirrored", "--cluster", spec, "--job", "worker",
                                  "--task", std::to_string(task), "--threads", "1", "--epochs", "2",
                                  "--check-replicas", "100", "--log-every", "50", "--init-timeout",
                                  "60", "--output-dir", out.path() + "/" + tag + std::to_string(task)};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  auto start = [&](const std::string& tag, std::vector<std::string> extra) {
    auto ports = actorflow::testing::free_loopback_ports(2);
    REQUIRE(ports.size() == 2);
    pair_run run;
    run.spec = "{\"worker\": [\"127.0.0.1:" + std::to_string(ports[0]) + "\", \"127.0.0.1:" +
               std::to_string(ports[1]) + "\"]}";
    for (int task = 0; task < 2; ++task)
      run.workers.push_back(
        std::make_unique<child_process>(train_binary, worker_args(run.spec, task, tag, extra)));
    return run;
  };
  auto accuracy_of = [](child_process& p) {
    auto line = p.wait_for_line("test accuracy: ", 240000ms);
    REQUIRE(line);
    return *line;
  };
  auto whole = start("whole", {});
  auto whole_accuracy = accuracy_of(*whole.workers[0]);
  for (auto& w : whole.workers)
    CHECK(w->wait_exit(30000ms) == 0);

  for (int lost : {1, 0}) {
    INFO("worker " << lost << " lost");
    auto checkpoints = out.path() + "/checkpoints" + std::to_string(lost);
    auto run = start("lost" + std::to_string(lost), {"--checkpoint-dir", checkpoints});
    auto& survivor = *run.workers[static_cast<std::size_t>(1 - lost)];
    // Past the first epoch's checkpoint (step 234), a worker is killed and started again at
    // its address: the same flags for worker 1; the chief with --resume, to restore.
    REQUIRE(run.workers[0]->wait_for_line("step 300 ", 240000ms));
    run.workers[static_cast<std::size_t>(lost)]->signal(SIGKILL);
    auto said = survivor.wait_for_line("a worker was lost", 30000ms);
    REQUIRE(said);
    CHECK(said->find("member " + std::to_string(lost) + " (/job:worker/replica:0/task:" +
                     std::to_string(lost) + "/device:CPU:0) was lost") != std::string::npos);
    std::vector<std::string> again;
    if (lost == 0)
      again.push_back("--resume");
    again.insert(again.end(), {"--checkpoint-dir", checkpoints});
    child_process restarted{train_binary,
                            worker_args(run.spec, lost, "lost" + std::to_string(lost), again)};
    CHECK(survivor.wait_for_line("going on from step", 60000ms) == "going on from step 234");
    if (lost == 0)
      CHECK(restarted.wait_for_line("resumed from", 60000ms) ==
            "resumed from " + checkpoints + "/ckpt-234.afckpt at step 234");
    else
      CHECK(restarted.wait_for_line("going on from", 60000ms) == "going on from the chief's step 234");
    auto& chief = lost == 0 ? restarted : survivor;
    REQUIRE(chief.wait_for_line("replicas equal after 468 steps", 240000ms));
    // Restored values and slots, the same batches from step 234: the same model, exactly.
    CHECK(accuracy_of(chief) == whole_accuracy);
    // The steps run again after the restore are in the chief's metrics once, as in the
    // uninterrupted run's.
    auto chief_dir = out.path() + "/lost" + std::to_string(lost) + "0";
    CHECK(metrics_column(chief_dir + "/metrics.csv", 0) ==
          metrics_column(out.path() + "/whole0/metrics.csv", 0));
    CHECK(survivor.wait_exit(30000ms) == 0);
    CHECK(restarted.wait_exit(30000ms) == 0);
  }
}

TEST_CASE("a mirrored worker that does not come back fails the others within --init-timeout, and they say how to go on") {
  const std::string train_binary = ACTORFLOW_TRAIN_BINARY;
  actorflow::test::temp_dir out;
  auto ports = actorflow::testing::free_loopback_ports(2);
  REQUIRE(ports.size() == 2);
  auto spec = "{\"worker\": [\"127.0.0.1:" + std::to_string(ports[0]) + "\", \"127.0.0.1:" +
              std::to_string(ports[1]) + "\"]}";
  std::vector<std::unique_ptr<child_process>> workers;
  for (int task = 0; task < 2; ++task)
    workers.push_back(std::make_unique<child_process>(
      train_binary,
      std::vector<std::string>{"--strategy", "mirrored", "--cluster", spec, "--job", "worker",
                               "--task", std::to_string(task), "--threads", "1", "--epochs", "2",
                               "--log-every", "50", "--init-timeout", "2", "--checkpoint-dir",
                               out.path() + "/checkpoints", "--output-dir",
                               out.path() + "/w" + std::to_string(task)}));
  REQUIRE(workers[0]->wait_for_line("step 100 ", 240000ms));
  workers[1]->signal(SIGKILL);
  auto killed = std::chrono::steady_clock::now();
  CHECK(workers[0]->wait_exit(30000ms) == 1);
  CHECK(std::chrono::steady_clock::now() - killed < 20s);
  auto why = workers[0]->stderr_text();
  INFO(why);
  CHECK(why.find("/job:worker/replica:0/task:1") != std::string::npos);
  CHECK(why.find("run every worker again with --resume") != std::string::npos);
}

TEST_CASE("mirrored training runs its collectives over mutual TLS with the cluster token, as every connection") {
  const std::string train_binary = ACTORFLOW_TRAIN_BINARY;
  actorflow::test::temp_dir dir;
  auto certs = dir.path() + "/certs";
  {
    child_process script{ACTORFLOW_CERT_SCRIPT, {certs, "w0", "w1"}, true,
                         {"ACTORFLOW_CERT_SAN=IP:127.0.0.1"}};
    REQUIRE(script.wait_exit(60000ms) == 0);
  }
  auto token_file = dir.path() + "/token";
  {
    std::FILE* f = std::fopen(token_file.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs("a token only these workers know\n", f);
    std::fclose(f);
  }
  auto p0 = free_loopback_port(), p1 = free_loopback_port();
  REQUIRE(p0 != 0);
  REQUIRE(p1 != 0);
  REQUIRE(p0 != p1);
  auto spec = "{\"worker\": [\"127.0.0.1:" + std::to_string(p0) + "\", \"127.0.0.1:" +
              std::to_string(p1) + "\"]}";
  std::vector<std::unique_ptr<child_process>> workers;
  for (int task = 0; task < 2; ++task) {
    auto name = "w" + std::to_string(task);
    workers.push_back(std::make_unique<child_process>(
      train_binary,
      std::vector<std::string>{"--strategy", "mirrored", "--cluster", spec, "--job", "worker",
                               "--task", std::to_string(task), "--threads", "1", "--epochs", "1",
                               "--check-replicas", "100", "--output-dir", dir.path() + "/" + name,
                               "--token-file", token_file, "--tls-cert", certs + "/" + name + ".pem",
                               "--tls-key", certs + "/" + name + ".key", "--tls-ca",
                               certs + "/ca.pem"}));
  }
  for (auto& w : workers)
    REQUIRE(w->wait_for_line("replicas equal after 234 steps", 240000ms));
  auto accuracy = workers[0]->wait_for_line("test accuracy: ", 60000ms);
  REQUIRE(accuracy);
  CHECK(std::stod(accuracy->substr(accuracy->find(": ") + 2)) > 0.7);
  for (auto& w : workers)
    CHECK(w->wait_exit(30000ms) == 0);
}

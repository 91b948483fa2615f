// Runs the real actorflow-train binary, as a user would.
#include "support/processes.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>

namespace {

actorflow::testing::command_result run_train(const std::string& args) {
  return actorflow::testing::run_command(std::string{ACTORFLOW_TRAIN_BINARY} + " " + args);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in{text};
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

/// `make test` installs the data; its absence is a broken set-up, not a reason to pass.
void require_fashion_mnist() {
  INFO("Fashion-MNIST is missing: apt-get install dataset-fashion-mnist");
  REQUIRE(std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"));
}

std::string fresh_dir(const std::string& tag) {
  auto dir = std::filesystem::temp_directory_path() /
             ("af-train-" + tag + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir.string();
}

/// metrics.csv without its examples/s column (timing differs from run to run).
std::vector<std::string> metrics_without_speed(const std::string& path) {
  std::ifstream in{path};
  std::vector<std::string> rows;
  for (std::string line; std::getline(in, line);)
    rows.push_back(line.substr(0, line.rfind(',')));
  return rows;
}

std::string last_line_starting(const std::string& text, const std::string& prefix) {
  std::string found;
  for (auto& line : lines_of(text))
    if (line.rfind(prefix, 0) == 0)
      found = line;
  return found;
}

} // namespace

TEST_CASE("linreg prints step W b every 20 steps and ends near W = 0.1, b = 0.3") {
  auto r = run_train("--model linreg --threads 1");
  REQUIRE(r.exit_code == 0);
  auto lines = lines_of(r.output);
  REQUIRE(lines.size() == 51); // steps 0, 20, ..., 980 and the last one, 999
  CHECK(lines.front().rfind("0 ", 0) == 0);
  int step = 0;
  double w = 0, b = 0;
  REQUIRE(std::sscanf(lines.back().c_str(), "%d %lf %lf", &step, &w, &b) == 3);
  CHECK(step == 999);
  CHECK(w == Approx(0.1).margin(1e-3));
  CHECK(b == Approx(0.3).margin(1e-3));
}

TEST_CASE("actorflow-train with --log-device-placement prints where every node was placed") {
  auto r = run_train("--model linreg --threads 1 --steps 2 --log-device-placement");
  REQUIRE(r.exit_code == 0);
  std::size_t placed = 0;
  for (auto& line : lines_of(r.output))
    if (line.find(": /job:") != std::string::npos && line.find("/device:CPU:0") != std::string::npos)
      ++placed;
  CHECK(placed > 5);
  CHECK(run_train("--model linreg --threads 1 --steps 2").output.find(": /job:") ==
        std::string::npos);
}

TEST_CASE("actorflow-train --graph-out draws the placed graph: ps and worker devices, their _Send/_Recv pairs, or says why not") {
  auto dir = fresh_dir("graph");
  std::filesystem::create_directories(dir);
  auto r = run_train("--model linreg --threads 1 --steps 5 --output-dir " + dir + " --graph-out " + dir +
                     "/graph.svg");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::ifstream in{dir + "/graph.svg"};
  std::string svg{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  CHECK(svg.find("<svg") != std::string::npos);
  // The in-process cluster's ps holds the variables; the worker runs the model.
  CHECK(svg.find("/job:ps/replica:0/task:0/device:CPU:0") != std::string::npos);
  CHECK(svg.find("/job:worker/replica:0/task:0/device:CPU:0") != std::string::npos);
  CHECK(svg.find("_Recv") != std::string::npos);
  CHECK(svg.find("Weights/read:0") != std::string::npos);
  auto bad = run_train("--model linreg --threads 1 --steps 1 --output-dir " + dir +
                       " --graph-out " + dir + "/graph.jpeg");
  CHECK(bad.exit_code == 1);
  CHECK(bad.output.find("graph.jpeg") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("ACTORFLOW_VERBOSE=1 logs the devices a session finds, as TensorFlow does") {
  ::setenv("ACTORFLOW_VERBOSE", "1", 1);
  auto r = run_train("--model linreg --threads 1 --steps 2 --local");
  ::unsetenv("ACTORFLOW_VERBOSE");
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("actorflow: session 1 on the master: device "
                      "/job:localhost/replica:0/task:0/device:CPU:0") != std::string::npos);
  // What the CPU can do and the GEMM kernels chosen for it (devices/cpu/blas_kernels.hpp).
  CHECK(r.output.find("actorflow: cpu: ") != std::string::npos);
  CHECK(r.output.find("; gemm: OpenBLAS ") != std::string::npos);
  CHECK(run_train("--model linreg --threads 1 --steps 2 --local").output.find("actorflow: ") ==
        std::string::npos);
}

TEST_CASE("a diverging run stops with an error naming the step instead of training on NaN") {
  auto r = run_train("--model linreg --threads 1 --learning-rate 100 --steps 200");
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("actorflow-train: the loss is inf at step") != std::string::npos);
  CHECK(r.output.find("lower --learning-rate") != std::string::npos);
}

TEST_CASE("bad flags, missing data and unwritable directories give one line and a non-zero exit") {
  auto unknown = run_train("--epoch 3");
  CHECK(unknown.exit_code == 2);
  CHECK(lines_of(unknown.output).size() == 1);
  // Quoted, as given: "--epochs", a flag the usage could mention, holds "--epoch" too.
  CHECK(unknown.output.find("unknown flag '--epoch'") != std::string::npos);

  auto missing = run_train("--data-dir /nonexistent/fashion --output-dir " + fresh_dir("missing"));
  CHECK(missing.exit_code != 0);
  CHECK(lines_of(missing.output).size() == 1);
  CHECK(missing.output.find("/nonexistent/fashion") != std::string::npos);

  auto unwritable = run_train("--output-dir /proc/actorflow-out");
  CHECK(unwritable.exit_code != 0);
  CHECK(lines_of(unwritable.output).size() == 1);
  CHECK(unwritable.output.find("/proc/actorflow-out") != std::string::npos);

  // Only damaged checkpoints: --resume says so, naming the file, and does not start afresh.
  auto damaged = fresh_dir("damaged");
  std::filesystem::create_directories(damaged);
  {
    std::FILE* f = std::fopen((damaged + "/ckpt-7.afckpt").c_str(), "wb");
    REQUIRE(f != nullptr);
    std::fputs("not a checkpoint", f);
    std::fclose(f);
  }
  auto resumed = run_train("--local --epochs 1 --resume --checkpoint-dir " + damaged +
                           " --output-dir " + damaged + "/out");
  CHECK(resumed.exit_code != 0);
  CHECK(resumed.output.find("every checkpoint in '" + damaged + "' is damaged") != std::string::npos);
  CHECK(resumed.output.find("ckpt-7.afckpt") != std::string::npos);
  std::filesystem::remove_all(damaged);

  auto help = run_train("--help");
  CHECK(help.exit_code == 0);
  CHECK(help.output.find("--checkpoint-dir") != std::string::npos);
}

TEST_CASE("the MLP trains, reports throughput and accuracy, and writes its metrics and curve") {
  require_fashion_mnist();
  auto out = fresh_dir("mlp");
  auto r = run_train("--epochs 1 --threads 2 --output-dir " + out);
  REQUIRE(r.exit_code == 0);
  auto lines = lines_of(r.output);
  REQUIRE(lines.size() >= 2);
  double examples_per_second = 0, accuracy = 0;
  REQUIRE(std::sscanf(lines[lines.size() - 2].c_str(), "examples/s: %lf", &examples_per_second) == 1);
  REQUIRE(std::sscanf(lines.back().c_str(), "test accuracy: %lf", &accuracy) == 1);
  CHECK(examples_per_second > 0);
  // One epoch of SGD at 0.1 gets well past chance (0.1) on Fashion-MNIST.
  CHECK(accuracy > 0.75);
  CHECK(std::filesystem::file_size(out + "/metrics.csv") > 100);
  CHECK(std::filesystem::file_size(out + "/curve.svg") > 500);
  std::filesystem::remove_all(out);
}

TEST_CASE("towers on two test devices train like towers soft-placed on the CPU and like mirrored towers") {
  // SPEC's several GPUs with the test device standing in for them: a tower per device, the
  // variables and the averaged update on the CPU. Without GPUs, --gpus soft-places the towers
  // on the CPU; the same kernels make both runs reach the same accuracy.
  auto out = fresh_dir("towers");
  auto on_test = run_train("--model mlp --gpus 2 --tower-device-type TEST --epochs 1 --threads 2 "
                           "--log-device-placement --output-dir " + out);
  INFO(on_test.output.substr(on_test.output.size() > 2000 ? on_test.output.size() - 2000 : 0));
  REQUIRE(on_test.exit_code == 0);
  CHECK(on_test.output.find("tower_1/MatMul: /job:localhost/replica:0/task:0/device:TEST:1") !=
        std::string::npos);
  CHECK(on_test.output.find("tower_0/MatMul: /job:localhost/replica:0/task:0/device:TEST:0") !=
        std::string::npos);
  auto soft = run_train("--model mlp --gpus 2 --epochs 1 --threads 2 --output-dir " + out);
  REQUIRE(soft.exit_code == 0);
  auto accuracy = last_line_starting(on_test.output, "test accuracy: ");
  CHECK_FALSE(accuracy.empty());
  CHECK(accuracy == last_line_starting(soft.output, "test accuracy: "));
  // MirroredStrategy's way: a copy of the variables per tower and the gradients all-reduced.
  // The mean of two gradients is the same number either way, so the run ends the same.
  auto mirrored = run_train("--model mlp --gpus 2 --tower-device-type TEST --all-reduce --epochs 1 "
                            "--threads 2 --log-device-placement --output-dir " + out);
  REQUIRE(mirrored.exit_code == 0);
  CHECK(mirrored.output.find("all_reduce_0_1: /job:localhost/replica:0/task:0/device:TEST:1") !=
        std::string::npos);
  CHECK(last_line_starting(mirrored.output, "test accuracy: ") == accuracy);
  std::filesystem::remove_all(out);
}

namespace {

/// The "test accuracy: X" actorflow-train prints last.
double final_test_accuracy(const std::string& output) {
  double accuracy = 0;
  REQUIRE(std::sscanf(last_line_starting(output, "test accuracy: ").c_str(), "test accuracy: %lf",
                      &accuracy) == 1);
  return accuracy;
}

} // namespace

TEST_CASE("the CNN trains three epochs on the CPU to at least 0.89 test accuracy") {
  require_fashion_mnist();
  auto out = fresh_dir("cnn");
  // One thread: the convolutions' GEMMs are small, and OpenBLAS threads cost more than they
  // give on them.
  auto r = run_train("--model cnn --local --epochs 3 --threads 1 --log-every 1000 --output-dir " + out);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(final_test_accuracy(r.output) >= 0.89);
  std::filesystem::remove_all(out);
}

TEST_CASE("the RNN, a while loop over image rows, trains three epochs to at least 0.80 test accuracy") {
  require_fashion_mnist();
  auto out = fresh_dir("rnn");
  auto r = run_train("--model rnn --local --epochs 3 --threads 1 --log-every 1000 --output-dir " + out);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(final_test_accuracy(r.output) >= 0.80);
  // On the in-process cluster the loop runs on the workers, the variables on the ps.
  auto cluster = run_train("--model rnn --epochs 1 --threads 1 --log-every 1000 "
                           "--log-device-placement --output-dir " + out);
  INFO(cluster.output);
  REQUIRE(cluster.exit_code == 0);
  CHECK(cluster.output.find("tower_0/rnn/Merge: /job:worker/replica:0/task:0/device:CPU:0") !=
        std::string::npos);
  CHECK(cluster.output.find("cell/recurrent_weights: /job:ps/replica:0/task:0/device:CPU:0") !=
        std::string::npos);
  std::filesystem::remove_all(out);
}

TEST_CASE("training resumed from a checkpoint ends exactly like an uninterrupted run") {
  require_fashion_mnist();
  auto whole = fresh_dir("whole");
  auto parts = fresh_dir("parts");
  auto common = std::string{" --threads 1 --batch-size 256 --optimizer momentum --learning-rate 0.05"};
  auto uninterrupted = run_train("--epochs 2 --output-dir " + whole + common);
  REQUIRE(uninterrupted.exit_code == 0);
  auto first = run_train("--epochs 1 --checkpoint-dir " + parts + "/ckpt --output-dir " + parts + common);
  REQUIRE(first.exit_code == 0);
  auto resumed = run_train("--epochs 2 --resume --checkpoint-dir " + parts + "/ckpt --output-dir " +
                           parts + common);
  REQUIRE(resumed.exit_code == 0);
  CHECK(resumed.output.find("resumed from") != std::string::npos);
  CHECK(last_line_starting(resumed.output, "test accuracy:") ==
        last_line_starting(uninterrupted.output, "test accuracy:"));
  // The resumed run went on with the first one's metrics: the whole run's rows, and the first
  // run's last row (its step 234, the end of its single epoch) besides.
  auto continued = metrics_without_speed(parts + "/metrics.csv");
  auto end_of_first = std::find_if(continued.begin(), continued.end(),
                                   [](const std::string& row) { return row.rfind("234,", 0) == 0; });
  REQUIRE(end_of_first != continued.end());
  continued.erase(end_of_first);
  CHECK(continued == metrics_without_speed(whole + "/metrics.csv"));
  std::filesystem::remove_all(whole);
  std::filesystem::remove_all(parts);
}

TEST_CASE("linreg takes --checkpoint-dir, --resume and --output-dir as the classifiers do") {
  auto whole = fresh_dir("linreg-whole");
  auto parts = fresh_dir("linreg-parts");
  auto uninterrupted = run_train("--model linreg --threads 1 --output-dir " + whole);
  REQUIRE(uninterrupted.exit_code == 0);
  auto first = run_train("--model linreg --threads 1 --steps 400 --checkpoint-dir " + parts +
                         "/ckpt --output-dir " + parts);
  REQUIRE(first.exit_code == 0);
  CHECK(std::filesystem::exists(parts + "/ckpt/ckpt-400.afckpt"));
  // The resumed run must draw the curve again.
  std::filesystem::remove(parts + "/curve.svg");
  auto resumed = run_train("--model linreg --threads 1 --resume --checkpoint-dir " + parts +
                           "/ckpt --output-dir " + parts);
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  // The same last "step W b" line, the same metrics rows, and a curve.
  CHECK(lines_of(resumed.output).back() == lines_of(uninterrupted.output).back());
  CHECK(metrics_without_speed(parts + "/metrics.csv") == metrics_without_speed(whole + "/metrics.csv"));
  CHECK(std::filesystem::exists(parts + "/curve.svg"));
  std::filesystem::remove_all(whole);
  std::filesystem::remove_all(parts);
}

TEST_CASE("the MLP trains with fusion on as with ACTORFLOW_FUSION=0: the first 20 losses and the test accuracy") {
  require_fashion_mnist();
  auto on = fresh_dir("fusion-on"), off = fresh_dir("fusion-off");
  auto common = std::string{" --local --epochs 1 --threads 1 --log-every 1 --log-device-placement"};
  auto fused = run_train("--output-dir " + on + common);
  REQUIRE(fused.exit_code == 0);
  auto plain = actorflow::testing::run_command("ACTORFLOW_FUSION=0 " +
                                               std::string{ACTORFLOW_TRAIN_BINARY} +
                                               " --output-dir " + off + common);
  REQUIRE(plain.exit_code == 0);
  // Every layer of the MLP fuses: two MatMul + bias + Relu, the logits' MatMul + bias.
  // Backward: both hidden layers' input-gradient GEMM, ReluGrad and bias gradient.
  int relu_layers = 0, bias_layers = 0, relu_grads = 0;
  for (auto& line : lines_of(fused.output)) {
    if (line.rfind("fused ", 0) == 0 &&
        line.find("= _FusedMatMulReluGrad(") != std::string::npos &&
        line.find("fused_ops=[ReluGrad,BiasAddGrad]") != std::string::npos)
      ++relu_grads;
    if (line.rfind("fused ", 0) != 0 || line.find("= _FusedMatMul(") == std::string::npos)
      continue;
    if (line.find("fused_ops=[BiasAdd,Relu]") != std::string::npos)
      ++relu_layers;
    else if (line.find("fused_ops=[BiasAdd]") != std::string::npos)
      ++bias_layers;
  }
  CHECK(relu_layers >= 2);
  CHECK(bias_layers >= 1);
  CHECK(relu_grads >= 2);
  CHECK(plain.output.find("_FusedMatMul") == std::string::npos);
  // step,epoch,loss,accuracy: the same within float32 rounding for the first 20 steps, and the
  // same test accuracy after the epoch. Not every step of the epoch: the fused GEMM adds the
  // bias before its products (beta = 1, bias_epilogue.hpp), which rounds unlike adding it
  // after, and SGD amplifies that. On OpenBLAS's Cooperlake kernels (AMD family 25 model 17)
  // the losses were equal to 6 digits through step 39, 4e-4 apart at step 50, and the test
  // accuracies 0.8259 and 0.8252; two unfused runs on its Haswell and Cooperlake kernels part
  // the same way. A wrong bias, Relu or mask shows at the first steps.
  auto a = metrics_without_speed(on + "/metrics.csv");
  auto b = metrics_without_speed(off + "/metrics.csv");
  REQUIRE(a.size() == b.size());
  REQUIRE(a.size() > 21);
  CHECK(final_test_accuracy(fused.output) == Approx(final_test_accuracy(plain.output)).margin(0.005));
  for (std::size_t i = 1; i <= 20; ++i) {
    double step_a = 0, epoch_a = 0, loss_a = 0, acc_a = 0, step_b = 0, epoch_b = 0, loss_b = 0, acc_b = 0;
    REQUIRE(std::sscanf(a[i].c_str(), "%lf,%lf,%lf,%lf", &step_a, &epoch_a, &loss_a, &acc_a) == 4);
    REQUIRE(std::sscanf(b[i].c_str(), "%lf,%lf,%lf,%lf", &step_b, &epoch_b, &loss_b, &acc_b) == 4);
    INFO("fused: " << a[i] << " unfused: " << b[i]);
    CHECK(step_a == step_b);
    CHECK(std::abs(loss_a - loss_b) <= 1e-4 * (1.0 + std::abs(loss_b)));
    CHECK(std::abs(acc_a - acc_b) <= 0.01);
  }
  std::filesystem::remove_all(on);
  std::filesystem::remove_all(off);
}

TEST_CASE("word2vec between-graph: two worker processes train the tables shared on two ps processes, and every process ends by itself", "[apps][sparse]") {
  using actorflow::testing::child_process;
  using namespace std::chrono_literals;
  REQUIRE(std::filesystem::exists("/usr/share/dictd/gcide.dict.dz"));
  auto cluster = actorflow::testing::start_ps_cluster(ACTORFLOW_WORKER_BINARY, 2, 2);
  REQUIRE(cluster.ready);
  const auto& spec = cluster.spec;
  auto dir = fresh_dir("word2vec-between-graph");
  // Few steps: the vectors' quality is the in-process test's (below); this one is the sharing.
  auto worker = [&](int task) {
    return std::make_unique<child_process>(
      ACTORFLOW_TRAIN_BINARY,
      std::vector<std::string>{"--model", "word2vec", "--cluster", spec, "--job", "worker", "--task",
                               std::to_string(task), "--threads", "1", "--steps", "1500",
                               "--vocabulary", "5000", "--log-every", "100000", "--output-dir",
                               dir + "/w" + std::to_string(task)});
  };
  auto second = worker(1);
  auto chief = worker(0);
  auto output = chief->read_all_lines(240000ms);
  INFO(output << chief->stderr_text());
  REQUIRE(chief->wait_exit(20000ms) == 0);
  auto second_output = second->read_all_lines(60000ms);
  INFO(second_output << second->stderr_text());
  CHECK(second->wait_exit(20000ms) == 0);
  CHECK(output.find("its part (1 in 2) of the corpus") != std::string::npos);
  CHECK(output.find("wordnet score: ") != std::string::npos);
  CHECK(output.find("nearest to red: ") != std::string::npos);
  // One shared global step: the chief's own 1500 and what the other had done by then.
  auto global_at = output.find("global step: ");
  REQUIRE(global_at != std::string::npos);
  auto global = std::stoll(output.substr(global_at + 13));
  CHECK(global > 1500);
  CHECK(global <= 3000);
  for (auto& p : cluster.ps) {
    CHECK(p->wait_exit(20000ms) == 0);
    CHECK(p->stderr_text().find("all 2 tasks of job 'worker' finished; stopping") != std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("word2vec on GCIDE learns vectors whose neighbours WordNet relates more often than random vectors' do, through sparse updates on the in-process cluster's ps", "[apps][sparse]") {
  INFO("GCIDE or WordNet is missing: apt-get install dict-gcide wordnet-base");
  REQUIRE(std::filesystem::exists("/usr/share/dictd/gcide.dict.dz"));
  REQUIRE(std::filesystem::exists("/usr/share/wordnet/data.noun"));
  auto dir = fresh_dir("word2vec");
  // TF's word2vec_basic: 100000 steps of 128 pairs, SGD at 1.0, NCE over 64 candidates; the
  // tables on the ps task, looked up from the worker.
  auto r = run_train("--model word2vec --threads 1 --log-every 50000 --output-dir " + dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto lines = lines_of(r.output);
  std::string score_line, red_line;
  for (auto& line : lines) {
    if (line.rfind("wordnet score: ", 0) == 0)
      score_line = line;
    if (line.rfind("nearest to red: ", 0) == 0)
      red_line = line;
  }
  REQUIRE_FALSE(score_line.empty());
  auto score = std::stod(score_line.substr(15));
  auto chance = std::stod(score_line.substr(score_line.find("random vectors: ") + 16));
  CHECK(chance > 0);
  CHECK(score > 2 * chance);
  // Colours come out near a colour.
  bool colour = false;
  for (auto* near : {"yellow", "white", "black", "brown", "green", "blue"})
    colour = colour || red_line.find(near) != std::string::npos;
  CHECK(colour);
  CHECK(std::filesystem::exists(dir + "/metrics.csv"));
}

#include "train/options.hpp"

#include <catch2/catch.hpp>

#include <vector>

using namespace actorflow;
using namespace actorflow::train;

namespace {
result<train_options> parse(std::vector<const char*> args) {
  args.insert(args.begin(), "actorflow-train");
  return parse_train_options(static_cast<int>(args.size()), args.data());
}
} // namespace

TEST_CASE("defaults train the MLP for three epochs of SGD at 0.1 with batch 128") {
  auto o = parse({});
  REQUIRE(o.ok());
  CHECK(o->model == "mlp");
  CHECK(o->epochs == 3);
  CHECK(o->batch_size == 128);
  CHECK(o->learning_rate == 0.1);
  CHECK(o->optimizer == "sgd");
}

TEST_CASE("the CNN defaults to Adam at 0.001 on batches of 32, each overridable") {
  auto cnn = parse({"--model", "cnn"});
  REQUIRE(cnn.ok());
  CHECK(cnn->optimizer == "adam");
  CHECK(cnn->learning_rate == 0.001);
  CHECK(cnn->batch_size == 32);
  auto given = parse({"--model=cnn", "--optimizer=momentum", "--batch-size=64"});
  REQUIRE(given.ok());
  CHECK(given->optimizer == "momentum");
  CHECK(given->learning_rate == 0.01);
  CHECK(given->batch_size == 64);
}

TEST_CASE("the RNN defaults to Adam at 0.001 on batches of 128") {
  auto rnn = parse({"--model", "rnn"});
  REQUIRE(rnn.ok());
  CHECK(rnn->optimizer == "adam");
  CHECK(rnn->learning_rate == 0.001);
  CHECK(rnn->batch_size == 128);
}

TEST_CASE("linreg defaults to the classic learning rate of 0.5 unless one is given") {
  CHECK(parse({"--model", "linreg"})->learning_rate == 0.5);
  CHECK(parse({"--model=linreg", "--learning-rate=0.25"})->learning_rate == 0.25);
}

TEST_CASE("every flag is parsed in both spellings") {
  auto o = parse({"--epochs", "2", "--batch-size=64", "--optimizer", "adam", "--seed", "7",
                  "--threads", "1", "--checkpoint-dir", "/tmp/x", "--resume", "--output-dir=out",
                  "--data-dir", "d", "--keep-checkpoints", "5", "--log-every", "10", "--steps", "30",
                  "--step-timeout=3", "--data-order", "shard"});
  REQUIRE(o.ok());
  CHECK(o->data_order == "shard");
  CHECK(parse({})->data_order == "global");
  CHECK(o->epochs == 2);
  CHECK(o->batch_size == 64);
  CHECK(o->optimizer == "adam");
  CHECK(o->seed == 7);
  CHECK(o->threads == 1);
  CHECK(o->checkpoint_dir == "/tmp/x");
  CHECK(o->resume);
  CHECK(o->output_dir == "out");
  CHECK(o->data_dir == "d");
  CHECK(o->keep_checkpoints == 5);
  CHECK(o->log_every == 10);
  CHECK(o->steps == 30);
  CHECK(o->step_timeout_seconds == 3);
  CHECK(parse({})->step_timeout_seconds == 10);
}

TEST_CASE("bad flags give one message naming the flag") {
  auto unknown = parse({"--epoch", "3"});
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message().find("'--epoch'") != std::string::npos);
  auto not_a_number = parse({"--epochs", "three"});
  REQUIRE_FALSE(not_a_number.ok());
  CHECK(not_a_number.error().message().find("--epochs") != std::string::npos);
  CHECK(not_a_number.error().message().find("'three'") != std::string::npos);
  // 100000 threads would abort the process (std::system_error) instead of saying so.
  auto threads = parse({"--threads", "100000"});
  REQUIRE_FALSE(threads.ok());
  CHECK(threads.error().message() == "--threads: must be at most 1024, got 100000");
  auto no_time = parse({"--step-timeout", "0"});
  REQUIRE_FALSE(no_time.ok());
  CHECK(no_time.error().message().find("--step-timeout") != std::string::npos);
  auto zero = parse({"--batch-size", "0"});
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.error().message().find("--batch-size") != std::string::npos);
  auto optimizer = parse({"--optimizer", "rmsprop"});
  REQUIRE_FALSE(optimizer.ok());
  CHECK(optimizer.error().message().find("sgd, momentum, adam") != std::string::npos);
  auto missing = parse({"--seed"});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message().find("needs a value") != std::string::npos);
  auto resume = parse({"--resume"});
  REQUIRE_FALSE(resume.ok());
  CHECK(resume.error().message().find("--checkpoint-dir") != std::string::npos);
  auto rate = parse({"--learning-rate", "-1"});
  REQUIRE_FALSE(rate.ok());
  auto many_gpus = parse({"--gpus", "17"});
  REQUIRE_FALSE(many_gpus.ok());
  CHECK(many_gpus.error().message() == "--gpus: 17 towers; at most 16");
  auto gpus_and_local = parse({"--gpus", "2", "--local"});
  REQUIRE_FALSE(gpus_and_local.ok());
  CHECK(gpus_and_local.error().message().find("not with --local") != std::string::npos);
  auto coordinated_picture = parse({"--coordinator", "--cluster", "ps=h:1;worker=h:2", "--graph-out", "g.svg"});
  REQUIRE_FALSE(coordinated_picture.ok());
  CHECK(coordinated_picture.error().message().find("--graph-out") != std::string::npos);
  auto lone_all_reduce = parse({"--all-reduce"});
  REQUIRE_FALSE(lone_all_reduce.ok());
  CHECK(lone_all_reduce.error().message().find("give --gpus N") != std::string::npos);
  auto order = parse({"--data-order", "random"});
  REQUIRE_FALSE(order.ok());
  CHECK(order.error().message() == "--data-order: 'random' is not one of shard, global");
  auto tower_type = parse({"--gpus", "2", "--tower-device-type", "TPU"});
  REQUIRE_FALSE(tower_type.ok());
  CHECK(tower_type.error().message() == "--tower-device-type: 'TPU' is neither GPU nor TEST");
}

TEST_CASE("the mixed-precision flag takes float32 or bfloat16 and names anything else") {
  CHECK(parse({})->mixed_precision.empty()); // ACTORFLOW_MIXED_PRECISION, else float32
  CHECK(parse({"--mixed-precision", "bfloat16"})->mixed_precision == "bfloat16");
  CHECK(parse({"--mixed-precision=float32"})->mixed_precision == "float32");
  auto bad = parse({"--mixed-precision", "float16"});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message() == "--mixed-precision: 'float16' is not one of float32, bfloat16");
}

TEST_CASE("help lists every flag") {
  auto usage = train_usage();
  for (auto flag : {"--model", "--epochs", "--batch-size", "--learning-rate", "--optimizer",
                    "--seed", "--threads", "--checkpoint-dir", "--resume", "--output-dir",
                    "--data-dir", "--keep-checkpoints", "--log-every", "--steps", "--step-timeout",
                    "--data-order", "--mixed-precision", "--help"})
    CHECK(usage.find(flag) != std::string::npos);
  CHECK(parse({"--help"})->help);
  // It names every way of training, not only the one in this process.
  CHECK(usage.find("in one process") == std::string::npos);
  CHECK(usage.find("--coordinator") < usage.find("\n\n"));
}

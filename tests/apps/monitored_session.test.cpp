// train::monitored_session (TensorFlow's MonitoredTrainingSession) in one process: hooks around
// every step (extra fetches, stop at a step, NaN loss), the chief's checkpoints every N steps and
// at the end, and a session created again on the same directory going on from the latest.
#include "train/monitored_session.hpp"

#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <tuple>

using namespace actorflow;

namespace {

/// y = 0.1 x + 0.3 fitted by SGD, the global step counted by the train op.
struct linreg {
  graph g;
  output x, y, loss, train;
  actorflow::variable w, b, global_step;

  explicit linreg(double learning_rate) {
    x = ops::placeholder(g, dtype::float32, {-1}, "x");
    y = ops::placeholder(g, dtype::float32, {-1}, "y");
    w = ops::variable(g, ops::constant(g, std::vector<float>{0.f}, {1}), "w");
    b = ops::variable(g, ops::constant(g, std::vector<float>{0.f}, {1}), "b");
    global_step = ops::variable(g, ops::constant(g, std::int64_t{0}), "global_step");
    loss = ops::reduce_mean(ops::square(ops::sub(ops::add(ops::mul(x, w), b), y)));
    gradient_descent_optimizer sgd{learning_rate};
    auto step = sgd.minimize(loss, {w, b});
    train = ops::group(g, {step, ops::assign_add(global_step, ops::constant(g, std::int64_t{1}))},
                       "train");
    REQUIRE(g.status().ok());
  }

  feed_list batch() const {
    std::vector<float> xs{0.f, 0.25f, 0.5f, 0.75f, 1.f}, ys;
    for (auto v : xs)
      ys.push_back(0.1f * v + 0.3f);
    return {{x, tensor::from_vector<float>(xs)}, {y, tensor::from_vector<float>(ys)}};
  }
};

/// A user hook: fetches the loss every step, as TF's SessionRunArgs.
struct loss_recorder : train::session_run_hook {
  output loss;
  std::vector<double>* seen;
  bool* created;
  loss_recorder(output l, std::vector<double>* s, bool* c) : loss(l), seen(s), created(c) {}
  status after_create_session(session&) override {
    *created = true;
    return {};
  }
  result<train::session_run_args> before_run(train::session_run_context&) override {
    return train::session_run_args{{loss}, {}};
  }
  status after_run(train::session_run_context&, const std::vector<tensor>& values) override {
    seen->push_back(values.at(0).scalar_value<double>());
    return {};
  }
};

} // namespace

TEST_CASE("monitored_session: hooks around every step, stop at a step, checkpoints every N steps, and a new session goes on from the latest") {
  actorflow::test::temp_dir dir;
  std::vector<double> losses;
  bool created = false;
  std::vector<std::string> said;
  {
    linreg model{0.5};
    train::monitored_session_options o;
    o.global_step = model.global_step;
    o.checkpoint_dir = dir.path();
    o.save_checkpoint_steps = 25;
    o.say = [&](const std::string& line) { said.push_back(line); };
    o.hooks.push_back(train::stop_at_step_hook(model.global_step.read, 60));
    o.hooks.push_back(std::make_unique<loss_recorder>(model.loss, &losses, &created));
    auto s = train::monitored_session::create(model.g, std::move(o));
    REQUIRE(s.ok());
    CHECK(created);
    CHECK((*s)->global_step() == 0);
    int steps = 0;
    while (!(*s)->should_stop() && steps < 1000) {
      auto r = (*s)->run({model.loss}, model.batch(), {model.train});
      REQUIRE(r.ok());
      REQUIRE(r->size() == 1);
      ++steps;
    }
    CHECK(steps == 60);
    // Read within the last step: before or after its own increment.
    CHECK((*s)->global_step() >= 59);
    REQUIRE(losses.size() == 60);
    CHECK(losses.back() < losses.front() / 100);
    REQUIRE((*s)->close().ok());
    CHECK((*s)->global_step() == 60);
  }
  CHECK(said.empty());
  for (auto step : {25, 50, 60})
    CHECK(std::filesystem::exists(dir.path() + "/ckpt-" + std::to_string(step) + ".afckpt"));

  // A chief created again on the directory restores step 60 and trains on to 80.
  linreg again{0.5};
  train::monitored_session_options o;
  o.global_step = again.global_step;
  o.checkpoint_dir = dir.path();
  o.say = [&](const std::string& line) { said.push_back(line); };
  o.hooks.push_back(train::stop_at_step_hook(again.global_step.read, 80));
  auto s = train::monitored_session::create(again.g, std::move(o));
  REQUIRE(s.ok());
  CHECK((*s)->global_step() == 60);
  REQUIRE(said.size() == 1);
  CHECK(said[0] == "restored " + dir.path() + "/ckpt-60.afckpt: training goes on from global step 60");
  auto first = (*s)->run({again.loss}, again.batch(), {again.train});
  REQUIRE(first.ok());
  CHECK(first->at(0).scalar_value<double>() == Approx(losses.back()).epsilon(0.5));
  int steps = 1;
  while (!(*s)->should_stop() && steps < 1000) {
    REQUIRE((*s)->run({}, again.batch(), {again.train}).ok());
    ++steps;
  }
  CHECK(steps == 20);
  REQUIRE((*s)->close().ok());
  CHECK(std::filesystem::exists(dir.path() + "/ckpt-80.afckpt"));
}

TEST_CASE("monitored_session: a NaN loss ends the run with an error naming the global step, and a session without a global step is refused") {
  linreg diverging{1e20};
  train::monitored_session_options o;
  o.global_step = diverging.global_step;
  o.hooks.push_back(train::nan_loss_hook(diverging.loss, diverging.global_step.read));
  auto s = train::monitored_session::create(diverging.g, std::move(o));
  REQUIRE(s.ok());
  status failed;
  for (int i = 0; i < 20 && failed.ok(); ++i)
    failed = (*s)->run({}, diverging.batch(), {diverging.train}).error();
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.message().rfind("the loss is ", 0) == 0);
  CHECK(failed.message().find(" at global step ") != std::string::npos);

  linreg model{0.1};
  auto refused = train::monitored_session::create(model.g, train::monitored_session_options{});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message().find("global_step") != std::string::npos);
}

TEST_CASE("monitored_session: summary_dir gets a metrics row every N global steps and TensorBoard events, and a restored chief goes on with them") {
  actorflow::test::temp_dir dir;
  auto summaries = dir.path() + "/summaries";
  // The rows of metrics.csv: (step, loss, examples/s).
  auto rows = [&] {
    std::vector<std::tuple<std::int64_t, double, double>> out;
    std::ifstream in{summaries + "/metrics.csv"};
    std::string line;
    std::getline(in, line);
    CHECK(line == "step,epoch,loss,accuracy,examples_per_second");
    while (std::getline(in, line)) {
      std::stringstream fields{line};
      std::string step, epoch, loss, accuracy, rate;
      std::getline(fields, step, ',');
      std::getline(fields, epoch, ',');
      std::getline(fields, loss, ',');
      std::getline(fields, accuracy, ',');
      std::getline(fields, rate, ',');
      out.emplace_back(std::stoll(step), std::stod(loss), std::stod(rate));
    }
    return out;
  };
  auto train_to = [&](std::int64_t last_step) {
    linreg model{0.5};
    train::monitored_session_options o;
    o.global_step = model.global_step;
    o.checkpoint_dir = dir.path() + "/ckpt";
    o.summary_dir = summaries;
    o.save_summaries_steps = 10;
    o.summary_loss = model.loss;
    o.examples_per_step = 5;
    o.say = [](const std::string&) {};
    o.hooks.push_back(train::stop_at_step_hook(model.global_step.read, last_step));
    auto s = train::monitored_session::create(model.g, std::move(o));
    REQUIRE(s.ok());
    while (!(*s)->should_stop())
      REQUIRE((*s)->run({}, model.batch(), {model.train}).ok());
    REQUIRE((*s)->close().ok());
  };
  train_to(30);
  auto first = rows();
  REQUIRE(first.size() == 3);
  for (std::size_t i = 1; i < first.size(); ++i) {
    INFO("row " << i);
    // The global step as the step read it: at least 10 after the row before.
    CHECK(std::get<0>(first[i]) >= std::get<0>(first[i - 1]) + 10);
    CHECK(std::get<1>(first[i]) < std::get<1>(first[i - 1]));
    CHECK(std::get<2>(first[i]) > 0);
  }
  bool events = false;
  for (auto& name : actorflow::test::directory_entries(summaries))
    events = events || name.rfind("events.out.tfevents.", 0) == 0;
  CHECK(events);

  // Restored at 30: the rows so far are kept, the new ones follow them.
  train_to(50);
  auto both = rows();
  REQUIRE(both.size() >= first.size() + 2);
  for (std::size_t i = 0; i < first.size(); ++i)
    CHECK(std::get<0>(both[i]) == std::get<0>(first[i]));
  CHECK(std::get<0>(both[first.size()]) >= 30);
  CHECK(std::get<0>(both.back()) >= 40);
}

TEST_CASE("monitored_session: save_checkpoint_secs saves the chief's checkpoint once the seconds have passed, at the step it is at") {
  actorflow::test::temp_dir dir;
  linreg model{0.5};
  train::monitored_session_options o;
  o.global_step = model.global_step;
  o.checkpoint_dir = dir.path();
  o.save_checkpoint_secs = 0.5;
  o.say = [](const std::string&) {};
  auto s = train::monitored_session::create(model.g, std::move(o));
  REQUIRE(s.ok());
  for (int i = 0; i < 3; ++i)
    REQUIRE((*s)->run({}, model.batch(), {model.train}).ok());
  // Three quick steps: no checkpoint yet. Past the seconds, the next step saves one.
  CHECK(actorflow::test::directory_entries(dir.path()).empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  REQUIRE((*s)->run({}, model.batch(), {model.train}).ok());
  // Two more quick steps, then the last checkpoint at close.
  for (int i = 0; i < 2; ++i)
    REQUIRE((*s)->run({}, model.batch(), {model.train}).ok());
  REQUIRE((*s)->close().ok());
  CHECK(std::filesystem::exists(dir.path() + "/ckpt-4.afckpt"));
  CHECK(std::filesystem::exists(dir.path() + "/ckpt-6.afckpt"));
  for (auto early : {1, 2, 3, 5})
    CHECK_FALSE(std::filesystem::exists(dir.path() + "/ckpt-" + std::to_string(early) + ".afckpt"));
}

#include "train/trainer.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

using namespace actorflow;
using namespace actorflow::train;

namespace {

trainer::step_function losses(std::vector<double> values, std::vector<std::int64_t>* ran) {
  return [values, ran](std::int64_t step) -> result<step_report> {
    ran->push_back(step);
    step_report r;
    r.step = step;
    r.loss = values.at(static_cast<std::size_t>(step - 1));
    r.examples = 10;
    r.seconds = 0.01;
    return r;
  };
}

} // namespace

TEST_CASE("a trainer runs the steps after the first up to the last, every hook after each") {
  std::vector<std::int64_t> ran, seen;
  std::vector<std::unique_ptr<training_hook>> hooks;
  hooks.push_back(make_observer_hook([&](const step_report& r) { seen.push_back(r.step); }));
  trainer t{std::move(hooks)};
  // Resumed after step 2 of 5.
  REQUIRE(t.run(2, 5, losses({1, 1, 1, 1, 1}, &ran)).ok());
  CHECK(ran == std::vector<std::int64_t>{3, 4, 5});
  CHECK(seen == ran);
  CHECK(t.last().step == 5);
}

TEST_CASE("a NaN or infinite loss stops training with an error naming the step") {
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    std::vector<std::int64_t> ran;
    std::vector<std::unique_ptr<training_hook>> hooks;
    hooks.push_back(make_finite_loss_hook());
    trainer t{std::move(hooks)};
    auto s = t.run(0, 10, losses({0.5, 0.4, bad, 0.3, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1}, &ran));
    REQUIRE_FALSE(s.ok());
    CHECK(s.message().find("at step 3; lower --learning-rate") != std::string::npos);
    CHECK(ran.size() == 3); // nothing ran after the bad step
  }
}

TEST_CASE("checkpoints are saved every N steps, and a failing save stops training") {
  std::vector<std::int64_t> saved, ran;
  std::vector<std::unique_ptr<training_hook>> hooks;
  hooks.push_back(make_checkpoint_hook(
    [&](std::int64_t step) -> status {
      saved.push_back(step);
      if (step == 6)
        return make_error(errc::resource_exhausted, "disk full");
      return {};
    },
    3));
  trainer t{std::move(hooks)};
  auto s = t.run(0, 9, losses(std::vector<double>(9, 1.0), &ran));
  REQUIRE_FALSE(s.ok());
  CHECK(s.message() == "disk full");
  CHECK(saved == std::vector<std::int64_t>{3, 6});
  CHECK(ran.size() == 6);
}

TEST_CASE("throughput counts examples over step time") {
  throughput_meter meter;
  step_report r;
  r.examples = 100;
  r.seconds = 0.5;
  CHECK(meter.add(r) == Approx(200));
  CHECK(meter.add(r) == Approx(200));
  CHECK(meter.overall() == Approx(200));
}

#include "devices/gradient_accumulator.hpp"

#include <catch2/catch.hpp>

using namespace actorflow;
using outcome = gradient_accumulator::offer_outcome;

namespace {

tensor grad(std::vector<float> values) { return tensor::from_vector<float>(values); }

} // namespace

TEST_CASE("a round averages exactly replicas_to_aggregate gradients, then the step advances") {
  gradient_accumulator acc{"w", dtype::float32, tensor_shape{2}, 2};
  CHECK(acc.offer(0, 0, grad({1, 2})).value() == outcome::accepted);
  CHECK_FALSE(acc.ready());
  CHECK_FALSE(acc.take_average().has_value());
  CHECK(acc.global_step() == 0);
  CHECK(acc.offer(0, 1, grad({3, 6})).value() == outcome::accepted);
  REQUIRE(acc.ready());
  auto average = acc.take_average();
  REQUIRE(average.has_value());
  CHECK(average->to_vector<float>() == std::vector<float>{2, 4});
  CHECK(acc.global_step() == 1);
  CHECK(acc.pending() == 0);
  // The next round starts from zero.
  CHECK(acc.offer(1, 0, grad({5, 5})).value() == outcome::accepted);
  CHECK(acc.offer(1, 1, grad({7, 7})).value() == outcome::accepted);
  CHECK(acc.take_average()->to_vector<float>() == std::vector<float>{6, 6});
}

TEST_CASE("a round's loss and accuracy are the means of its gradients' batches, with their count") {
  gradient_accumulator acc{"w", dtype::float32, tensor_shape{1}, 2};
  CHECK(acc.last_round().gradients == 0);
  CHECK(acc.offer(0, 0, grad({1}), 0, 2.0, 0.5).value() == outcome::accepted);
  // A stale or duplicate gradient's batch is not part of the round.
  CHECK(acc.offer(0, 0, grad({1}), 0, 100.0, 1.0).value() == outcome::duplicate);
  CHECK(acc.offer(0, 1, grad({3}), 0, 1.0, 0.25).value() == outcome::accepted);
  REQUIRE(acc.take_average().has_value());
  CHECK(acc.last_round().loss == Approx(1.5));
  CHECK(acc.last_round().accuracy == Approx(0.375));
  CHECK(acc.last_round().gradients == 2);
  CHECK(acc.offer(0, 1, grad({3}), 0, 100.0, 1.0).value() == outcome::stale);
  // A short round counts only those that came; the sums start again each round.
  CHECK(acc.offer(1, 0, grad({5}), 0, 4.0, 1.0).value() == outcome::accepted);
  REQUIRE(acc.take_short_average().has_value());
  CHECK(acc.last_round().loss == Approx(4.0));
  CHECK(acc.last_round().accuracy == Approx(1.0));
  CHECK(acc.last_round().gradients == 1);
}

TEST_CASE("backup workers: the round closes with the first K, the late gradients are stale") {
  // Three workers, two gradients per round (total_num_replicas 3, replicas_to_aggregate 2).
  gradient_accumulator acc{"w", dtype::float32, tensor_shape{1}, 2};
  CHECK(acc.offer(0, 2, grad({10})).value() == outcome::accepted);
  CHECK(acc.offer(0, 0, grad({20})).value() == outcome::accepted);
  CHECK(acc.take_average()->to_vector<float>() == std::vector<float>{15});
  // Worker 1, the slowest, computed at step 0 too: its gradient is dropped, nobody waited.
  CHECK(acc.offer(0, 1, grad({1000})).value() == outcome::stale);
  CHECK(acc.stale_dropped() == 1);
  CHECK(acc.pending() == 0);
  CHECK(acc.global_step() == 1);
}

TEST_CASE("a round short of gradients closes with those it has when asked, and counts as short") {
  gradient_accumulator acc{"w", dtype::float32, tensor_shape{2}, 3};
  // An empty round has nothing to close.
  CHECK_FALSE(acc.take_short_average().has_value());
  CHECK(acc.offer(0, 0, grad({2, 4})).value() == outcome::accepted);
  CHECK(acc.offer(0, 2, grad({4, 8})).value() == outcome::accepted);
  auto average = acc.take_short_average();
  REQUIRE(average.has_value());
  // The mean of the two that came, not a third of their sum.
  CHECK(average->to_vector<float>() == std::vector<float>{3, 6});
  CHECK(acc.global_step() == 1);
  CHECK(acc.pending() == 0);
  CHECK(acc.short_rounds() == 1);
  // The lost worker's late gradient for that round is stale; a complete round is not short.
  CHECK(acc.offer(0, 1, grad({100, 100})).value() == outcome::stale);
  for (int worker = 0; worker < 3; ++worker)
    CHECK(acc.offer(1, worker, grad({1, 1})).value() == outcome::accepted);
  CHECK_FALSE(acc.take_short_average().has_value());
  CHECK(acc.take_average().has_value());
  CHECK(acc.short_rounds() == 1);
}

TEST_CASE("a worker that restarted fences off its earlier life: a late gradient from it is dropped") {
  constexpr std::uint64_t first_life = 0xA, second_life = 0xB, chief = 0xC;
  gradient_accumulator acc{"w", dtype::float32, tensor_shape{1}, 2};
  CHECK(acc.offer(0, 0, grad({1}), chief).value() == outcome::accepted);
  CHECK(acc.offer(0, 1, grad({3}), first_life).value() == outcome::accepted);
  CHECK(acc.take_average()->to_vector<float>() == std::vector<float>{2});
  // Worker 1 restarts (its first life frozen, not dead) and offers round 1.
  CHECK(acc.offer(1, 1, grad({5}), second_life).value() == outcome::accepted);
  // The first life resumes: its gradient for the same round is dropped as retired, not
  // counted as worker 1's, and so is any later one.
  CHECK(acc.offer(1, 1, grad({1000}), first_life).value() == outcome::retired);
  CHECK(acc.offer(1, 1, grad({1000}), first_life).value() == outcome::retired);
  CHECK(acc.retired_dropped() == 2);
  CHECK(acc.offer(1, 0, grad({7}), chief).value() == outcome::accepted);
  CHECK(acc.take_average()->to_vector<float>() == std::vector<float>{6}); // (5 + 7) / 2
  // Without incarnations nothing is fenced.
  CHECK(acc.offer(2, 1, grad({1})).value() == outcome::accepted);
}

TEST_CASE("a worker contributes once per round") {
  gradient_accumulator acc{"w", dtype::float32, tensor_shape{1}, 2};
  CHECK(acc.offer(0, 0, grad({1})).value() == outcome::accepted);
  CHECK(acc.offer(0, 0, grad({1})).value() == outcome::duplicate);
  CHECK(acc.duplicates_dropped() == 1);
  CHECK_FALSE(acc.ready());
}

TEST_CASE("gradients of another shape or dtype, or from the future, are refused unchanged") {
  gradient_accumulator acc{"layer/w", dtype::float32, tensor_shape{2}, 1};
  auto wrong_shape = acc.offer(0, 0, grad({1, 2, 3}));
  REQUIRE_FALSE(wrong_shape.ok());
  CHECK(wrong_shape.error().message().find("'layer/w'") != std::string::npos);
  auto wrong_type = acc.offer(0, 0, tensor::from_vector<double>({1, 2}));
  REQUIRE_FALSE(wrong_type.ok());
  auto future = acc.offer(3, 0, grad({1, 2}));
  REQUIRE_FALSE(future.ok());
  CHECK(future.error().code() == errc::failed_precondition);
  CHECK(acc.pending() == 0);
  gradient_accumulator ints{"steps", dtype::int64, tensor_shape{}, 1};
  REQUIRE_FALSE(ints.offer(0, 0, tensor::scalar<std::int64_t>(1)).ok());
}

TEST_CASE("float32 gradients are summed in float64, so the average is the exact mean") {
  gradient_accumulator acc{"w", dtype::float32, tensor_shape{1}, 3};
  // 2^24 + 1 is not a float32; a float32 running sum would lose the ones.
  acc.offer(0, 0, grad({16777216.f})).value();
  acc.offer(0, 1, grad({1.f})).value();
  acc.offer(0, 2, grad({2.f})).value();
  CHECK(acc.take_average()->to_vector<double>().at(0) == Approx((16777216.0 + 3.0) / 3.0));
  gradient_accumulator doubles{"d", dtype::float64, tensor_shape{1}, 2, 7};
  CHECK(doubles.global_step() == 7);
  doubles.offer(7, 0, tensor::from_vector<double>({0.1})).value();
  doubles.offer(7, 1, tensor::from_vector<double>({0.2})).value();
  CHECK(doubles.take_average()->to_vector<double>().at(0) == Approx(0.15));
}

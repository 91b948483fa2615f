// The collective rendezvous: members meet per (group, step), the last completes for all in
// rank order, bad joins are refused, and a member can leave before its group completes.
#include "devices/collective.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace actorflow;

namespace {

struct test_member {
  int value = 0;
};

collective_member at(int rank, int size = 3, std::int64_t step = 1, std::string group = "g") {
  return {std::move(group), step, rank, size};
}

} // namespace

TEST_CASE("the last member to join completes the group with every member in rank order") {
  collective_rendezvous<test_member> rendezvous;
  std::vector<int> seen;
  auto complete = [&](std::vector<test_member>& by_rank) {
    for (auto& m : by_rank)
      seen.push_back(m.value);
  };
  REQUIRE(rendezvous.join(at(2), {30}, complete).ok());
  REQUIRE(rendezvous.join(at(0), {10}, complete).ok());
  // Another step of the same group is another group.
  REQUIRE(rendezvous.join(at(0, 3, 2), {99}, complete).ok());
  CHECK(seen.empty());
  CHECK(rendezvous.pending_groups() == 2);
  REQUIRE(rendezvous.join(at(1), {20}, complete).ok());
  CHECK(seen == std::vector<int>{10, 20, 30});
  CHECK(rendezvous.pending_groups() == 1);
}

TEST_CASE("a rank out of range, a rank taken twice and a different size are refused") {
  collective_rendezvous<test_member> rendezvous;
  auto never = [](std::vector<test_member>&) { FAIL("completed"); };
  auto out_of_range = rendezvous.join(at(3), {1}, never);
  REQUIRE_FALSE(out_of_range.ok());
  CHECK(out_of_range.message() == "collective 'g' (step 1): rank 3 of 3");
  CHECK(rendezvous.pending_groups() == 0);
  REQUIRE(rendezvous.join(at(0), {1}, never).ok());
  auto twice = rendezvous.join(at(0), {2}, never);
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.message().find("rank 0 joined twice") != std::string::npos);
  auto other_size = rendezvous.join(at(1, 4), {2}, never);
  REQUIRE_FALSE(other_size.ok());
  CHECK(other_size.message().find("disagree on the size (3 and 4)") != std::string::npos);
  CHECK(rendezvous.pending_groups() == 1);
}

TEST_CASE("a member that leaves is handed back and its group forgets it") {
  collective_rendezvous<test_member> rendezvous;
  bool completed = false;
  auto complete = [&](std::vector<test_member>&) { completed = true; };
  REQUIRE(rendezvous.join(at(0, 2), {7}, complete).ok());
  auto left = rendezvous.leave(at(0, 2));
  REQUIRE(left.has_value());
  CHECK(left->value == 7);
  CHECK(rendezvous.pending_groups() == 0);
  // Leaving twice, or a group that completed, hands nothing back.
  CHECK_FALSE(rendezvous.leave(at(0, 2)).has_value());
  REQUIRE(rendezvous.join(at(0, 2), {1}, complete).ok());
  REQUIRE(rendezvous.join(at(1, 2), {2}, complete).ok());
  CHECK(completed);
  CHECK_FALSE(rendezvous.leave(at(1, 2)).has_value());
}

namespace {

struct step_member {
  int value = 0;
  std::function<void(status)> done;
};

} // namespace

TEST_CASE("a member joined in a step leaves with an error when the step is aborted") {
  collective_rendezvous<step_member> rendezvous;
  step_cancellation cancellation;
  status outcome;
  int calls = 0;
  auto done = [&](status s) {
    outcome = std::move(s);
    ++calls;
  };
  auto never = [](std::vector<step_member>&) { FAIL("completed"); };
  rendezvous.join_in_step(at(0, 2), {1, done}, never, &cancellation);
  CHECK(calls == 0);
  cancellation.cancel_all();
  CHECK(calls == 1);
  CHECK(outcome.code() == errc::aborted);
  CHECK(outcome.message().find("collective 'g' (step 1)") != std::string::npos);
  CHECK(rendezvous.pending_groups() == 0);
  // Joining once the step is aborted leaves at once.
  rendezvous.join_in_step(at(1, 2), {2, done}, never, &cancellation);
  CHECK(calls == 2);
  CHECK(outcome.code() == errc::aborted);
  CHECK(rendezvous.pending_groups() == 0);
  // A refused join reports its error to the member.
  step_cancellation fresh;
  rendezvous.join_in_step(at(5, 2), {3, done}, never, &fresh);
  CHECK(calls == 3);
  CHECK(outcome.code() == errc::invalid_argument);
}

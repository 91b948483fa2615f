#include "devices/commit_gate.hpp"

#include <catch2/catch.hpp>

#include <optional>
#include <vector>

using namespace actorflow;

TEST_CASE("a commit gate arms once every expected update is held, then releases them all to apply") {
  int armed = 0;
  commit_gate gate{2, [&] { ++armed; }};
  std::vector<std::optional<bool>> released(3);
  gate.hold([&](bool commit) { released[0] = commit; });
  CHECK(armed == 0);
  CHECK_FALSE(gate.armed());
  gate.hold([&](bool commit) { released[1] = commit; });
  CHECK(armed == 1);
  CHECK(gate.armed());
  CHECK_FALSE(released[0].has_value());
  gate.commit();
  CHECK(released[0] == true);
  CHECK(released[1] == true);
  CHECK(gate.committed());
  // Decided: a late hold applies at once; a cancel changes nothing.
  gate.hold([&](bool commit) { released[2] = commit; });
  CHECK(released[2] == true);
  gate.cancel();
  CHECK(gate.committed());
  CHECK(armed == 1);
}

TEST_CASE("a cancelled commit gate releases what it holds, and what comes later, to fail") {
  int armed = 0;
  commit_gate gate{3, [&] { ++armed; }};
  std::optional<bool> first, late;
  gate.hold([&](bool commit) { first = commit; });
  gate.cancel();
  CHECK(first == false);
  gate.hold([&](bool commit) { late = commit; });
  CHECK(late == false);
  gate.commit();
  CHECK_FALSE(gate.committed());
  CHECK(armed == 0);
}

TEST_CASE("a failure of the device's own cancels a gate that is not prepared, and leaves a prepared one to the coordinator") {
  std::optional<bool> early;
  commit_gate unprepared{2, [] {}};
  unprepared.hold([&](bool commit) { early = commit; });
  unprepared.cancel_unless_prepared();
  CHECK(early == false);

  // Prepared: the coordinator may already have committed the other devices.
  std::vector<std::optional<bool>> held(2);
  commit_gate prepared{2, [] {}};
  prepared.hold([&](bool commit) { held[0] = commit; });
  prepared.hold([&](bool commit) { held[1] = commit; });
  prepared.cancel_unless_prepared();
  CHECK_FALSE(held[0].has_value());
  CHECK_FALSE(held[1].has_value());
  prepared.commit();
  CHECK(held[0] == true);
  CHECK(held[1] == true);

  // Its decision may also be an abort.
  std::optional<bool> aborted;
  commit_gate decided{1, [] {}};
  decided.hold([&](bool commit) { aborted = commit; });
  decided.cancel_unless_prepared();
  CHECK_FALSE(aborted.has_value());
  decided.cancel();
  CHECK(aborted == false);
}

// The set-up and order of a device library's collectives across tasks
// (devices/device_collectives.hpp), with a fake library in place of NCCL, over two real
// collective members on CAF's test scheduler: rank 0's id reaches the other member through the
// group under the reserved instance, once per (group, device); collectives are issued in the
// order rank 0 placed them whatever order the others reach them; an offer that ends lets its
// communicators go and a group formed again makes new ones; an aborted collective aborts its
// communicator and fails what waits on it and what comes after, naming the group and device;
// a rank 0 that cannot make an id, or whose communicator broke, fails the others at once.
#include "actors/testing.hpp"
#include "devices/device_collectives.hpp"
#include "support/offered_group.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace actorflow;
using Catch::Matchers::Contains;

namespace {

std::string gpu(int index) {
  return "/job:worker/replica:0/task:" + std::to_string(index) + "/device:GPU:0";
}

/// What the fake library was asked, in order, across every member (one thread runs them all).
struct fake_library {
  std::vector<std::string> calls;
  int ids_made = 0;
  /// make_id's error, when set.
  std::optional<status> no_id;
};

class fake_communicator final : public device_communicator {
public:
  fake_communicator(std::shared_ptr<fake_library> lib, int rank, std::string id)
    : lib_(std::move(lib)), rank_(rank), id_(std::move(id)) {}
  // As NCCL's: an aborted communicator is freed by its abort.
  ~fake_communicator() override {
    if (!aborted_)
      lib_->calls.push_back(name() + " destroyed");
  }
  void abort(const status& why) override {
    aborted_ = true;
    lib_->calls.push_back(name() + " aborted: " + why.message());
  }
  std::string name() const { return "rank " + std::to_string(rank_) + " of " + id_; }
  const std::string& id() const { return id_; }

private:
  std::shared_ptr<fake_library> lib_;
  int rank_;
  std::string id_;
  bool aborted_ = false;
};

class fake_factory final : public device_communicator_factory {
public:
  explicit fake_factory(std::shared_ptr<fake_library> lib) : lib_(std::move(lib)) {}
  std::string library() const override { return "FAKE"; }
  // Not a multiple of the 8-byte words the group carries it in.
  std::size_t id_bytes() const override { return 13; }
  result<std::vector<std::uint8_t>> make_id() override {
    if (lib_->no_id)
      return *lib_->no_id;
    auto text = "fake id " + std::to_string(++lib_->ids_made) + "....";
    lib_->calls.push_back("make " + text);
    return std::vector<std::uint8_t>(text.begin(), text.end());
  }
  void join(std::vector<std::uint8_t> id, int rank, int size,
            std::function<void(result<std::shared_ptr<device_communicator>>)> done) override {
    std::string text(id.begin(), id.end());
    lib_->calls.push_back("rank " + std::to_string(rank) + " of " + std::to_string(size) +
                          " joins " + text);
    done(std::shared_ptr<device_communicator>{std::make_shared<fake_communicator>(lib_, rank, text)});
  }

private:
  std::shared_ptr<fake_library> lib_;
};

/// Collectives started through `collectives` for the members of `group`, and how each went.
struct driver {
  device_collectives& collectives;
  testing::offered_group& group;
  std::shared_ptr<fake_library> lib = std::make_shared<fake_library>();
  /// Per rank: the instances issued, in order, and the id of the communicator they went on.
  std::map<int, std::vector<std::int64_t>> issued;
  std::map<int, std::vector<std::string>> ids;
  /// Per rank: the errors of the collectives that failed, in order.
  std::map<int, std::vector<status>> failed;

  void start(int rank, std::int64_t instance) {
    collectives.issue(
      group.member(rank), group.devices[static_cast<std::size_t>(rank)], instance,
      std::make_shared<fake_factory>(lib),
      [this, rank, instance](const std::shared_ptr<device_communicator>& comm) -> status {
        issued[rank].push_back(instance);
        ids[rank].push_back(dynamic_cast<fake_communicator&>(*comm).id());
        return {};
      },
      [this, rank](status why) { failed[rank].push_back(std::move(why)); });
  }

  void run() { group.deterministic->run_all(); }
};

/// How many of the members' trace lines say `line`.
std::size_t count(const std::vector<std::string>& lines, const std::string& line) {
  return static_cast<std::size_t>(std::count(lines.begin(), lines.end(), line));
}

std::string finished(int rank, std::int64_t run, std::int64_t instance) {
  return "rank " + std::to_string(rank) + " finished instance " +
         std::to_string((run << graph_collective_instance_bits) | instance);
}

} // namespace

TEST_CASE("device collectives make one communicator per group and device from the id rank 0 broadcasts under the reserved instance, and keep it") {
  testing::deterministic_system sys;
  device_collectives collectives{task_collectives()};
  testing::offered_group group{sys, 2, "replicas", gpu};
  driver d{collectives, group};
  d.start(0, 1);
  d.start(1, 1);
  d.run();
  CHECK(d.failed.empty());
  CHECK(d.lib->calls == std::vector<std::string>{"make fake id 1....", "rank 0 of 2 joins fake id 1....",
                                                 "rank 1 of 2 joins fake id 1...."});
  // Later collectives, runs and instances, on the same communicators.
  for (int r = 0; r < 2; ++r) {
    d.start(r, 1);
    d.start(r, 2);
  }
  d.run();
  CHECK(d.failed.empty());
  CHECK(d.lib->ids_made == 1);
  CHECK(collectives.kept() == 2);
  for (int r = 0; r < 2; ++r) {
    CHECK(d.issued[r] == std::vector<std::int64_t>{1, 1, 2});
    CHECK(d.ids[r] == std::vector<std::string>(3, "fake id 1...."));
  }
  // The id went under the reserved instance, once; each collective's place under its run's key.
  auto trace = group.trace();
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(count(trace, finished(r, 1, bootstrap_collective_instance)) == 1);
    CHECK(count(trace, finished(r, 2, bootstrap_collective_instance)) == 0);
    CHECK(count(trace, finished(r, 1, 1)) == 1);
    CHECK(count(trace, finished(r, 2, 1)) == 1);
    CHECK(count(trace, finished(r, 1, 2)) == 1);
  }
}

TEST_CASE("device collectives issue in the order rank 0 placed them whatever order the other members reach them") {
  testing::deterministic_system sys;
  device_collectives collectives{task_collectives()};
  testing::offered_group group{sys, 2, "replicas", gpu};
  driver d{collectives, group};
  // Rank 1 reaches instance 3 first, before rank 0 reached any.
  d.start(1, 3);
  d.run();
  CHECK(d.issued[1].empty());
  d.start(0, 1);
  d.start(0, 2);
  d.run();
  CHECK(d.issued[0] == std::vector<std::int64_t>{1, 2});
  CHECK(d.issued[1].empty());
  d.start(0, 3);
  d.start(1, 2);
  d.run();
  // Placed third, waiting for the first two.
  CHECK(d.issued[1].empty());
  d.start(1, 1);
  d.run();
  CHECK(d.failed.empty());
  CHECK(d.issued[0] == std::vector<std::int64_t>{1, 2, 3});
  CHECK(d.issued[1] == std::vector<std::int64_t>{1, 2, 3});
}

TEST_CASE("an offer that ends lets its communicators go, and the group formed again makes new ones from a new id") {
  testing::deterministic_system sys;
  device_collectives collectives{task_collectives()};
  auto lib = std::make_shared<fake_library>();
  {
    testing::offered_group group{sys, 2, "replicas", gpu, 5};
    driver d{collectives, group, lib};
    d.start(0, 1);
    d.start(1, 1);
    d.run();
    REQUIRE(d.failed.empty());
    CHECK(collectives.kept() == 2);
    lib->calls.clear();
    group.withdraw();
    CHECK(collectives.kept() == 0);
    CHECK(lib->calls == std::vector<std::string>{"rank 0 of fake id 1.... destroyed",
                                                 "rank 1 of fake id 1.... destroyed"});
  }
  // Replaced: a group formed again (its own key) offered under the same name while the first
  // one's offers still live.
  testing::offered_group first{sys, 2, "replicas", gpu, 6};
  driver before{collectives, first, lib};
  before.start(0, 1);
  before.start(1, 1);
  before.run();
  REQUIRE(before.failed.empty());
  lib->calls.clear();
  testing::offered_group again{sys, 2, "replicas", gpu, 7};
  CHECK(lib->calls == std::vector<std::string>{"rank 0 of fake id 2.... destroyed",
                                               "rank 1 of fake id 2.... destroyed"});
  CHECK(collectives.kept() == 0);
  driver after{collectives, again, lib};
  after.start(0, 1);
  after.start(1, 1);
  after.run();
  CHECK(after.failed.empty());
  CHECK(after.ids[0] == std::vector<std::string>{"fake id 3...."});
  CHECK(after.ids[1] == std::vector<std::string>{"fake id 3...."});
  // The first group's offers end later: its entries are gone already, the new ones stay.
  first.withdraw();
  CHECK(collectives.kept() == 2);
}

TEST_CASE("an aborted device collective aborts its communicator, fails what waits on it and every later collective there, naming the group and the device") {
  testing::deterministic_system sys;
  device_collectives collectives{task_collectives()};
  testing::offered_group group{sys, 2, "replicas", gpu};
  driver d{collectives, group};
  d.start(0, 1);
  d.start(1, 1);
  d.run();
  REQUIRE(d.failed.empty());
  // Rank 1 waits for rank 0 to place instance 2 when its step is aborted.
  d.start(1, 2);
  d.run();
  collectives.abort(5, gpu(1), make_error(errc::aborted, "the step was aborted"));
  CHECK(d.lib->calls.back() == "rank 1 of fake id 1.... aborted: the step was aborted");
  d.start(0, 2);
  d.run();
  REQUIRE(d.failed[1].size() == 1);
  CHECK(d.failed[1][0].code() == errc::aborted);
  CHECK(d.failed[1][0].message() == "the step was aborted");
  // Later: at once, naming the group and the device; rank 0's, whose communicator stands
  // (its peer's collectives there end at their bound), still placed and issued.
  d.start(1, 3);
  d.start(0, 3);
  d.run();
  REQUIRE(d.failed[1].size() == 2);
  CHECK_THAT(d.failed[1][1].message(),
             Contains("the communicator of collective group 5 (rank 1 of 2) on " + gpu(1) +
                      " broke earlier: the step was aborted"));
  CHECK(d.issued[0] == std::vector<std::int64_t>{1, 2, 3});
  CHECK(d.issued[1] == std::vector<std::int64_t>{1});
  // Aborted once, and no later collective waits in the group for a part never started.
  CHECK(std::count_if(d.lib->calls.begin(), d.lib->calls.end(), [](const std::string& call) {
          return call.find("aborted") != std::string::npos;
        }) == 1);
  CHECK(count(group.trace(), finished(1, 1, 3)) == 1);
}

TEST_CASE("members hear at once that rank 0 could not make an id, or that its communicator broke, instead of waiting for their bound") {
  testing::deterministic_system sys;
  device_collectives collectives{task_collectives()};
  SECTION("no id") {
    testing::offered_group group{sys, 2, "replicas", gpu};
    driver d{collectives, group};
    d.lib->no_id = make_error(errc::unavailable, "no FAKE here");
    d.start(0, 1);
    d.start(1, 1);
    d.run();
    REQUIRE(d.failed[0].size() == 1);
    CHECK(d.failed[0][0].code() == errc::unavailable);
    CHECK(d.failed[0][0].message() == "setting up the FAKE communicator of collective group 5 "
                                      "(rank 0 of 2) on " + gpu(0) + ": no FAKE here");
    REQUIRE(d.failed[1].size() == 1);
    CHECK_THAT(d.failed[1][0].message(),
               Contains("setting up the FAKE communicator of collective group 5 (rank 1 of 2) on " +
                        gpu(1) + ": rank 0 could not make its id"));
    CHECK(d.lib->calls.empty());
    CHECK(d.issued.empty());
  }
  SECTION("rank 0's communicator broke") {
    testing::offered_group group{sys, 2, "replicas", gpu};
    driver d{collectives, group};
    d.start(0, 1);
    d.start(1, 1);
    d.run();
    REQUIRE(d.failed.empty());
    collectives.abort(5, gpu(0), make_error(errc::deadline_exceeded, "too slow"));
    d.start(0, 2);
    d.start(1, 2);
    d.run();
    REQUIRE(d.failed[0].size() == 1);
    REQUIRE(d.failed[1].size() == 1);
    CHECK_THAT(d.failed[1][0].message(),
               Contains("learning from rank 0 when to issue instance 2 of collective group 5 (rank 1 "
                        "of 2) on " + gpu(1) + ": rank 0's communicator is broken"));
    // Rank 1's own communicator is aborted too: it can no longer keep rank 0's order.
    CHECK(d.lib->calls.back() == "rank 1 of fake id 1.... aborted: " + d.failed[1][0].message());
  }
}

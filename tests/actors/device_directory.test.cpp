// The master's device directory, without an actor system: null actor handles stand for devices.
#include "actors/device_directory.hpp"

#include <catch2/catch.hpp>

using namespace actorflow;

namespace {

protocol::device_list listing(std::vector<std::string> names, std::string bulk = {}) {
  protocol::device_list l;
  for (auto& n : names)
    l.devices.emplace_back(n, protocol::device_actor{});
  l.bulk_address = std::move(bulk);
  return l;
}

std::vector<std::string> names_of(const device_directory& d) {
  std::vector<std::string> out;
  for (auto& n : d.names())
    out.push_back(n.to_string());
  return out;
}

} // namespace

TEST_CASE("a directory lists the devices of every task sorted by job, task and device") {
  device_directory d;
  REQUIRE(d.add_task("w1", listing({"/job:worker/replica:0/task:1/device:CPU:0"})).ok());
  REQUIRE(d.add_task("ps", listing({"/job:ps/replica:0/task:0/device:CPU:1",
                                    "/job:ps/replica:0/task:0/device:CPU:0"},
                                   "127.0.0.1:9000"))
            .ok());
  d.finish();
  CHECK(names_of(d) == std::vector<std::string>{"/job:ps/replica:0/task:0/device:CPU:0",
                                                "/job:ps/replica:0/task:0/device:CPU:1",
                                                "/job:worker/replica:0/task:1/device:CPU:0"});
  CHECK(d.has("/job:ps/replica:0/task:0/device:CPU:1"));
  CHECK_FALSE(d.has("/job:ps/replica:0/task:1/device:CPU:0"));
  auto peers = d.peers();
  CHECK(peers.devices.size() == 3);
  CHECK(peers.bulk_addresses.size() == 2);
  CHECK(peers.bulk_addresses.at("/job:ps/replica:0/task:0/device:CPU:0") == "127.0.0.1:9000");
  d.clear();
  CHECK(d.empty());
}

TEST_CASE("a task reporting a partial device name is refused whole, naming the task") {
  device_directory d;
  auto s = d.add_task("/job:ps/replica:0/task:0 at h:1",
                      listing({"/job:ps/replica:0/task:0/device:CPU:0", "/cpu:1"}));
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == errc::data_loss);
  CHECK(s.message().find("task /job:ps/replica:0/task:0 at h:1") != std::string::npos);
  CHECK(s.message().find("'/cpu:1'") != std::string::npos);
  CHECK(d.empty());
}

TEST_CASE("unpinned nodes go to the session's task, else the master's own, else worker 0") {
  device_directory d;
  REQUIRE(d.add_task("a", listing({"/job:canshu/replica:0/task:0/device:CPU:0",
                                   "/job:gongzuo/replica:0/task:1/device:CPU:0"}))
            .ok());
  d.finish();
  CHECK(d.default_task("/job:gongzuo/task:1", "").to_string() == "/job:gongzuo/task:1");
  CHECK(d.default_task("", "/job:gongzuo/replica:0/task:1").to_string() ==
        "/job:gongzuo/replica:0/task:1");
  // No task of its own: no "worker" job here, so the first job's task 0.
  CHECK(d.default_task("", "").to_string() == "/job:canshu/replica:0/task:0");
  REQUIRE(d.add_task("b", listing({"/job:worker/replica:0/task:0/device:CPU:0"})).ok());
  d.finish();
  CHECK(d.default_task("", "").to_string() == "/job:worker/replica:0/task:0");
}

TEST_CASE("the tasks of a spec without known devices are the ones still to reach") {
  auto spec = cluster_spec::parse("ps=127.0.0.1:2221,127.0.0.1:2222;worker=127.0.0.1:2223");
  REQUIRE(spec.ok());
  device_directory d;
  REQUIRE(d.add_task("w", listing({"/job:worker/replica:0/task:0/device:CPU:0"})).ok());
  auto left = d.unreached(*spec);
  REQUIRE(left.ok());
  REQUIRE(left->size() == 2);
  CHECK(left->at(0).where == "/job:ps/replica:0/task:0 at 127.0.0.1:2221");
  CHECK(left->at(1).port == 2222);
  CHECK(left->at(1).host == "127.0.0.1");
}

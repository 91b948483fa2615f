// The task service in one process, under CAF's deterministic test scheduler: no network.
#include "actors/task_service.hpp"

#include "actors/protocols/task.hpp"
#include "actors/testing.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

using namespace actorflow;
using namespace actorflow::protocol;

namespace {

/// Asks `task` for its devices, running the scheduler until it has answered.
device_list ask_devices(testing::deterministic_system& sys, const task_actor& task) {
  caf::scoped_actor self{sys.system()};
  self->send(task, devices_atom::value);
  sys.run_all();
  device_list answer;
  bool answered = false;
  self->receive([&](device_list& list) {
    answer = std::move(list);
    answered = true;
  });
  REQUIRE(answered);
  return answer;
}

} // namespace

TEST_CASE("a task service lists its devices by full name with their actors", "[actors][task]") {
  testing::deterministic_system sys;
  task_service_options options;
  options.threads = 1;
  options.cpu_device_count = 2;
  options.test_device_count = 1;
  auto task = spawn_task_service(sys.system(), "worker", 3, options);
  sys.run_all();

  auto list = ask_devices(sys, task);
  REQUIRE(list.devices.size() == 3);
  CHECK(list.devices[0].first == "/job:worker/replica:0/task:3/device:CPU:0");
  CHECK(list.devices[1].first == "/job:worker/replica:0/task:3/device:CPU:1");
  CHECK(list.devices[2].first == "/job:worker/replica:0/task:3/device:TEST:0");
  CHECK(list.devices[0].second != nullptr);
  CHECK(list.devices[1].second != nullptr);
  CHECK(list.devices[0].second != list.devices[1].second);
  // One kernel set per device type, for the master to place over.
  REQUIRE(list.kernels.size() == 2);
  CHECK(list.kernels[0].first == "CPU");
  CHECK(list.kernels[1].first == "TEST");
  auto& cpu_kernels = list.kernels[0].second;
  CHECK(std::find(cpu_kernels.begin(), cpu_kernels.end(), "MatMul:float32") != cpu_kernels.end());

  // Asked again, the same actors: devices live as long as the task, not per client.
  auto again = ask_devices(sys, task);
  CHECK(again.devices == list.devices);

  protocol::send_stop(task);
  sys.run_all();
}

TEST_CASE("a task service has one CPU device when asked for none", "[actors][task]") {
  testing::deterministic_system sys;
  task_service_options options;
  options.threads = 1;
  options.cpu_device_count = 0;
  auto task = spawn_task_service(sys.system(), "ps", 0, options);
  sys.run_all();
  auto list = ask_devices(sys, task);
  REQUIRE(list.devices.size() == 1);
  CHECK(list.devices[0].first == "/job:ps/replica:0/task:0/device:CPU:0");
  protocol::send_stop(task);
  sys.run_all();
}

TEST_CASE("stopping a task service ends it and every one of its device actors",
          "[actors][task]") {
  testing::deterministic_system sys;
  task_service_options options;
  options.threads = 1;
  options.cpu_device_count = 2;
  auto task = spawn_task_service(sys.system(), "worker", 0, options);
  sys.run_all();
  auto list = ask_devices(sys, task);
  REQUIRE(list.devices.size() == 2);

  caf::scoped_actor self{sys.system()};
  std::set<caf::actor_addr> watched{task.address()};
  self->monitor(task);
  for (auto& [name, actor] : list.devices) {
    self->monitor(actor);
    watched.insert(actor.address());
  }
  self->send(task, stop_atom::value);
  sys.run_all();

  std::set<caf::actor_addr> gone;
  for (std::size_t i = 0; i < watched.size(); ++i)
    self->receive([&](const caf::down_msg& down) { gone.insert(caf::actor_cast<caf::actor_addr>(down.source)); });
  CHECK(gone == watched);
}

#pragma once
/// Collective members for tasks 0..size-1 of job "worker", told their group and each offered
/// to the nodes of device_of(rank) under `name` while this lives: what collective_group::join
/// and offer_to_graph give a program, with every member in this process.
///   testing::deterministic_system sys;
///   offered_group group{sys, 2, "replicas", cpu};            // told by plain actors
///   caf::actor_system threaded{config};
///   offered_group group{threaded, 2, "replicas", test_device}; // blocking joins
/// Each member's trace lines ("rank 1 finished instance 4097") gather in trace().

#include "actors/collective.hpp"
#include "actors/testing.hpp"
#include "devices/task_collective.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace actorflow::testing {

struct offered_group {
  /// Members on CAF's test scheduler, told the group by plain actors that `system` runs.
  offered_group(deterministic_system& system, int size, const std::string& name,
                std::function<std::string(int)> device_of, std::int64_t key = 5)
    : deterministic(&system), sys(system.system()), group_name(name) {
    spawn_members(size, key);
    auto ranks = std::make_shared<std::vector<std::int32_t>>(members.size(), -1);
    for (std::size_t r = 0; r < members.size(); ++r)
      sys.spawn([m = members[r], ranks, r, g = group](caf::event_based_actor* self) {
        self->request(m, caf::infinite, protocol::group_atom::value, g)
          .then([=](std::int32_t rank) { (*ranks)[r] = rank; });
      });
    system.run_all();
    for (int r = 0; r < size; ++r) {
      REQUIRE((*ranks)[static_cast<std::size_t>(r)] == r);
      offer(r, collective_group::of_member(sys, members[static_cast<std::size_t>(r)], group, r, 30),
            device_of(r));
    }
  }

  /// Members in a threaded system, each joined with the blocking collective_group::join.
  offered_group(caf::actor_system& system, int size, const std::string& name,
                std::function<std::string(int)> device_of, std::int64_t key = 5)
    : sys(system), group_name(name) {
    spawn_members(size, key);
    for (int r = 0; r < size; ++r) {
      auto joined = collective_group::join(sys, members[static_cast<std::size_t>(r)], group, 30);
      INFO(joined.error().to_string());
      REQUIRE(joined.ok());
      REQUIRE(joined->rank() == r);
      offer(r, std::move(*joined), device_of(r));
    }
  }

  offered_group(const offered_group&) = delete;
  offered_group& operator=(const offered_group&) = delete;

  ~offered_group() {
    withdraw();
    for (auto& m : members)
      caf::anon_send_exit(m, caf::exit_reason::kill);
    if (deterministic != nullptr) {
      deterministic->run_all();
      // A request a killed member never answered ends at its bound, which only the test
      // fires; the system waits for its actor otherwise.
      deterministic->scheduler().trigger_timeouts();
      deterministic->run_all();
    }
  }

  /// Rank r's member as graph nodes find it (null once withdrawn).
  std::shared_ptr<task_collective> member(int r) const {
    return task_collectives().find(group_name, devices[static_cast<std::size_t>(r)]);
  }

  /// Ends every offer (the members stay).
  void withdraw() { offers.clear(); }

  std::vector<std::string> trace() const {
    std::lock_guard<std::mutex> guard{traced->mutex};
    return traced->lines;
  }

  deterministic_system* deterministic = nullptr;
  caf::actor_system& sys;
  std::string group_name;
  protocol::collective_group group;
  std::vector<protocol::collective_actor> members;
  std::vector<std::string> devices;
  std::vector<task_collective_registry::offer> offers;

private:
  struct lines {
    std::mutex mutex;
    std::vector<std::string> lines;
  };

  void spawn_members(int size, std::int64_t key) {
    std::vector<protocol::collective_member_info> infos;
    for (int r = 0; r < size; ++r) {
      collective_member_options options;
      options.job = "worker";
      options.task = r;
      options.incarnation = 7 + static_cast<std::uint64_t>(r);
      options.trace = [t = traced](const std::string& line) {
        std::lock_guard<std::mutex> guard{t->mutex};
        t->lines.push_back(line);
      };
      members.push_back(spawn_collective_member(sys, options));
      infos.push_back(collective_member_of(members.back(), options));
    }
    group = protocol::make_collective_group(key, infos);
  }

  void offer(int r, collective_group joined, const std::string& device) {
    devices.push_back(device);
    offers.push_back(joined.offer_to_graph(group_name, device));
    REQUIRE(devices.size() == static_cast<std::size_t>(r) + 1);
  }

  std::shared_ptr<lines> traced = std::make_shared<lines>();
};

} // namespace actorflow::testing

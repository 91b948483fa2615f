#pragma once
/// Collectives across tasks run by graph nodes (CollectiveReduce, TF's collective ops): a
/// program that formed a group (collective_group, actors/collective.hpp) offers it to one
/// device's nodes under a name, and a CollectiveReduce node on that device whose group_key is
/// that name runs its part through it. The node finds the group when it runs, not when its
/// kernel is made, so a group formed again after a lost member is what the next step uses.
///   auto offered = group.offer_to_graph("mirrored", cpu_device_full_name);   // while it lives
///   auto mean = ops::collective_reduce(flat_gradients, "mirrored", 1, "mean");
/// Every member's graph must hold the same collective nodes (same instance keys) and run them
/// as many times: the n-th run of instance k on one member meets the n-th run of k on the
/// others, as TF's collectives meet by program order. No CAF here: the group's actors stay
/// behind the interface.

#include "devices/collective_schedule.hpp"
#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace actorflow {

/// The largest instance key a graph's collective node may have: the group keeps the keys
/// below 2^12 of each of its runs' instance numbers for them (collective_group).
inline constexpr std::int64_t max_graph_collective_instance = (std::int64_t{1} << 12) - 1;

/// One member of a group, as graph nodes see it. Thread-safe.
class task_collective {
public:
  virtual ~task_collective() = default;
  /// Starts this member's part of the next run of the graph's collective `instance` (1 ..
  /// max_graph_collective_instance): an all-reduce of `value` (host memory) by `op`. `done`
  /// runs exactly once, on any thread, with the result or the error naming the lost member.
  virtual void all_reduce(std::int64_t instance, tensor value, reduction op,
                          std::function<void(result<tensor>)> done) = 0;
  /// "collective group 1234 (rank 1 of 3)", for messages.
  virtual std::string describe() const = 0;
};

/// The groups offered to graph nodes, by (name, device full name): process-wide, as
/// host_collectives() is, since the kernels that use them have no other way to the program
/// that formed them. Thread-safe.
class task_collective_registry {
public:
  /// An offer withdrawn when this handle goes (or is reset); movable.
  class offer {
  public:
    offer() = default;
    offer(offer&& other) noexcept { *this = std::move(other); }
    offer& operator=(offer&& other) noexcept;
    offer(const offer&) = delete;
    offer& operator=(const offer&) = delete;
    ~offer() { reset(); }
    void reset();

  private:
    friend class task_collective_registry;
    offer(task_collective_registry* registry, std::string name, std::string device,
          std::shared_ptr<task_collective> group)
      : registry_(registry), name_(std::move(name)), device_(std::move(device)),
        group_(std::move(group)) {}
    task_collective_registry* registry_ = nullptr;
    std::string name_, device_;
    std::shared_ptr<task_collective> group_;
  };

  /// Offers `group` to the CollectiveReduce nodes of `device` whose group_key is `name`,
  /// replacing an earlier offer under the same name there.
  [[nodiscard]] offer add(std::string name, std::string device,
                          std::shared_ptr<task_collective> group);
  /// The group offered under `name` to `device`; null when none is.
  std::shared_ptr<task_collective> find(const std::string& name, const std::string& device) const;

private:
  /// Drops the entry when it is still `group` (a later offer may have replaced it).
  void withdraw(const std::string& name, const std::string& device,
                const std::shared_ptr<task_collective>& group);

  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<task_collective>> groups_;
};

task_collective_registry& task_collectives();

} // namespace actorflow

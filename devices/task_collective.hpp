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
/// others, as TF's collectives meet by program order. On a GPU the node's kernel reduces in
/// device memory with NCCL, over a communicator the group sets up and orders
/// (devices/device_collectives.hpp). No CAF here: the group's actors stay behind the interface.

#include "devices/collective_schedule.hpp"
#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace actorflow {

struct node;

/// The bits of a group's instance keys below each run's number: the n-th run of a graph's
/// collective k has key (n << 12) | k, so graph collectives take 1 .. 2^12 - 1 and the group's
/// own calls (collective_group) the multiples of 2^12.
inline constexpr int graph_collective_instance_bits = 12;
/// Reserved for the broadcast that hands every member a device library's communicator id
/// (NCCL's, from rank 0: devices/device_collectives.hpp); no graph node may have it.
inline constexpr std::int64_t bootstrap_collective_instance =
  (std::int64_t{1} << graph_collective_instance_bits) - 1;
/// The largest instance key a graph's collective node may have.
inline constexpr std::int64_t max_graph_collective_instance = bootstrap_collective_instance - 1;

/// One member of a group, as graph nodes see it. Thread-safe.
class task_collective {
public:
  virtual ~task_collective() = default;
  /// Starts this member's part of the next run of the graph's collective `instance` (1 ..
  /// max_graph_collective_instance): an all-reduce of `value` (host memory) by `op`. `done`
  /// runs exactly once, on any thread, with the result or the error naming the lost member.
  virtual void all_reduce(std::int64_t instance, tensor value, reduction op,
                          std::function<void(result<tensor>)> done) = 0;
  /// The same for a broadcast from `root` of `value` (host memory; float32/64, int32/64): the
  /// root's, elsewhere a tensor of its dtype and shape whose contents are unused. Runs count per
  /// instance with all_reduce's, so the two never share a key. Instances 1 ..
  /// bootstrap_collective_instance.
  virtual void broadcast(std::int64_t instance, tensor value, int root,
                         std::function<void(result<tensor>)> done) = 0;
  /// The group's key: a group formed again after a lost member has another.
  virtual std::int64_t key() const = 0;
  /// This member's place in the group, 0 .. size() - 1.
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// The bound on each collective at this member, in seconds (0: none).
  virtual double timeout_seconds() const = 0;
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

  /// What a watch is told when an offer ends: its device and group.
  using withdrawal =
    std::function<void(const std::string& device, const std::shared_ptr<task_collective>& group)>;

  /// A watch that ends when this handle goes (or is reset), waiting for a call under way;
  /// movable.
  class watch {
  public:
    watch() = default;
    watch(watch&& other) noexcept { *this = std::move(other); }
    watch& operator=(watch&& other) noexcept;
    watch(const watch&) = delete;
    watch& operator=(const watch&) = delete;
    ~watch() { reset(); }
    void reset();

  private:
    friend class task_collective_registry;
    watch(task_collective_registry* registry, std::uint64_t id) : registry_(registry), id_(id) {}
    task_collective_registry* registry_ = nullptr;
    std::uint64_t id_ = 0;
  };

  /// Offers `group` to the CollectiveReduce nodes of `device` whose group_key is `name`,
  /// replacing an earlier offer under the same name there.
  [[nodiscard]] offer add(std::string name, std::string device,
                          std::shared_ptr<task_collective> group);
  /// The group offered under `name` to `device`; null when none is.
  std::shared_ptr<task_collective> find(const std::string& name, const std::string& device) const;
  /// Calls `gone` for every offer that ends from now on (withdrawn, or replaced by a later one
  /// under its name on its device), once it left the registry, on the thread that ended it: for
  /// what is kept per offered group (device_collectives' communicators). `gone` must not offer
  /// or withdraw.
  [[nodiscard]] watch watch_withdrawals(withdrawal gone);

private:
  /// Drops the entry when it is still `group` (a later offer may have replaced it).
  void withdraw(const std::string& name, const std::string& device,
                const std::shared_ptr<task_collective>& group);
  void tell_watchers(const std::string& device, const std::shared_ptr<task_collective>& group);
  void unwatch(std::uint64_t id);

  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<task_collective>> groups_;
  // Held while watchers are told, so that a watch that ends waits for its call under way.
  std::mutex watchers_mutex_;
  std::map<std::uint64_t, withdrawal> watchers_;
  std::uint64_t next_watch_ = 1;
};

task_collective_registry& task_collectives();

/// A CollectiveReduce node's attributes (ops::collective_reduce sets them), read once when its
/// kernel is made, by the CPU's and the GPU's kernel alike.
struct collective_reduce_attrs {
  std::string group;
  std::int64_t instance = 0;
  std::optional<reduction> op;

  static collective_reduce_attrs of(const node& n);
  /// The member offered to `device` (a full name) under `group`; the error says what is wrong
  /// with the attributes, or that no group is offered there.
  result<std::shared_ptr<task_collective>> member_on(const std::string& device) const;
};

} // namespace actorflow

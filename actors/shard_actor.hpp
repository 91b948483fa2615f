#pragma once
/// The actor that serves one parameter shard (protocol: actors/protocols/ps.hpp). Its mailbox
/// orders every update of the variable: the protocol's, and the graph's update kernels
/// (Assign*, Apply*) on the device, which hand their update to it
/// (variable_state::order_update) instead of applying it on their own thread. Different shards
/// update in parallel on the actor system's threads.
///   protocol::shard_actor w = spawn_shard_actor(sys, variable_shard{"w", cpu_device});
/// A task serves every variable of its devices through a shard_table.

#include "actors/protocols/ps.hpp"
#include "devices/variable_shard.hpp"

#include <caf/fwd.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace actorflow {

class bulk_sender;

/// `bulk`: where reads over the bulk channel are written from (the task's sender); without
/// one such reads fail.
protocol::shard_actor spawn_shard_actor(caf::actor_system& sys, variable_shard shard,
                                        std::shared_ptr<bulk_sender> bulk = nullptr);

/// A task's shard actors: one per variable of its devices, spawned when the variable appears
/// (or when first asked for, for variables older than the table) and stopped with the table.
/// Thread-safe: devices create variables on their kernels' threads.
class shard_table : public std::enable_shared_from_this<shard_table> {
public:
  /// `bulk`: the task's sender, for reads over the bulk channel.
  explicit shard_table(caf::actor_system& sys, std::shared_ptr<bulk_sender> bulk = nullptr)
    : system_(sys), bulk_(std::move(bulk)) {}
  ~shard_table();
  shard_table(const shard_table&) = delete;
  shard_table& operator=(const shard_table&) = delete;

  /// Serves the variables `dev` holds, now and later (the table must be owned by a shared_ptr).
  void serve(const std::shared_ptr<device>& dev);
  /// The shard of variable `name`; null when no served device holds it.
  protocol::shard_actor find(const std::string& name);
  /// Hands a bulk frame whose key starts with protocol::shard_bulk_prefix to the shard it names
  /// (its task's bulk endpoint calls this); not_found when no device here holds the variable.
  status deliver_bulk(const std::string& key, tensor value);
  /// Every variable's shard, by name.
  std::vector<std::pair<std::string, protocol::shard_actor>> all();
  /// Stops every shard; the table serves nothing afterwards.
  void stop();

private:
  protocol::shard_actor spawn_locked(const std::string& name, const std::shared_ptr<device>& dev);

  caf::actor_system& system_;
  std::shared_ptr<bulk_sender> bulk_;
  std::mutex mutex_;
  bool stopped_ = false;
  std::vector<std::shared_ptr<device>> devices_;
  std::map<std::string, protocol::shard_actor> shards_;
};

} // namespace actorflow

#pragma once
/// The master's plans: for each run signature of a session (its fetches, feeds and targets),
/// the graph pruned, placed and partitioned once, with one entry per device to register and
/// run. Plain code that unit tests drive without an actor system; the master actor sends what
/// a plan says (TensorFlow's MasterSession keeps the same per-signature cache).
///   auto plan = make_run_plan(g, request, directory, placement, next_handle, placed);
///   for (auto& p : (*plan)->partitions) register p.partition under p.handle on p.actor;
///   auto step = make_step_plan(**plan, step_id, request, timeout_ms);
///   auto fetched = gather_fetches(**plan, outcome.fetched, request.fetches.size());

#include "actors/device_actor.hpp"
#include "actors/device_directory.hpp"
#include "actors/protocols/master.hpp"
#include "graph/graph.hpp"
#include "graph/placement.hpp"
#include "graph/status.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace actorflow {

/// One device's share of a run signature.
struct partition_entry {
  /// Full device name, and its task's incarnation (0: not known).
  std::string device;
  std::uint64_t incarnation = 0;
  protocol::device_actor actor;
  /// What the partition is registered under on its device.
  std::int64_t handle = 0;
  /// The partition to register.
  std::shared_ptr<const graph> partition;
  /// (index into the request's feeds, tensor name) for the feeds this device takes.
  std::vector<std::pair<std::size_t, std::string>> feeds;
  /// The tensors this device returns, and where each goes among the request's fetches.
  std::vector<std::string> fetch_names;
  std::vector<std::size_t> fetch_slots;
  /// The partition's first updates (commit_gate_attr), held by all-or-nothing steps.
  int gated_updates = 0;
};

/// A run signature's partitions; usable once every registration has been acknowledged.
struct run_plan {
  using completion = std::function<void(const status&)>;

  std::vector<partition_entry> partitions;
  bool registering = true;
  status registration;
  /// Runs waiting for the registrations.
  std::vector<completion> waiting;

  /// Records the registrations' outcome and runs everything that waited for it.
  void finish_registration(const status& outcome);
};

/// The cache key of a request: its fetches, feed names and targets, in order.
std::string run_signature(const protocol::master_run_request& request);

/// Prunes `g` to what `request` needs, places the nodes not placed yet over `directory`'s
/// devices (kernels from the global registry), partitions the result by device and makes one
/// entry per partition, numbered from ++next_handle. Placement lines for nodes placed now are
/// appended to `placed`. Errors name the fetch, feed or target that is not in the graph, or
/// the node that cannot be placed. With `fuse_ops`, each partition goes through the fusion
/// pass (graph/fusion.hpp), fetched and fed nodes kept, and each fusion adds a fusion_line to
/// `placed`. A `mixed_precision` policy (graph/mixed_precision.hpp) then marks each partition's
/// contractions, each adding a mixed_precision_line to `placed`.
result<std::shared_ptr<run_plan>> make_run_plan(graph& g, const protocol::master_run_request& request,
                                                const device_directory& directory,
                                                const placement_options& placement,
                                                std::int64_t& next_handle,
                                                std::vector<std::string>& placed,
                                                bool fuse_ops = false,
                                                const std::string& mixed_precision = {});

/// The step the coordinator runs for `plan`: each partition's feeds and fetches.
protocol::step_plan make_step_plan(const run_plan& plan, std::int64_t step_id,
                                   const protocol::master_run_request& request,
                                   std::int64_t timeout_ms);

/// The fetched tensors of every partition (in partition order) put in the request's order.
std::vector<tensor> gather_fetches(const run_plan& plan, std::vector<std::vector<tensor>>& fetched,
                                   std::size_t fetch_count);

/// A session's plans by run signature.
class plan_cache {
public:
  std::shared_ptr<run_plan> find(const std::string& signature) const;
  void insert(const std::string& signature, std::shared_ptr<run_plan> plan);
  /// Forgets `signature`'s plan if it is still `plan` (a later one may have replaced it).
  void forget(const std::string& signature, const std::shared_ptr<run_plan>& plan);
  /// Every plan, for freeing their partitions.
  const std::map<std::string, std::shared_ptr<run_plan>>& all() const { return plans_; }

private:
  std::map<std::string, std::shared_ptr<run_plan>> plans_;
};

} // namespace actorflow

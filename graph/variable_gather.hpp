#pragma once
/// Rows of a variable gathered without reading the variable (TF's ResourceGather): in a
/// partition, Gather(Identity(VariableV2), ids) on one device becomes _VariableGather(VariableV2
/// ref, ids), which copies the rows under the variable's lock, and a VariableV2 whose every
/// consumer then takes it as a ref is marked "_ref_only", so its kernel hands out no alias of
/// the value. Why: an update finds the value shared while anyone holds an alias and writes a
/// whole new copy beside it (copy-on-write, devices/variable_update.hpp); an embedding table
/// whose lookups aliased it was copied whole by every sparse update that overlapped another
/// worker's step (75% of a ps's time at 1e8 parameters). (The other alias, an update's new
/// value that nobody reads, the executor drops as soon as the update is done.)
///   auto rewritten = gather_from_variables(part, keep, has_kernel);   // keep: fetched, fed
#include "graph/graph.hpp"
#include "graph/placement.hpp"
#include "graph/status.hpp"

#include <memory>
#include <set>
#include <string>
#include <vector>

namespace actorflow {

class op_registry;

struct variable_gather_result {
  std::shared_ptr<graph> partition;
  /// The gathers rewritten, by name.
  std::vector<std::string> rewritten;
};

/// The rewrite above. Gathers along axis 0 only, on devices with a _VariableGather kernel, and
/// only of a read that nothing but such gathers reads (the read then goes; one that stays for
/// a value reader keeps the variable aliased, so the gathers stay as they are); nothing named
/// in `keep` changes.
result<variable_gather_result> gather_from_variables(const std::shared_ptr<graph>& partition,
                                                     const std::set<std::string>& keep,
                                                     const kernel_support& has_kernel);

void register_variable_gather_ops(op_registry& registry);

} // namespace actorflow

#include "graph/mixed_precision.hpp"

#include "graph/device_name.hpp"
#include "graph/op_registry.hpp"

#include <cstdlib>

namespace actorflow {

result<std::string> mixed_precision_policy(const std::string& requested) {
  std::string value = requested;
  const char* from = "session_options::mixed_precision";
  if (value.empty()) {
    const char* env = std::getenv("ACTORFLOW_MIXED_PRECISION");
    value = env != nullptr ? env : "";
    from = "ACTORFLOW_MIXED_PRECISION";
  }
  if (value.empty() || value == "float32")
    return std::string{};
  if (value == "bfloat16" || value == "mixed_bfloat16")
    return std::string{"bfloat16"};
  return make_error(errc::invalid_argument, std::string{from} + ": '" + value +
                                              "' is not a mixed-precision policy (float32 or "
                                              "bfloat16)");
}

std::vector<mixed_precision_record>
apply_mixed_precision(graph& partition, const std::string& policy,
                      const std::function<bool(const std::string& device_type)>& honours) {
  std::vector<mixed_precision_record> marked;
  if (policy.empty())
    return marked;
  for (std::size_t id = 0; id < partition.size(); ++id) {
    auto& n = partition.at(static_cast<int>(id));
    auto* def = op_registry::global().find(n.op);
    if (def == nullptr || !def->bf16_compute || n.kernel_type != dtype::float32)
      continue;
    auto device = device_name::parse(n.assigned_device);
    if (!device || !device->type || !honours(device_name::canonical_type(*device->type)))
      continue;
    n.attrs[mixed_precision_attr] = policy;
    marked.push_back({n.name, n.op, policy, n.assigned_device});
  }
  return marked;
}

namespace {
const std::string line_prefix = "mixed_precision ";
} // namespace

std::string mixed_precision_line(const mixed_precision_record& record) {
  return line_prefix + record.name + " (" + record.op + ") = " + record.policy + " on " +
         record.device;
}

bool is_mixed_precision_line(const std::string& line) { return line.rfind(line_prefix, 0) == 0; }

} // namespace actorflow

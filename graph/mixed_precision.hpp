#pragma once
/// The mixed-precision pass (TensorFlow's mixed_bfloat16 policy): under policy "bfloat16",
/// every float32 contraction of a partition (ops whose op_def says bf16_compute: MatMul,
/// Conv2D, its two backprops, _FusedMatMul, _FusedConv2D) on a device whose kernels honour it
/// gets attr "_mixed_precision" = "bfloat16": its kernel rounds the operands to bfloat16 and
/// accumulates and writes float32. Variables, their updates and every other op stay float32
/// (float32 master weights), and so do the contraction's inputs and outputs in the graph.
///   auto policy = mixed_precision_policy(options.mixed_precision);   // "" or "bfloat16"
///   for (auto& r : apply_mixed_precision(*part, *policy, honours)) log(mixed_precision_line(r));

#include "graph/graph.hpp"
#include "graph/status.hpp"

#include <functional>
#include <string>
#include <vector>

namespace actorflow {

/// The attr the pass sets on a contraction, read by its kernel when it is made.
inline constexpr const char* mixed_precision_attr = "_mixed_precision";

/// The policy in force: `requested` (session_options::mixed_precision) unless empty, else the
/// environment's ACTORFLOW_MIXED_PRECISION. "" (float32 everywhere, also spelt "float32") or
/// "bfloat16" (also "mixed_bfloat16"); any other value is an error naming it.
result<std::string> mixed_precision_policy(const std::string& requested);

/// One node the pass marked.
struct mixed_precision_record {
  std::string name;
  std::string op;
  /// The policy: "bfloat16".
  std::string policy;
  std::string device;
};

/// Marks the contractions of `partition` under `policy` (nothing when it is ""): float32 nodes
/// whose op_def has bf16_compute, placed on a device whose type `honours` accepts. Returns what
/// it marked, in node order.
std::vector<mixed_precision_record>
apply_mixed_precision(graph& partition, const std::string& policy,
                      const std::function<bool(const std::string& device_type)>& honours);

/// The placement-log line of a marked node:
/// "mixed_precision hidden1/MatMul (MatMul) = bfloat16 on /job:localhost/replica:0/task:0/device:CPU:0"
/// It has no "name: " prefix, so readers of "name: device" lines pass over it.
std::string mixed_precision_line(const mixed_precision_record& record);
/// Whether a placement-log line is a mixed_precision_line.
bool is_mixed_precision_line(const std::string& line);

} // namespace actorflow

#pragma once
/// The fusion pass (TensorFlow's remapper): in a partition, MatMul + bias Add (+ Relu) becomes
/// one _FusedMatMul and Conv2D + bias Add (+ Relu) one _FusedConv2D, so that the kernel adds
/// the bias and applies Relu in one pass over the GEMM's output.
///   auto fused = fuse_partition(*part, keep, has_kernel);   // keep: fetched and fed names
///   if (fused) part = fused->partition;  for (auto& f : fused->fusions) log(fusion_line(f));
/// The bias add is an "Add" of a rank-1 tensor whose length is the contraction output's last
/// dimension (what models write as `matmul(x, w) + b`; actorflow has no separate BiasAdd op).
/// A chain fuses only when all its nodes are on one device that has a kernel for the fused op
/// (kernel_support, so only the CPU today), the absorbed nodes (the MatMul/Conv2D, and the Add
/// under a Relu) are neither fetched nor fed and have no consumer besides the next node of the
/// chain, except inputs that read only their shape (op_def::shape_only_inputs, the gradients'
/// SumToShapeOf), which are rewired to the fused node's output of the same shape.
/// In the backward pass, ReluGrad(MatMul(a, b), y) becomes one _FusedMatMulReluGrad(a, b, y)
/// (the MatMul absorbed under the same rules), and a bias gradient of its result (a
/// SumToShapeOf down to a rank-1 [n], neither fetched, fed nor ordered by control edges) becomes
/// its output 1, so the kernel masks and sums each block of the product while it is in cache.
/// The fused node keeps the last node's name (the ReluGrad's in the backward pass); attr
/// "fused_ops" lists what it absorbed ("BiasAdd", "BiasAdd,Relu", "ReluGrad" or
/// "ReluGrad,BiasAddGrad"), attr "fused_nodes" the names it replaces.

#include "graph/graph.hpp"
#include "graph/placement.hpp"

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace actorflow {

/// One rewrite the pass made.
struct fusion_record {
  /// The fused node's name (the chain's last node).
  std::string name;
  /// "_FusedMatMul", "_FusedConv2D" or "_FusedMatMulReluGrad".
  std::string op;
  /// "BiasAdd", "BiasAdd,Relu", "ReluGrad" or "ReluGrad,BiasAddGrad" (TensorFlow's fused_ops
  /// list, comma-separated).
  std::string fused_ops;
  /// The names of the chain's nodes, contraction first, the fused node's own name last.
  std::vector<std::string> nodes;
  /// The device it runs on.
  std::string device;
};

/// The partition after the pass and what it fused; `partition` is the input graph itself when
/// nothing fused.
struct fusion_result {
  std::shared_ptr<graph> partition;
  std::vector<fusion_record> fusions;
};

/// Fuses the chains of `partition` (described above). `keep` names nodes whose outputs are
/// fetched or fed: they are never absorbed. `has_kernel` says which devices run the fused ops.
result<fusion_result> fuse_partition(const std::shared_ptr<graph>& partition,
                                     const std::set<std::string>& keep,
                                     const kernel_support& has_kernel);

/// Whether the fusion pass runs: `requested` (session_options::fuse_ops) and the environment
/// variable ACTORFLOW_FUSION is not "0".
bool fusion_enabled(bool requested);

/// The placement-log line of a fusion:
/// "fused hidden1/Relu = _FusedMatMul(hidden1/MatMul, hidden1/add, hidden1/Relu) fused_ops=[BiasAdd,Relu] on /job:..."
/// It has no "name: " prefix, so readers of "name: device" lines pass over it.
std::string fusion_line(const fusion_record& record);
/// The record of a fusion_line; nullopt for any other line.
std::optional<fusion_record> parse_fusion_line(const std::string& line);

/// Records in a client's graph what the master fused, for its picture (graph_to_dot), as the
/// placement log's assigned devices are: attrs "_fused_op" and "_fused_ops" on the fused node,
/// "_fused_into" (the fused node's name) on the nodes it absorbed. Names not in `g` are skipped.
void note_fusion(graph& g, const fusion_record& record);

} // namespace actorflow

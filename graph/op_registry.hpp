#pragma once
/// The registry of op definitions: arity, statefulness and shape inference.
///   const op_def* def = op_registry::global().find("MatMul");
///   shape_context ctx{n, input_types, input_shapes};
///   status s = def->infer(ctx);   // fills ctx.output_types / ctx.output_shapes
/// Op names follow TensorFlow's ("Add", "MatMul", "VariableV2", ...).

#include "graph/graph.hpp"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace actorflow {

/// What shape inference sees of a node and fills in.
struct shape_context {
  const node& n;
  std::vector<dtype> input_types;
  std::vector<tensor_shape> input_shapes;
  std::vector<dtype> output_types;
  std::vector<tensor_shape> output_shapes;

  void set_output(int i, dtype t, tensor_shape s) {
    auto k = static_cast<std::size_t>(i);
    if (output_types.size() <= k) {
      output_types.resize(k + 1);
      output_shapes.resize(k + 1);
    }
    output_types[k] = t;
    output_shapes[k] = std::move(s);
  }
};

struct op_def {
  std::string name;
  /// Number of data inputs; -1 for any number.
  int num_inputs = 0;
  /// Stateful ops (variables, random, assign) are never pruned as duplicates and keep state in
  /// their kernel or device.
  bool stateful = false;
  /// Input 0 may be a variable that is not yet initialised (Assign and friends).
  bool takes_variable_ref = false;
  /// Fills output types and shapes; an error names what is wrong (the caller adds the node).
  std::function<status(shape_context&)> infer;
  /// Further inputs that are variable refs like input 0 (the slot variables of ApplyMomentum
  /// and ApplyAdam): the kernel reaches their variables through the device's resources, so the
  /// executor neither reads their value at run time nor rejects them when uninitialised.
  std::vector<int> variable_ref_inputs{};
  /// Inputs whose value is never read, only their run-time shape (SumToShapeOf's x): any
  /// tensor of the same shape may stand in for them, which lets the fusion pass
  /// (graph/fusion.hpp) absorb a producer whose output only such inputs see besides its fused
  /// consumer.
  std::vector<int> shape_only_inputs{};
  /// A contraction (MatMul, Conv2D and their gradients and fused forms) whose float32 kernels
  /// may compute with bfloat16 operands and float32 accumulation and results under the
  /// mixed_bfloat16 policy (graph/mixed_precision.hpp).
  bool bf16_compute = false;

  bool is_shape_only_input(int k) const {
    for (auto i : shape_only_inputs)
      if (i == k)
        return true;
    return false;
  }

  /// Whether input `k` is a variable ref (input 0 with takes_variable_ref, or listed above).
  bool is_variable_ref_input(int k) const {
    if (k == 0 && takes_variable_ref)
      return true;
    for (auto i : variable_ref_inputs)
      if (i == k)
        return true;
    return false;
  }
};

class op_registry {
public:
  /// The process-wide registry with every standard op; filled on first use.
  static op_registry& global();

  void add(op_def def);
  const op_def* find(const std::string& name) const;
  std::vector<std::string> names() const;

private:
  std::map<std::string, op_def> defs_;
};

/// Registers the standard ops (graph/standard_ops.cpp), which includes the two below.
void register_standard_ops(op_registry& registry);
/// Ops only gradients use: ReluGrad, SigmoidGrad, ... (graph/gradient_ops.cpp).
void register_gradient_ops(op_registry& registry);
/// The fused ops the fusion pass makes, _FusedMatMul and _FusedConv2D (graph/fusion.cpp).
void register_fused_ops(op_registry& registry);
/// Convolution and pooling ops and their gradients' ops (graph/conv_ops.cpp).
void register_conv_ops(op_registry& registry);
/// Optimizer update ops: ApplyGradientDescent, ApplyMomentum, ApplyAdam (graph/training_ops.cpp).
void register_training_ops(op_registry& registry);
/// The sparse ops (graph/sparse_ops.cpp): IndexedSlices, Unique, UnsortedSegmentSum, scatters,
/// sparse updates.
void register_sparse_ops(op_registry& registry);
/// Switch, Merge, Enter, Exit, NextIteration, LoopCond, LogicalNot, StackPush, StackPop, Gather
/// (graph/control_flow_ops.cpp).
void register_control_flow_ops(op_registry& registry);

} // namespace actorflow

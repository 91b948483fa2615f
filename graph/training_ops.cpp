// Being written: optimizer update ops.
#include "graph/op_registry.hpp"
namespace actorflow {
void register_training_ops(op_registry&) {}
} // namespace actorflow

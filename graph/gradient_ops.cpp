// Being written: ops used by gradients.
#include "graph/op_registry.hpp"
namespace actorflow {
void register_gradient_ops(op_registry&) {}
} // namespace actorflow

#include "graph/math_ops.hpp"

#include "graph/ops.hpp"

namespace actorflow::ops {

namespace {

output unary(const char* op, output x, const std::string& name) {
  return make(*x.owner, op, name, {x});
}

output binary(const char* op, output x, output y, const std::string& name) {
  return make(*x.owner, op, name, {x, y});
}

output reduction(const char* op, output x, std::vector<std::int64_t> axes, bool keep_dims,
                 const std::string& name) {
  return make(*x.owner, op, name, {x}, {{"axes", std::move(axes)}, {"keep_dims", keep_dims}});
}

} // namespace

output maximum(output x, output y, const std::string& name) { return binary("Maximum", x, y, name); }
output minimum(output x, output y, const std::string& name) { return binary("Minimum", x, y, name); }
output pow(output x, output y, const std::string& name) { return binary("Pow", x, y, name); }
output floor_div(output x, output y, const std::string& name) {
  return binary("FloorDiv", x, y, name);
}
output floor_mod(output x, output y, const std::string& name) {
  return binary("FloorMod", x, y, name);
}
output squared_difference(output x, output y, const std::string& name) {
  return binary("SquaredDifference", x, y, name);
}
output not_equal(output x, output y, const std::string& name) {
  return binary("NotEqual", x, y, name);
}
output logical_or(output x, output y, const std::string& name) {
  return binary("LogicalOr", x, y, name);
}

output abs(output x, const std::string& name) { return unary("Abs", x, name); }
output sign(output x, const std::string& name) { return unary("Sign", x, name); }
output floor(output x, const std::string& name) { return unary("Floor", x, name); }
output ceil(output x, const std::string& name) { return unary("Ceil", x, name); }
output round(output x, const std::string& name) { return unary("Round", x, name); }

output select(output condition, output t, output e, const std::string& name) {
  return make(*condition.owner, "SelectV2", name, {condition, t, e});
}

output reduce_min(output x, std::vector<std::int64_t> axes, bool keep_dims, const std::string& name) {
  return reduction("Min", x, std::move(axes), keep_dims, name);
}
output reduce_prod(output x, std::vector<std::int64_t> axes, bool keep_dims,
                   const std::string& name) {
  return reduction("Prod", x, std::move(axes), keep_dims, name);
}

} // namespace actorflow::ops

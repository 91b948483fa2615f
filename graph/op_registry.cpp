#include "graph/op_registry.hpp"

namespace actorflow {

op_registry& op_registry::global() {
  static op_registry* instance = [] {
    auto* r = new op_registry;
    register_standard_ops(*r);
    return r;
  }();
  return *instance;
}

void op_registry::add(op_def def) {
  auto name = def.name;
  defs_[name] = std::move(def);
}

const op_def* op_registry::find(const std::string& name) const {
  auto i = defs_.find(name);
  return i == defs_.end() ? nullptr : &i->second;
}

std::vector<std::string> op_registry::names() const {
  std::vector<std::string> out;
  for (auto& [name, def] : defs_)
    out.push_back(name);
  return out;
}

} // namespace actorflow

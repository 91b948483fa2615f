#pragma once
/// Settings from the environment (the ACTORFLOW_*_BYTES limits), parsed in one place.
///   auto cap = size_from_environment("ACTORFLOW_MAX_TENSOR_BYTES", 0);

#include <cstddef>

namespace actorflow {

/// A positive byte count from the environment variable `name`; `fallback` when it is unset,
/// empty, not a number or 0.
std::size_t size_from_environment(const char* name, std::size_t fallback);

} // namespace actorflow

#include "graph/environment.hpp"

#include <cstdlib>

namespace actorflow {

std::size_t size_from_environment(const char* name, std::size_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0')
    return fallback;
  char* end = nullptr;
  auto value = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0' || value == 0)
    return fallback;
  return static_cast<std::size_t>(value);
}

} // namespace actorflow

// libFuzzer: the graph loader (serialization/graph_io.hpp) on untrusted bytes: a whole graph
// or an error, never a crash, a leak or undefined behaviour.
#include "graph/graph.hpp"
#include "serialization/graph_io.hpp"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  actorflow::graph g;
  static_cast<void>(actorflow::deserialize_graph(data, size, g));
  static_cast<void>(actorflow::deserialize_tensor(data, size));
  return 0;
}

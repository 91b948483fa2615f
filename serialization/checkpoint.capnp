@0x85d78d6645c56c64;
# actorflow's checkpoint payload: variable values by name, and the global step.
#
# A checkpoint file (serialization/checkpoint.hpp) is a 32-byte header (magic, format version,
# payload length, CRC-32 of the payload, CRC-32 of the header) followed by one unpacked
# Cap'n Proto message whose root is a Checkpoint. The header, not this schema, carries the
# format version, so that a reader can refuse a file before it decodes anything.
#
# Evolution rules: only append fields with new ordinals; never renumber or change a type.

using Cxx = import "/capnp/c++.capnp";
using Graph = import "graph.capnp";
$Cxx.namespace("actorflow::schema");

struct Checkpoint {
  globalStep @0 :Int64;
  # Sorted by name, names unique (readers check both).
  entries @1 :List(Entry);

  struct Entry {
    # The variable's node name, e.g. "layer1/weights".
    name @0 :Text;
    tensor @1 :Graph.Tensor;
  }
}

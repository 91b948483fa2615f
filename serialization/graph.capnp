@0xd87c0e0a04ab93fd;
# actorflow's on-disk and on-wire schema for graphs and tensors.
#
# A graph file (serialization/graph_io.hpp: save_graph) is one unpacked Cap'n Proto message
# whose root is a Graph. Tensor is a standalone struct so that checkpoints and wire messages
# can reuse it. Readers must treat every field as hostile: graph_io.cpp validates all of them.
#
# Evolution rules: only append fields with new ordinals; never renumber or change a type.
# Bump Graph.formatVersion when old readers would misread a new file.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("actorflow::schema");

# Element types; the values match actorflow::dtype (graph/dtype.hpp).
enum DType {
  float32 @0;
  float64 @1;
  int32 @2;
  int64 @3;
  boolean @4;
}

# A possibly partial shape: rankKnown false means unknown rank (dims then empty);
# a dimension of -1 is unknown.
struct Shape {
  rankKnown @0 :Bool;
  dims @1 :List(Int64);
}

# A dense tensor. data holds the elements row-major, raw little-endian, exactly
# numElements(shape) * sizeOf(dtype) bytes; booleans are one byte each, 0 or 1.
# A Data blob holds at most 2^29 - 1 bytes, which bounds one Tensor.
struct Tensor {
  dtype @0 :DType;
  shape @1 :Shape;
  data @2 :Data;
  # A tensor handle without a buffer (actorflow::tensor{}); data is then empty.
  empty @3 :Bool;
}

# One output of one node: a node index into Graph.nodes and an output index.
# Signed so that a corrupt negative value is visible (and rejected) rather than wrapped.
struct OutputRef {
  node @0 :Int32;
  index @1 :Int32;
}

struct Attr {
  key @0 :Text;
  value :union {
    boolean @1 :Bool;
    int64 @2 :Int64;
    float64 @3 :Float64;
    text @4 :Text;
    dtype @5 :DType;
    shape @6 :Shape;
    int64List @7 :List(Int64);
    tensor @8 :Tensor;
  }
}

struct Node {
  name @0 :Text;
  op @1 :Text;
  inputs @2 :List(OutputRef);
  # Indices into Graph.nodes.
  controlInputs @3 :List(Int32);
  attrs @4 :List(Attr);
  requestedDevice @5 :Text;
  assignedDevice @6 :Text;
  outputTypes @7 :List(DType);
  outputShapes @8 :List(Shape);
  kernelType @9 :DType;
}

# A variable as graph::global_variables holds it. read and initializer may have node -1
# (absent); ref may not.
struct Variable {
  ref @0 :OutputRef;
  read @1 :OutputRef;
  initializer @2 :OutputRef;
}

struct Graph {
  # 1 for this schema. 0 (the default of an empty message) is rejected.
  formatVersion @0 :UInt32;
  # In id order: node i of the loaded graph is nodes[i].
  nodes @1 :List(Node);
  variables @2 :List(Variable);
  seed :union {
    none @3 :Void;
    value @4 :Int64;
  }
}

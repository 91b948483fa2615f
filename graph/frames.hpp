#pragma once
/// The frames of a graph's while loops, found from its structure alone (so that deserialised
/// graphs and partitions have them too): TensorFlow's ControlFlowInfo.
///   auto layout = find_frames(g);
///   layout->frame_of[id]   // 0: the step's own frame; else an index into layout->frames
/// An Enter runs in its parent's frame and its output lives in the frame it enters (its
/// attribute frame_name); an Exit runs in its loop's frame and its output lives in the parent's;
/// every other node runs where its inputs live.

#include "graph/graph.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace actorflow {

struct frame_layout {
  struct frame {
    std::string name;
    int parent = -1;
    std::int64_t parallel_iterations = 1;
  };
  /// frames[0] is the step's own frame.
  std::vector<frame> frames;
  /// Per node: the frame it runs in.
  std::vector<int> frame_of;
  /// Per node: the frame an Enter enters; -1 for other nodes.
  std::vector<int> child_frame;

  /// The frame node `id`'s outputs live in.
  int output_frame(const graph& g, int id) const;
};

/// The frames of `g`; an error names the node whose inputs come from two frames, an Enter
/// entering a frame from the wrong parent, an Exit outside any loop, or a node on a cycle that
/// does not pass through a loop.
result<frame_layout> find_frames(const graph& g);

} // namespace actorflow

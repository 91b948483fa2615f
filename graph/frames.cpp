#include "graph/frames.hpp"

#include <algorithm>
#include <map>

namespace actorflow {

int frame_layout::output_frame(const graph& g, int id) const {
  auto& n = g.at(id);
  auto f = frame_of[static_cast<std::size_t>(id)];
  if (n.op == "Enter")
    return child_frame[static_cast<std::size_t>(id)];
  if (n.op == "Exit")
    return frames[static_cast<std::size_t>(f)].parent;
  return f;
}

result<frame_layout> find_frames(const graph& g) {
  frame_layout layout;
  layout.frames.assign(1, frame_layout::frame{});
  layout.frame_of.assign(g.size(), -1);
  layout.child_frame.assign(g.size(), -1);
  auto consumers = g.consumers();
  std::map<std::string, int> by_name;
  std::vector<int> queue;
  for (std::size_t i = 0; i < g.size(); ++i)
    if (g.at(static_cast<int>(i)).inputs.empty() && g.at(static_cast<int>(i)).control_inputs.empty()) {
      layout.frame_of[i] = 0;
      queue.push_back(static_cast<int>(i));
    }
  auto describe = [&](int f) {
    return f == 0 ? std::string{"the step's frame"}
                  : "while loop '" + layout.frames[static_cast<std::size_t>(f)].name + "'";
  };
  for (std::size_t head = 0; head < queue.size(); ++head) {
    auto id = queue[head];
    auto& n = g.at(id);
    auto f = layout.frame_of[static_cast<std::size_t>(id)];
    auto out = f;
    if (n.op == "Enter") {
      auto name = n.attr_or<std::string>("frame_name", "");
      auto [entry, added] = by_name.emplace(name, static_cast<int>(layout.frames.size()));
      if (added) {
        frame_layout::frame info;
        info.name = name;
        info.parent = f;
        info.parallel_iterations =
          std::max<std::int64_t>(1, n.attr_or<std::int64_t>("parallel_iterations", 10));
        layout.frames.push_back(std::move(info));
      } else if (layout.frames[static_cast<std::size_t>(entry->second)].parent != f) {
        return make_error(errc::invalid_argument, "Enter '" + n.name + "' enters " +
                                                    describe(entry->second) + " from " +
                                                    describe(f) + ", which is not its parent");
      }
      out = entry->second;
      layout.child_frame[static_cast<std::size_t>(id)] = out;
    } else if (n.op == "Exit") {
      if (f == 0)
        return make_error(errc::invalid_argument, "Exit '" + n.name + "' is not inside a while loop");
      out = layout.frames[static_cast<std::size_t>(f)].parent;
    }
    for (auto dst : consumers[static_cast<std::size_t>(id)]) {
      auto& seen = layout.frame_of[static_cast<std::size_t>(dst)];
      if (seen < 0) {
        seen = out;
        queue.push_back(dst);
      } else if (seen != out) {
        return make_error(errc::invalid_argument, "node '" + g.at(dst).name + "' takes inputs from " +
                                                    describe(seen) + " and, through '" + n.name +
                                                    "', from " + describe(out));
      }
    }
  }
  for (std::size_t i = 0; i < g.size(); ++i)
    if (layout.frame_of[i] < 0)
      return make_error(errc::invalid_argument,
                        "node '" + g.at(static_cast<int>(i)).name +
                          "' is on a cycle that does not pass through a loop's Merge and "
                          "NextIteration, so it never runs");
  return layout;
}

} // namespace actorflow

#include "graph/partition.hpp"

#include "graph/frames.hpp"
#include "graph/op_registry.hpp"
#include "graph/rendezvous_key.hpp"

#include <algorithm>

namespace actorflow {

void add_target_roots(const graph& g, int target, std::vector<int>& roots) {
  std::vector<int> pending{target};
  std::set<int> seen;
  while (!pending.empty()) {
    auto next = pending.back();
    pending.pop_back();
    if (!seen.insert(next).second)
      continue;
    auto& n = g.at(next);
    if (n.op != "NoOp") {
      roots.push_back(next);
      continue;
    }
    for (auto& input : n.inputs)
      pending.push_back(input.node_id);
    for (auto c : n.control_inputs)
      pending.push_back(c);
  }
}

std::vector<int> prune(const graph& g, const std::vector<int>& roots, const std::set<int>& fed) {
  // Members of one collective (AllReduce nodes sharing a group_key) meet at run time: a step
  // that ran some of them would wait forever for the others.
  // Likewise a loop gradient's StackPop waits for the pushes of its stack (stack_name).
  std::map<std::string, std::vector<int>> collectives;
  for (std::size_t id = 0; id < g.size(); ++id)
    for (auto* attr : {"group_key", "stack_name"})
      if (auto* key = g.at(static_cast<int>(id)).attr<std::string>(attr))
        collectives[std::string{attr} + ":" + *key].push_back(static_cast<int>(id));
  std::vector<bool> needed(g.size(), false);
  std::vector<int> stack(roots.begin(), roots.end());
  while (!stack.empty()) {
    auto id = stack.back();
    stack.pop_back();
    if (needed[static_cast<std::size_t>(id)])
      continue;
    needed[static_cast<std::size_t>(id)] = true;
    auto& n = g.at(id);
    if (fed.count(id) == 0)
      for (auto& in : n.inputs)
        stack.push_back(in.node_id);
    for (auto c : n.control_inputs)
      stack.push_back(c);
    for (auto* attr : {"group_key", "stack_name"})
      if (auto* key = n.attr<std::string>(attr))
        for (auto member : collectives[std::string{attr} + ":" + *key])
          stack.push_back(member);
  }
  std::vector<int> out;
  for (std::size_t i = 0; i < needed.size(); ++i)
    if (needed[i])
      out.push_back(static_cast<int>(i));
  return out;
}

namespace {

class partitioner {
public:
  partitioner(const graph& g, const std::set<int>& fed,
              const std::map<std::string, std::uint64_t>& incarnations)
    : g_(g), fed_(fed), incarnations_(incarnations) {}

  status run(const std::vector<int>& node_ids) {
    auto layout = find_frames(g_);
    if (!layout)
      return layout.error();
    layout_ = std::move(*layout);
    // Copy every node first so that edges can refer to producers in any order.
    for (auto id : node_ids) {
      auto& n = g_.at(id);
      if (n.assigned_device.empty())
        return make_error(errc::internal, "node '" + n.name + "' was not placed");
      node copy = n;
      copy.inputs.clear();
      copy.control_inputs.clear();
      auto added = part(n.assigned_device).add_node_verbatim(std::move(copy));
      if (!added)
        return added.error();
      local_id_[id] = *added;
      auto frame = layout_.frame_of[static_cast<std::size_t>(id)];
      if (frame > 0)
        frames_in_[n.assigned_device].insert(frame);
      if (n.op == "LoopCond")
        home_[frame] = id;
      if (n.op == "Switch")
        has_switch_ = true;
    }
    for (auto id : node_ids)
      if (auto& n = g_.at(id); n.op == "Merge") {
        auto frame = layout_.frame_of[static_cast<std::size_t>(id)];
        auto home = home_.find(frame);
        if (home != home_.end() && g_.at(home->second).assigned_device == n.assigned_device)
          home_merge_.emplace(frame, id);
      }
    for (auto id : node_ids) {
      auto& n = g_.at(id);
      auto& dst = part(n.assigned_device);
      auto& local = dst.at(local_id_.at(id));
      if (fed_.count(id) == 0)
        for (auto& in : n.inputs) {
          auto source = resolve_data(in, n.assigned_device);
          if (!source)
            return source.error();
          local.inputs.push_back(*source);
        }
      for (auto c : n.control_inputs) {
        auto source = resolve_control(c, n.assigned_device);
        if (!source)
          return source.error();
        local.control_inputs.push_back(*source);
      }
    }
    return add_loop_control();
  }

  std::map<std::string, std::shared_ptr<graph>> take() { return std::move(parts_); }

private:
  graph& part(const std::string& device) {
    auto& p = parts_[device];
    if (!p)
      p = std::make_shared<graph>();
    return *p;
  }

  result<edge_source> resolve_data(const edge_source& in, const std::string& dst_device) {
    auto i = local_id_.find(in.node_id);
    if (i == local_id_.end())
      return make_error(errc::internal, "input node '" + g_.at(in.node_id).name + "' was pruned");
    auto& src = g_.at(in.node_id);
    if (src.assigned_device == dst_device)
      return edge_source{i->second, in.index};
    auto tensor_name = src.name + ":" + std::to_string(in.index);
    auto cache_key = tensor_name + "|" + dst_device;
    if (auto r = recv_cache_.find(cache_key); r != recv_cache_.end())
      return edge_source{r->second, 0};
    auto key = key_for(src.assigned_device, dst_device, tensor_name);
    auto type = src.output_types[static_cast<std::size_t>(in.index)];
    auto shape = src.output_shapes[static_cast<std::size_t>(in.index)];
    auto sent = add_send(src.assigned_device, dst_device, key, edge_source{i->second, in.index},
                         type, "_send_" + src.name + "_" + std::to_string(in.index));
    if (!sent.ok())
      return sent;
    auto received = add_recv(dst_device, src.assigned_device, key, type, shape,
                             "_recv_" + src.name + "_" + std::to_string(in.index));
    if (!received)
      return received.error();
    recv_cache_[cache_key] = *received;
    note_recv_in_frame(dst_device, layout_.output_frame(g_, in.node_id), *received);
    return edge_source{*received, 0};
  }

  result<int> resolve_control(int src_id, const std::string& dst_device) {
    auto i = local_id_.find(src_id);
    if (i == local_id_.end())
      return make_error(errc::internal, "control input '" + g_.at(src_id).name + "' was pruned");
    auto& src = g_.at(src_id);
    if (src.assigned_device == dst_device)
      return i->second;
    auto cache_key = "^" + src.name + "|" + dst_device;
    if (auto r = recv_cache_.find(cache_key); r != recv_cache_.end())
      return r->second;
    // A dummy scalar that runs after the source carries the dependency across devices.
    auto dummy = zero_scalar("_ctrl_" + src.name + "_to_" + sanitize(dst_device), src.assigned_device);
    dummy.control_inputs = {i->second};
    auto dummy_id = part(src.assigned_device).add_node_verbatim(std::move(dummy));
    if (!dummy_id)
      return dummy_id.error();
    auto key = key_for(src.assigned_device, dst_device, "^" + src.name);
    auto sent = add_send(src.assigned_device, dst_device, key, edge_source{*dummy_id, 0},
                         dtype::float32, "_send_ctrl_" + src.name + "_to_" + sanitize(dst_device));
    if (!sent.ok())
      return sent;
    auto received = add_recv(dst_device, src.assigned_device, key, dtype::float32, tensor_shape{},
                             "_recv_ctrl_" + src.name);
    if (!received)
      return received.error();
    recv_cache_[cache_key] = *received;
    note_recv_in_frame(dst_device, layout_.output_frame(g_, src_id), *received);
    return *received;
  }

  /// The key's text, with the sending device's incarnation.
  std::string key_for(const std::string& send_device, const std::string& recv_device,
                      const std::string& tensor) const {
    auto incarnation = incarnations_.find(send_device);
    return make_rendezvous_key(send_device, recv_device, tensor,
                               incarnation == incarnations_.end() ? 0 : incarnation->second)
      .to_string();
  }

  /// A float32 scalar 0 on `device`: what carries a control edge or enters a control loop.
  static node zero_scalar(const std::string& name, const std::string& device) {
    node zero;
    zero.name = name;
    zero.op = "Const";
    zero.attrs = {{"value", tensor::scalar(0.f)}, {"dtype", dtype::float32}};
    zero.output_types = {dtype::float32};
    zero.output_shapes = {tensor_shape{}};
    zero.kernel_type = dtype::float32;
    zero.assigned_device = device;
    return zero;
  }

  static std::string sanitize(const std::string& device) {
    std::string out = device;
    std::replace(out.begin(), out.end(), '/', '_');
    std::replace(out.begin(), out.end(), ':', '_');
    return out;
  }

  status add_send(const std::string& device, const std::string& recv_device, const std::string& key,
                  edge_source input, dtype type, const std::string& name) {
    node send;
    send.name = name + "_to_" + sanitize(recv_device);
    send.op = "_Send";
    send.inputs = {input};
    send.attrs = {{"key", key}, {"send_device", device}, {"recv_device", recv_device}};
    send.kernel_type = type;
    send.assigned_device = device;
    auto added = part(device).add_node_verbatim(std::move(send));
    return added ? status{} : added.error();
  }

  result<int> add_recv(const std::string& device, const std::string& send_device,
                       const std::string& key, dtype type, const tensor_shape& shape,
                       const std::string& name) {
    node recv;
    recv.name = name + "_from_" + sanitize(send_device);
    recv.op = "_Recv";
    recv.attrs = {{"key", key}, {"send_device", send_device}, {"recv_device", device},
                  {"dtype", type}, {"shape", shape}};
    recv.output_types = {type};
    recv.output_shapes = {shape};
    // With Switches in the graph a dead value may arrive: the receiving step tracks deadness.
    if (has_switch_)
      recv.attrs["may_be_dead"] = true;
    recv.kernel_type = type;
    recv.assigned_device = device;
    return part(device).add_node_verbatim(std::move(recv));
  }

  /// A _Recv made in a loop's frame runs once per iteration: it waits for the node that
  /// drives the frame's iterations on its device (add_loop_control).
  void note_recv_in_frame(const std::string& device, int frame, int recv) {
    if (frame > 0) {
      frames_in_[device].insert(frame);
      frame_recvs_[{device, frame}].push_back(recv);
    }
  }

  /// TensorFlow's distributed while loop: a device running part of a loop whose LoopCond is
  /// elsewhere gets its own copy of the loop's control, driven by the condition's value sent
  /// to it every iteration: Enter -> Merge -> Switch(LoopCond received) -> Identity ->
  /// NextIteration -> Merge. On the LoopCond's own device one of the loop's Merges drives (the
  /// LoopCond itself may wait for a _Recv). Every _Recv in
  /// a loop's frame waits for its device's driver, so that it runs once per iteration. Loops
  /// around the loop get the same, outermost first.
  status add_loop_control() {
    std::map<std::pair<std::string, int>, int> driver;
    auto frames_in = frames_in_; // control loops add receives to these
    for (auto& [device, frames] : frames_in) {
      std::set<int> needed;
      for (auto f : frames)
        for (auto a = f; a > 0; a = layout_.frames[static_cast<std::size_t>(a)].parent)
          needed.insert(a);
      // Outer frames first (a frame's index is above its parent's).
      for (auto f : needed) {
        auto home = home_.find(f);
        if (home == home_.end())
          return make_error(errc::invalid_argument,
                            "while loop '" + layout_.frames[static_cast<std::size_t>(f)].name +
                              "' has no LoopCond among the nodes this step runs");
        auto& loop_cond = g_.at(home->second);
        if (loop_cond.assigned_device == device) {
          // At home a Merge of the loop drives (it depends on nothing received this iteration;
          // the LoopCond may).
          auto merge = home_merge_.find(f);
          if (merge == home_merge_.end())
            return make_error(errc::invalid_argument,
                              "while loop '" + layout_.frames[static_cast<std::size_t>(f)].name +
                                "' has no Merge beside its LoopCond on " + device);
          driver[{device, f}] = local_id_.at(merge->second);
          continue;
        }
        auto made = add_control_loop(device, f, driver);
        if (!made)
          return made.error();
        driver[{device, f}] = *made;
      }
    }
    for (auto& [where, recvs] : frame_recvs_) {
      auto d = driver.find(where);
      if (d == driver.end())
        return make_error(errc::internal, "no driver for a loop frame on " + where.first);
      for (auto recv : recvs)
        part(where.first).at(recv).control_inputs.push_back(d->second);
    }
    return {};
  }

  /// The control loop of frame `f` on `device`; returns its Merge (the frame's driver there).
  result<int> add_control_loop(const std::string& device, int f,
                               const std::map<std::pair<std::string, int>, int>& driver) {
    auto& frame = layout_.frames[static_cast<std::size_t>(f)];
    auto& p = part(device);
    auto prefix = "_loop_control/" + frame.name + "/" + sanitize(device) + "/";
    auto add = [&](const std::string& name, const std::string& op, std::vector<edge_source> inputs,
                   dtype type, int outputs) -> result<int> {
      node n;
      n.name = prefix + name;
      n.op = op;
      n.inputs = std::move(inputs);
      n.kernel_type = type;
      n.assigned_device = device;
      n.output_types.assign(static_cast<std::size_t>(outputs), type);
      n.output_shapes.assign(static_cast<std::size_t>(outputs), tensor_shape{});
      return p.add_node_verbatim(std::move(n));
    };
    // What enters: a scalar in the step's frame, else the outer frame's driver.
    edge_source entering;
    dtype type = dtype::float32;
    if (frame.parent == 0) {
      auto id = p.add_node_verbatim(zero_scalar(prefix + "zero", device));
      if (!id)
        return id.error();
      entering = edge_source{*id, 0};
    } else {
      auto outer = driver.at({device, frame.parent});
      entering = edge_source{outer, 0};
      type = p.at(outer).output_types.at(0);
    }
    auto enter = add("Enter", "Enter", {entering}, type, 1);
    if (!enter)
      return enter.error();
    p.at(*enter).attrs = {{"frame_name", frame.name},
                          {"is_constant", false},
                          {"parallel_iterations", frame.parallel_iterations}};
    auto merge = add("Merge", "Merge", {edge_source{*enter, 0}, edge_source{*enter, 0}}, type, 2);
    if (!merge)
      return merge.error();
    p.at(*merge).output_types[1] = dtype::int32;
    auto pred = resolve_data(edge_source{home_.at(f), 0}, device);
    if (!pred)
      return pred.error();
    auto switched = add("Switch", "Switch", {edge_source{*merge, 0}, *pred}, type, 2);
    if (!switched)
      return switched.error();
    auto pivot = add("Identity", "Identity", {edge_source{*switched, 1}}, type, 1);
    if (!pivot)
      return pivot.error();
    auto next = add("NextIteration", "NextIteration", {edge_source{*pivot, 0}}, type, 1);
    if (!next)
      return next.error();
    p.at(*merge).inputs[1] = edge_source{*next, 0};
    return *merge;
  }

  const graph& g_;
  frame_layout layout_;
  /// Per device, the loop frames it runs nodes of.
  std::map<std::string, std::set<int>> frames_in_;
  /// The LoopCond of each frame, and a Merge of the frame on the LoopCond's device.
  std::map<int, int> home_;
  std::map<int, int> home_merge_;
  bool has_switch_ = false;
  std::map<std::pair<std::string, int>, std::vector<int>> frame_recvs_;
  const std::set<int>& fed_;
  const std::map<std::string, std::uint64_t>& incarnations_;
  std::map<std::string, std::shared_ptr<graph>> parts_;
  std::map<int, int> local_id_;
  std::map<std::string, int> recv_cache_;
};

} // namespace

result<std::map<std::string, std::shared_ptr<graph>>>
partition_graph(const graph& g, const std::vector<int>& node_ids, const std::set<int>& fed,
                const std::map<std::string, std::uint64_t>& incarnations) {
  partitioner p{g, fed, incarnations};
  AF_RETURN_IF_ERROR(p.run(node_ids));
  return p.take();
}

} // namespace actorflow

#include "graph/partition.hpp"

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
    return {};
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
    auto& src_part = part(src.assigned_device);
    node dummy;
    dummy.name = "_ctrl_" + src.name + "_to_" + sanitize(dst_device);
    dummy.op = "Const";
    dummy.attrs = {{"value", tensor::scalar(0.f)}, {"dtype", dtype::float32}};
    dummy.output_types = {dtype::float32};
    dummy.output_shapes = {tensor_shape{}};
    dummy.kernel_type = dtype::float32;
    dummy.assigned_device = src.assigned_device;
    dummy.control_inputs = {i->second};
    auto dummy_id = src_part.add_node_verbatim(std::move(dummy));
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
    recv.kernel_type = type;
    recv.assigned_device = device;
    return part(device).add_node_verbatim(std::move(recv));
  }

  const graph& g_;
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

#include "actors/protocols/master.hpp"

#include "serialization/graph_io.hpp"

#include <caf/local_actor.hpp>
#include <caf/node_id.hpp>
#include <caf/scoped_actor.hpp>

#include <iostream>

namespace actorflow::protocol {

session_config make_session_config(bool allow_soft_placement, bool log_device_placement,
                                   std::int64_t timeout_ms, caf::actor owner,
                                   std::string default_task) {
  session_config config;
  config.allow_soft_placement = allow_soft_placement;
  config.log_device_placement = log_device_placement;
  config.timeout_ms = timeout_ms;
  config.owner = std::move(owner);
  config.default_task = std::move(default_task);
  return config;
}

result<graph_def> make_graph_def(const graph& g) {
  AF_RETURN_IF_ERROR(g.status());
  auto bytes = serialize_graph(g);
  if (!bytes)
    return bytes.error();
  auto copy = std::make_shared<graph>();
  AF_RETURN_IF_ERROR(deserialize_graph(bytes->data(), bytes->size(), *copy));
  return graph_def{std::move(copy)};
}

namespace {

/// The one graph every output of a request must belong to: the given one, or the first seen.
status check_owner(const output& o, const graph*& owner, bool owner_given, const char* what) {
  if (!o.valid())
    return make_error(errc::invalid_argument, std::string{"a "} + what + " names no tensor");
  if (owner == nullptr)
    owner = o.owner;
  if (o.owner != owner)
    return make_error(errc::invalid_argument,
                      std::string{"the "} + what + " '" + o.tensor_name() +
                        "' belongs to another graph than " +
                        (owner_given ? "the session's" : "the rest"));
  return {};
}

status check_feed(const output& target, const tensor& value) {
  if (!value.is_initialized())
    return make_error(errc::invalid_argument,
                      "the value fed to '" + target.tensor_name() + "' is empty");
  if (value.type() != target.type())
    return make_error(errc::invalid_argument,
                      "cannot feed a " + std::string{to_string(value.type())} + " tensor to '" +
                        target.tensor_name() + "', which has dtype " + to_string(target.type()));
  if (!target.shape().is_compatible_with(value.shape()))
    return make_error(errc::invalid_argument,
                      "cannot feed a tensor of shape " + value.shape().to_string() + " to '" +
                        target.tensor_name() + "', which has shape " + target.shape().to_string());
  return {};
}

} // namespace

result<master_run_request> make_master_run_request(std::int64_t handle,
                                                   const std::vector<output>& fetches,
                                                   const feed_list& feeds,
                                                   const std::vector<output>& targets,
                                                   const graph* of_graph) {
  const graph* owner = of_graph;
  bool given = of_graph != nullptr;
  master_run_request request;
  request.handle = handle;
  for (auto& f : fetches) {
    AF_RETURN_IF_ERROR(check_owner(f, owner, given, "fetch"));
    request.fetches.push_back(f.tensor_name());
  }
  for (auto& t : targets) {
    AF_RETURN_IF_ERROR(check_owner(t, owner, given, "target"));
    request.targets.push_back(t.name());
  }
  for (auto& [target, value] : feeds) {
    AF_RETURN_IF_ERROR(check_owner(target, owner, given, "feed"));
    AF_RETURN_IF_ERROR(check_feed(target, value));
    request.feeds.emplace_back(target.tensor_name(), value);
  }
  return request;
}

void send_stop(const caf::actor& whom) {
  if (!whom)
    return;
  caf::scoped_actor self{whom->home_system()};
  self->send(whom, stop_atom::value);
}

bool stop_from_own_node(caf::local_actor* self, const std::string& name) {
  const auto& sender = self->current_sender();
  if (sender && sender->node() == self->node())
    return true;
  std::cerr << "actorflow: " + name + ": refused a stop " +
                 (sender ? "from node " + caf::to_string(sender->node()) + ", not this one"
                         : std::string{"from an anonymous sender (its node is unknown)"}) +
                 "; stop a task with a signal to its process\n"
            << std::flush;
  return false;
}

} // namespace actorflow::protocol

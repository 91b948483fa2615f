#include "serialization/graph_io.hpp"

#include "serialization/file_io.hpp"

#include "serialization/capnp_codec.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/io.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_map>
#include <utility>

namespace actorflow {

namespace {

using namespace file_io;

using namespace actorflow::serialization;

status corrupt(std::string message) { return make_error(errc::data_loss, std::move(message)); }

/// A name for an error message: quoted, and cut short so that a hostile megabyte-long name
/// does not become a megabyte-long message.
std::string quoted(const std::string& s) {
  constexpr std::size_t max_shown = 80;
  if (s.size() <= max_shown)
    return "'" + s + "'";
  return "'" + s.substr(0, max_shown) + "...' (" + std::to_string(s.size()) + " bytes)";
}

capnp::Text::Reader text(const std::string& s) { return capnp::Text::Reader{s.data(), s.size()}; }

std::string to_std(capnp::Text::Reader t) { return std::string{t.cStr(), t.size()}; }

// --- encoding ---------------------------------------------------------------------------------

void encode_output_ref(int node_id, int index, schema::OutputRef::Builder out) {
  out.setNode(node_id);
  out.setIndex(index);
}

status encode_attr(const std::string& key, const attr_value& value, schema::Attr::Builder out) {
  out.setKey(text(key));
  auto v = out.initValue();
  status s;
  std::visit(
    [&](const auto& x) {
      using T = std::decay_t<decltype(x)>;
      if constexpr (std::is_same_v<T, bool>) {
        v.setBoolean(x);
      } else if constexpr (std::is_same_v<T, std::int64_t>) {
        v.setInt64(x);
      } else if constexpr (std::is_same_v<T, double>) {
        v.setFloat64(x);
      } else if constexpr (std::is_same_v<T, std::string>) {
        v.setText(text(x));
      } else if constexpr (std::is_same_v<T, dtype>) {
        v.setDtype(encode_dtype(x));
      } else if constexpr (std::is_same_v<T, tensor_shape>) {
        encode_shape(x, v.initShape());
      } else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
        auto list = v.initInt64List(static_cast<unsigned>(x.size()));
        for (unsigned i = 0; i < list.size(); ++i)
          list.set(i, x[i]);
      } else {
        static_assert(std::is_same_v<T, tensor>, "an attr_value alternative is not encoded");
        s = encode_tensor(x, v.initTensor());
      }
    },
    value);
  return s;
}

status encode_node(const node& n, schema::Node::Builder out) {
  out.setName(text(n.name));
  out.setOp(text(n.op));
  auto inputs = out.initInputs(static_cast<unsigned>(n.inputs.size()));
  for (unsigned i = 0; i < inputs.size(); ++i)
    encode_output_ref(n.inputs[i].node_id, n.inputs[i].index, inputs[i]);
  auto control = out.initControlInputs(static_cast<unsigned>(n.control_inputs.size()));
  for (unsigned i = 0; i < control.size(); ++i)
    control.set(i, n.control_inputs[i]);
  auto attrs = out.initAttrs(static_cast<unsigned>(n.attrs.size()));
  unsigned k = 0;
  for (auto& [key, value] : n.attrs) {
    auto s = encode_attr(key, value, attrs[k++]);
    if (!s.ok())
      return s.with_context("attr " + quoted(key));
  }
  out.setRequestedDevice(text(n.requested_device));
  out.setAssignedDevice(text(n.assigned_device));
  auto types = out.initOutputTypes(static_cast<unsigned>(n.output_types.size()));
  for (unsigned i = 0; i < types.size(); ++i)
    types.set(i, encode_dtype(n.output_types[i]));
  auto shapes = out.initOutputShapes(static_cast<unsigned>(n.output_shapes.size()));
  for (unsigned i = 0; i < shapes.size(); ++i)
    encode_shape(n.output_shapes[i], shapes[i]);
  out.setKernelType(encode_dtype(n.kernel_type));
  return {};
}

/// A first-segment size that usually holds the whole message, so it is one flat block.
std::size_t estimated_words(const graph& g) {
  std::size_t bytes = 1024;
  for (std::size_t i = 0; i < g.size(); ++i) {
    auto& n = g.at(static_cast<int>(i));
    bytes += 256 + n.name.size() + n.op.size() + n.requested_device.size() +
             n.assigned_device.size() + 16 * (n.inputs.size() + n.output_shapes.size());
    for (auto& [key, value] : n.attrs) {
      bytes += 64 + key.size();
      if (auto* t = std::get_if<tensor>(&value))
        bytes += t->is_initialized() ? t->bytes() : 0;
    }
  }
  bytes += 64 * g.global_variables().size();
  constexpr std::size_t max_segment_words = (std::size_t{1} << 29) - 1;
  return std::min(bytes / sizeof(capnp::word) + 1, max_segment_words);
}

status encode_graph(const graph& g, schema::Graph::Builder out) {
  out.setFormatVersion(graph_format_version);
  auto nodes = out.initNodes(static_cast<unsigned>(g.size()));
  for (unsigned i = 0; i < nodes.size(); ++i) {
    auto& n = g.at(static_cast<int>(i));
    auto s = encode_node(n, nodes[i]);
    if (!s.ok())
      return s.with_context("node " + std::to_string(i) + " (" + quoted(n.name) + ")");
  }
  auto& vars = g.global_variables();
  auto variables = out.initVariables(static_cast<unsigned>(vars.size()));
  for (unsigned i = 0; i < variables.size(); ++i) {
    auto& v = vars[i];
    if (!v.ref.valid())
      return make_error(errc::invalid_argument, "variable " + std::to_string(i) + " has no node");
    auto var = variables[i];
    encode_output_ref(v.ref.node_id, v.ref.index, var.initRef());
    // An absent read or initializer is written as node -1.
    encode_output_ref(v.read.valid() ? v.read.node_id : -1, v.read.index, var.initRead());
    encode_output_ref(v.initializer.valid() ? v.initializer.node_id : -1, v.initializer.index,
                      var.initInitializer());
  }
  auto seed = out.initSeed();
  if (g.seed)
    seed.setValue(*g.seed);
  else
    seed.setNone();
  return {};
}

/// Encodes `g` into a message and calls `f(message)`, which returns a status; a kj::Exception
/// (a list past Cap'n Proto's limits) becomes invalid_argument.
template <class F>
status with_graph_message(const graph& g, F&& f) {
  try {
    capnp::MallocMessageBuilder message{static_cast<unsigned>(estimated_words(g))};
    AF_RETURN_IF_ERROR(encode_graph(g, message.initRoot<schema::Graph>()));
    return f(message);
  } catch (const kj::Exception& e) {
    return make_error(errc::invalid_argument, e.getDescription().cStr());
  } catch (const std::bad_alloc&) {
    return make_error(errc::resource_exhausted, "out of memory while encoding");
  }
}

// --- decoding ---------------------------------------------------------------------------------

/// "node 3 ('mul')", or "node 3" before the name is known.
std::string node_context(std::size_t index, const std::string* name) {
  auto s = "node " + std::to_string(index);
  return name != nullptr ? s + " (" + quoted(*name) + ")" : s;
}

result<attr_value> decode_attr_value(schema::Attr::Value::Reader v) {
  switch (v.which()) {
    case schema::Attr::Value::BOOLEAN: return attr_value{v.getBoolean()};
    case schema::Attr::Value::INT64: return attr_value{v.getInt64()};
    case schema::Attr::Value::FLOAT64: return attr_value{v.getFloat64()};
    case schema::Attr::Value::TEXT: return attr_value{to_std(v.getText())};
    case schema::Attr::Value::DTYPE: {
      auto t = decode_dtype(v.getDtype());
      if (!t)
        return t.error();
      return attr_value{*t};
    }
    case schema::Attr::Value::SHAPE: {
      auto s = decode_shape(v.getShape(), false);
      if (!s)
        return s.error();
      return attr_value{std::move(*s)};
    }
    case schema::Attr::Value::INT64_LIST: {
      auto list = v.getInt64List();
      std::vector<std::int64_t> values;
      values.reserve(list.size());
      for (auto x : list)
        values.push_back(x);
      return attr_value{std::move(values)};
    }
    case schema::Attr::Value::TENSOR: {
      auto t = decode_tensor(v.getTensor());
      if (!t)
        return t.error();
      return attr_value{std::move(*t)};
    }
  }
  return corrupt("unknown value kind " + std::to_string(static_cast<unsigned>(v.which())));
}

/// Decodes node `index` on its own; edges are checked later, once every node's output count is
/// known. `names` maps the names seen so far to their node index.
result<node> decode_node(schema::Node::Reader in, std::size_t index,
                         std::unordered_map<std::string, std::size_t>& names) {
  node n;
  n.id = static_cast<int>(index);
  n.name = to_std(in.getName());
  if (n.name.empty())
    return corrupt(node_context(index, nullptr) + ": field 'name' is empty");
  auto context = node_context(index, &n.name);
  auto [previous, inserted] = names.emplace(n.name, index);
  if (!inserted)
    return corrupt(context + ": field 'name' duplicates the name of node " +
                   std::to_string(previous->second));
  n.op = to_std(in.getOp());
  if (n.op.empty())
    return corrupt(context + ": field 'op' is empty");

  auto inputs = in.getInputs();
  n.inputs.reserve(inputs.size());
  for (auto ref : inputs)
    n.inputs.push_back(edge_source{ref.getNode(), ref.getIndex()});
  auto control = in.getControlInputs();
  n.control_inputs.reserve(control.size());
  for (auto c : control)
    n.control_inputs.push_back(c);

  auto attrs = in.getAttrs();
  for (unsigned i = 0; i < attrs.size(); ++i) {
    auto attr = attrs[i];
    auto key = to_std(attr.getKey());
    auto value = decode_attr_value(attr.getValue());
    if (!value)
      return value.error().with_context(context + ": attr " + quoted(key));
    if (!n.attrs.emplace(key, std::move(*value)).second)
      return corrupt(context + ": attr " + quoted(key) + " appears twice");
  }

  n.requested_device = to_std(in.getRequestedDevice());
  n.assigned_device = to_std(in.getAssignedDevice());

  auto types = in.getOutputTypes();
  auto shapes = in.getOutputShapes();
  if (types.size() != shapes.size())
    return corrupt(context + ": " + std::to_string(types.size()) + " output_types but " +
                   std::to_string(shapes.size()) + " output_shapes");
  n.output_types.reserve(types.size());
  for (unsigned i = 0; i < types.size(); ++i) {
    auto t = decode_dtype(types[i]);
    if (!t)
      return t.error().with_context(context + ": output_types[" + std::to_string(i) + "]");
    n.output_types.push_back(*t);
  }
  n.output_shapes.reserve(shapes.size());
  for (unsigned i = 0; i < shapes.size(); ++i) {
    auto s = decode_shape(shapes[i], false);
    if (!s)
      return s.error().with_context(context + ": output_shapes[" + std::to_string(i) + "]");
    n.output_shapes.push_back(std::move(*s));
  }
  auto kernel_type = decode_dtype(in.getKernelType());
  if (!kernel_type)
    return kernel_type.error().with_context(context + ": kernel_type");
  n.kernel_type = *kernel_type;
  return n;
}

/// Checks that (node_id, index) names an existing output of `nodes`.
status check_output_ref(const std::vector<node>& nodes, int node_id, int index) {
  if (node_id < 0 || static_cast<std::size_t>(node_id) >= nodes.size())
    return corrupt("refers to node " + std::to_string(node_id) + ", but the graph has " +
                   std::to_string(nodes.size()) + " nodes");
  auto& producer = nodes[static_cast<std::size_t>(node_id)];
  if (index < 0 || static_cast<std::size_t>(index) >= producer.output_types.size())
    return corrupt("refers to output " + std::to_string(index) + " of node " +
                   std::to_string(node_id) + " (" + quoted(producer.name) + "), which has " +
                   std::to_string(producer.output_types.size()) + " outputs");
  return {};
}

status check_edges(const std::vector<node>& nodes) {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    auto& n = nodes[i];
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      auto s = check_output_ref(nodes, n.inputs[k].node_id, n.inputs[k].index);
      if (!s.ok())
        return s.with_context(node_context(i, &n.name) + ": inputs[" + std::to_string(k) + "]");
    }
    for (std::size_t k = 0; k < n.control_inputs.size(); ++k) {
      auto c = n.control_inputs[k];
      if (c < 0 || static_cast<std::size_t>(c) >= nodes.size())
        return corrupt(node_context(i, &n.name) + ": control_inputs[" + std::to_string(k) +
                       "] refers to node " + std::to_string(c) + ", but the graph has " +
                       std::to_string(nodes.size()) + " nodes");
    }
  }
  return {};
}

struct decoded_variable {
  edge_source ref, read, initializer;
};

result<std::vector<decoded_variable>>
decode_variables(capnp::List<schema::Variable>::Reader in, const std::vector<node>& nodes) {
  std::vector<decoded_variable> out;
  std::unordered_map<int, unsigned> by_node;
  for (unsigned i = 0; i < in.size(); ++i) {
    auto v = in[i];
    decoded_variable d;
    auto context = "variable " + std::to_string(i);
    auto check = [&](schema::OutputRef::Reader ref, edge_source& dst, const char* field,
                     bool optional) -> status {
      dst = edge_source{ref.getNode(), ref.getIndex()};
      if (optional && dst.node_id == -1)
        return {};
      return check_output_ref(nodes, dst.node_id, dst.index).with_context(context + ": " + field);
    };
    AF_RETURN_IF_ERROR(check(v.getRef(), d.ref, "ref", false));
    AF_RETURN_IF_ERROR(check(v.getRead(), d.read, "read", true));
    AF_RETURN_IF_ERROR(check(v.getInitializer(), d.initializer, "initializer", true));
    auto [previous, inserted] = by_node.emplace(d.ref.node_id, i);
    if (!inserted)
      return corrupt(context + ": ref names node " + std::to_string(d.ref.node_id) + " (" +
                     quoted(nodes[static_cast<std::size_t>(d.ref.node_id)].name) +
                     "), like variable " + std::to_string(previous->second));
    out.push_back(d);
  }
  return out;
}

status decode_graph(schema::Graph::Reader in, graph& out) {
  auto version = in.getFormatVersion();
  if (version == 0)
    return corrupt("format version 0: not an actorflow graph");
  if (version > graph_format_version)
    return make_error(errc::unimplemented,
                      "format version " + std::to_string(version) +
                        " was written by a newer actorflow; this build reads up to version " +
                        std::to_string(graph_format_version));

  // Decode and check everything before touching `out`: nodes one by one (so that a hostile
  // node count costs nothing until real nodes back it), then the edges between them.
  auto nodes_in = in.getNodes();
  std::vector<node> nodes;
  std::unordered_map<std::string, std::size_t> names;
  for (unsigned i = 0; i < nodes_in.size(); ++i) {
    // Cap'n Proto reports bad pointers by throwing; say which node they were in.
    try {
      auto n = decode_node(nodes_in[i], i, names);
      if (!n)
        return n.error();
      nodes.push_back(std::move(*n));
    } catch (const kj::Exception& e) {
      return corrupt(node_context(i, nullptr) + " is corrupt: " + e.getDescription().cStr());
    }
  }
  AF_RETURN_IF_ERROR(check_edges(nodes));
  auto variables = decode_variables(in.getVariables(), nodes);
  if (!variables)
    return variables.error();
  auto seed = in.getSeed();
  std::optional<std::int64_t> seed_value;
  switch (seed.which()) {
    case schema::Graph::Seed::NONE: break;
    case schema::Graph::Seed::VALUE: seed_value = seed.getValue(); break;
    default:
      return corrupt("field 'seed' has unknown kind " +
                     std::to_string(static_cast<unsigned>(seed.which())));
  }

  for (std::size_t i = 0; i < nodes.size(); ++i) {
    auto name = nodes[i].name;
    auto id = out.add_node_verbatim(std::move(nodes[i]));
    if (!id)
      return id.error().with_context(node_context(i, &name));
    if (static_cast<std::size_t>(*id) != i)
      return make_error(errc::internal, node_context(i, &name) + " was added as node " +
                                          std::to_string(*id));
  }
  for (auto& v : *variables) {
    auto as_output = [&](edge_source e) {
      return e.node_id < 0 ? output{} : out.output_of(e.node_id, e.index);
    };
    out.add_variable(variable{as_output(v.ref), as_output(v.read), as_output(v.initializer)});
  }
  out.seed = seed_value;
  return {};
}

// --- files ------------------------------------------------------------------------------------

/// Writes a message's segments straight to a file, without flattening them into one buffer
/// first. kj::OutputStream cannot return an error, so the first one is kept and later writes
/// are skipped.
class fd_output_stream final : public kj::OutputStream {
public:
  fd_output_stream(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}
  void write(const void* buffer, size_t size) override {
    if (error_.ok())
      error_ = write_all(fd_, static_cast<const std::uint8_t*>(buffer), size, name_);
  }
  const status& error() const { return error_; }

private:
  int fd_;
  std::string name_;
  status error_;
};

result<std::vector<std::uint8_t>> read_file(const std::string& path) {
  // O_NONBLOCK so that opening a FIFO without a writer does not wait; it has no effect on
  // reading a regular file, the only kind accepted below.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return errno_error("cannot open", errno);
  fd_guard file{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0)
    return errno_error("cannot stat", errno);
  // FIFOs, devices and directories could block forever or never end.
  if (!S_ISREG(info.st_mode))
    return make_error(errc::invalid_argument, "not a regular file");
  auto size = static_cast<std::size_t>(info.st_size);
  std::vector<std::uint8_t> bytes(size);
  std::size_t done = 0;
  while (done < size) {
    auto n = ::read(fd, bytes.data() + done, size - done);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return errno_error("read failed at byte " + std::to_string(done), errno);
    }
    if (n == 0)
      return make_error(errc::data_loss, "file shrank to " + std::to_string(done) +
                                           " bytes while being read (expected " +
                                           std::to_string(size) + ")");
    done += static_cast<std::size_t>(n);
  }
  return bytes;
}

} // namespace

result<std::vector<std::uint8_t>> serialize_graph(const graph& g) {
  std::vector<std::uint8_t> bytes;
  auto s = with_graph_message(g, [&](capnp::MessageBuilder& message) {
    bytes = message_bytes(message);
    return status{};
  });
  if (!s.ok())
    return s.with_context("cannot serialise graph");
  return bytes;
}

status deserialize_graph(const std::uint8_t* data, std::size_t size, graph& out) {
  if (out.size() != 0 || !out.global_variables().empty())
    return make_error(errc::invalid_argument,
                      "deserialize_graph needs an empty graph; this one has " +
                        std::to_string(out.size()) + " nodes");
  auto s = read_message<schema::Graph>(data, size, "graph",
                                       [&](schema::Graph::Reader root) {
                                         return decode_graph(root, out);
                                       });
  if (!s.ok())
    out.record_error(s);
  return s;
}

status save_graph(const graph& g, const std::string& path) {
  auto s = with_graph_message(g, [&](capnp::MessageBuilder& message) {
    return write_file_atomically(path, [&](int fd, const std::string& name) {
      fd_output_stream out{fd, name};
      capnp::writeMessage(out, message);
      return out.error();
    });
  });
  return s.with_context("cannot save graph file '" + path + "'");
}

status load_graph(const std::string& path, graph& out) {
  auto context = "cannot load graph file '" + path + "'";
  if (out.size() != 0 || !out.global_variables().empty())
    return make_error(errc::invalid_argument, context + ": the graph to load into is not empty");
  auto bytes = read_file(path);
  if (!bytes)
    return bytes.error().with_context(context);
  auto s = deserialize_graph(bytes->data(), bytes->size(), out);
  return s.with_context(context);
}

result<std::vector<std::uint8_t>> serialize_tensor(const tensor& t) {
  try {
    auto payload = t.is_initialized() ? t.bytes() : 0;
    capnp::MallocMessageBuilder builder{
      static_cast<unsigned>(std::min(payload, max_blob_bytes) / sizeof(capnp::word) + 64)};
    auto s = encode_tensor(t, builder.initRoot<schema::Tensor>());
    if (!s.ok())
      return s.with_context("cannot serialise tensor");
    return message_bytes(builder);
  } catch (const kj::Exception& e) {
    return make_error(errc::invalid_argument, "cannot serialise tensor: " +
                                                std::string{e.getDescription().cStr()});
  } catch (const std::bad_alloc&) {
    return make_error(errc::resource_exhausted, "cannot serialise tensor: out of memory");
  }
}

result<tensor> deserialize_tensor(const std::uint8_t* data, std::size_t size) {
  std::optional<tensor> decoded;
  auto s = read_message<schema::Tensor>(data, size, "tensor", [&](schema::Tensor::Reader root) {
    auto t = decode_tensor(root);
    if (!t)
      return t.error();
    decoded = std::move(*t);
    return status{};
  });
  if (!s.ok())
    return s;
  return std::move(*decoded);
}

} // namespace actorflow

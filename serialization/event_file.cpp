#include "serialization/event_file.hpp"

#include "serialization/file_io.hpp"
#include "serialization/tensorboard.pb.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <filesystem>

#include <fcntl.h>
#include <unistd.h>

namespace actorflow {

namespace pb = actorflow::tensorboard;

namespace {

std::array<std::uint32_t, 256> make_crc32c_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc & 1) != 0 ? (crc >> 1) ^ 0x82f63b78u : crc >> 1; // Castagnoli, reflected
    table[i] = crc;
  }
  return table;
}

double wall_time_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

pb::DataType proto_type(dtype t) {
  switch (t) {
    case dtype::float32:
      return pb::DT_FLOAT;
    case dtype::float64:
      return pb::DT_DOUBLE;
    case dtype::int32:
      return pb::DT_INT32;
    case dtype::int64:
      return pb::DT_INT64;
    case dtype::boolean:
      return pb::DT_BOOL;
  }
  return pb::DT_INVALID;
}

void fill_shape(pb::TensorShapeProto& out, const tensor_shape& shape) {
  for (auto d : shape.dims())
    out.add_dim()->set_size(d);
}

/// A node's attributes TensorBoard shows: the plain ones (tensors and lists left out), its
/// dtype and its output shapes.
void fill_attrs(pb::NodeDef& out, const node& n) {
  auto& attrs = *out.mutable_attr();
  for (auto& [key, value] : n.attrs) {
    pb::AttrValue a;
    if (auto* b = std::get_if<bool>(&value))
      a.set_b(*b);
    else if (auto* i = std::get_if<std::int64_t>(&value))
      a.set_i(*i);
    else if (auto* f = std::get_if<double>(&value))
      a.set_f(static_cast<float>(*f));
    else if (auto* s = std::get_if<std::string>(&value))
      a.set_s(*s);
    else if (auto* t = std::get_if<dtype>(&value))
      a.set_type(proto_type(*t));
    else if (auto* shape = std::get_if<tensor_shape>(&value))
      fill_shape(*a.mutable_shape(), *shape);
    else
      continue;
    attrs[key] = std::move(a);
  }
  if (!n.output_types.empty() && attrs.count("T") == 0 && attrs.count("dtype") == 0)
    attrs["T"].set_type(proto_type(n.output_types.front()));
  pb::AttrValue shapes;
  for (auto& shape : n.output_shapes)
    fill_shape(*shapes.mutable_list()->add_shape(), shape);
  attrs["_output_shapes"] = std::move(shapes);
}

std::string input_name(const graph& g, const edge_source& e) {
  auto& name = g.at(e.node_id).name;
  return e.index == 0 ? name : name + ":" + std::to_string(e.index);
}

} // namespace

std::uint32_t crc32c(const void* data, std::size_t size) {
  static const auto table = make_crc32c_table();
  auto* bytes = static_cast<const std::uint8_t*>(data);
  std::uint32_t crc = 0xffffffffu;
  for (std::size_t i = 0; i < size; ++i)
    crc = table[(crc ^ bytes[i]) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

std::uint32_t masked_crc32c(const void* data, std::size_t size) {
  auto crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

result<std::unique_ptr<event_file_writer>>
event_file_writer::open(const std::string& log_dir, std::optional<std::int64_t> resumed_at_step) {
  AF_RETURN_IF_ERROR(file_io::ensure_writable_directory(log_dir));
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  // TensorBoard reads a directory's files in name order: a new file's seconds come after every
  // earlier file's, even one begun in this same second (a quick resume).
  auto seconds = static_cast<long long>(wall_time_now());
  const std::string prefix = "events.out.tfevents.";
  std::error_code ec;
  for (auto& entry : std::filesystem::directory_iterator(log_dir, ec)) {
    auto name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0)
      continue;
    auto digits = name.substr(prefix.size(), name.find('.', prefix.size()) - prefix.size());
    if (!digits.empty() && digits.size() <= 12 &&
        digits.find_first_not_of("0123456789") == std::string::npos)
      seconds = std::max(seconds, std::stoll(digits) + 1);
  }
  // A writer of this process that opened meanwhile took the name: the next second then.
  std::string path;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt, ++seconds) {
    path = log_dir + "/" + prefix + std::to_string(seconds) + "." + host + "." + std::to_string(::getpid());
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && (errno != EEXIST || attempt == 100))
      return file_io::errno_error("cannot create event file '" + path + "'", errno);
  }
  std::unique_ptr<event_file_writer> writer{new event_file_writer{fd, path}};
  pb::Event version;
  version.set_wall_time(wall_time_now());
  version.set_file_version("brain.Event:2");
  AF_RETURN_IF_ERROR(writer->write_event(version.SerializeAsString()));
  if (resumed_at_step) {
    pb::Event start;
    start.set_wall_time(wall_time_now());
    start.set_step(*resumed_at_step);
    start.mutable_session_log()->set_status(pb::SessionLog::START);
    AF_RETURN_IF_ERROR(writer->write_event(start.SerializeAsString()));
  }
  return writer;
}

status event_file_writer::write_event(const std::string& serialized_event) {
  // One record, one write: length, its CRC, the data, the data's CRC.
  std::vector<std::uint8_t> record(12 + serialized_event.size() + 4);
  file_io::put_le(record.data(), serialized_event.size(), 8);
  file_io::put_le(record.data() + 8, masked_crc32c(record.data(), 8), 4);
  std::memcpy(record.data() + 12, serialized_event.data(), serialized_event.size());
  file_io::put_le(record.data() + 12 + serialized_event.size(),
                  masked_crc32c(serialized_event.data(), serialized_event.size()), 4);
  return file_io::write_all(file_.get(), record.data(), record.size(),
                            "event file '" + path_ + "'");
}

status event_file_writer::add_scalars(std::int64_t step,
                                      const std::vector<std::pair<std::string, double>>& values) {
  pb::Event event;
  event.set_wall_time(wall_time_now());
  event.set_step(step);
  auto* summary = event.mutable_summary();
  for (auto& [tag, value] : values) {
    auto* v = summary->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  return write_event(event.SerializeAsString());
}

status event_file_writer::add_summary(std::int64_t step, const std::string& serialized_summary) {
  pb::Summary summary;
  if (!summary.ParseFromString(serialized_summary))
    return make_error(errc::invalid_argument, "event file '" + path_ + "': the summary of step " +
                                                std::to_string(step) + " is not a Summary");
  pb::Event event;
  event.set_wall_time(wall_time_now());
  event.set_step(step);
  *event.mutable_summary() = std::move(summary);
  return write_event(event.SerializeAsString());
}

namespace {

/// TF's default histogram bucket limits (tensorflow/core/lib/histogram): -DBL_MAX,
/// -1e20 .. -1e-12, 0, 1e-12 .. 1e20, DBL_MAX, by factors of 1.1.
const std::vector<double>& default_bucket_limits() {
  static const std::vector<double> limits = [] {
    std::vector<double> positive;
    for (double v = 1.0e-12; v < 1.0e20; v *= 1.1)
      positive.push_back(v);
    positive.push_back(std::numeric_limits<double>::max());
    std::vector<double> all;
    for (auto it = positive.rbegin(); it != positive.rend(); ++it)
      all.push_back(-*it);
    all.push_back(0.0);
    all.insert(all.end(), positive.begin(), positive.end());
    return all;
  }();
  return limits;
}

void fill_histogram(const std::vector<double>& values, pb::HistogramProto& out) {
  auto& limits = default_bucket_limits();
  std::vector<double> counts(limits.size(), 0.0);
  double low = std::numeric_limits<double>::max(), high = -low, sum = 0, squares = 0;
  for (double v : values) {
    // The first bucket whose limit is above v, as TF's Histogram::Add.
    auto at = std::upper_bound(limits.begin(), limits.end(), v) - limits.begin();
    counts[static_cast<std::size_t>(std::min<std::ptrdiff_t>(at, static_cast<std::ptrdiff_t>(limits.size()) - 1))] += 1;
    low = std::min(low, v);
    high = std::max(high, v);
    sum += v;
    squares += v * v;
  }
  out.set_min(low);
  out.set_max(high);
  out.set_num(static_cast<double>(values.size()));
  out.set_sum(sum);
  out.set_sum_squares(squares);
  // Runs of empty buckets become one, at the run's last limit (TF's EncodeToProto).
  for (std::size_t i = 0; i < limits.size();) {
    double end = limits[i], count = counts[i];
    std::size_t j = i + 1;
    while (count == 0.0 && j < limits.size() && counts[j] == 0.0) {
      end = limits[j];
      ++j;
    }
    out.add_bucket_limit(end);
    out.add_bucket(count);
    i = j;
  }
}

} // namespace

result<std::string> serialize_summary(const std::vector<summary_value>& values) {
  pb::Summary summary;
  for (auto& value : values) {
    auto* v = summary.add_value();
    v->set_tag(value.tag);
    if (value.histogram) {
      fill_histogram(value.values, *v->mutable_histo());
      continue;
    }
    if (value.values.size() != 1)
      return make_error(errc::invalid_argument,
                        "summary '" + value.tag + "': a scalar summary needs one value, not " +
                          std::to_string(value.values.size()));
    v->set_simple_value(static_cast<float>(value.values[0]));
  }
  return summary.SerializeAsString();
}

status event_file_writer::add_graph(const graph& g) {
  pb::GraphDef def;
  def.mutable_versions()->set_producer(1);
  for (int id = 0; id < static_cast<int>(g.size()); ++id) {
    auto& n = g.at(id);
    auto* out = def.add_node();
    out->set_name(n.name);
    out->set_op(n.op);
    out->set_device(n.assigned_device.empty() ? n.requested_device : n.assigned_device);
    for (auto& input : n.inputs)
      out->add_input(input_name(g, input));
    for (int control : n.control_inputs)
      out->add_input("^" + g.at(control).name);
    fill_attrs(*out, n);
  }
  pb::Event event;
  event.set_wall_time(wall_time_now());
  event.set_graph_def(def.SerializeAsString());
  return write_event(event.SerializeAsString());
}

result<std::vector<std::string>> read_event_records(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file{std::fopen(path.c_str(), "rb"), &std::fclose};
  if (!file)
    return file_io::errno_error("cannot read event file '" + path + "'", errno);
  std::fseek(file.get(), 0, SEEK_END);
  auto end = std::ftell(file.get());
  if (end < 0)
    return file_io::errno_error("cannot read event file '" + path + "'", errno);
  const auto size = static_cast<std::uint64_t>(end);
  std::rewind(file.get());
  std::vector<std::string> records;
  std::uint64_t offset = 0;
  auto at = [&](const std::string& what) {
    return make_error(errc::data_loss, "event file '" + path + "', record at byte " +
                                         std::to_string(offset) + ": " + what);
  };
  while (offset < size) {
    std::uint8_t header[12];
    if (std::fread(header, 1, sizeof header, file.get()) != sizeof header)
      return at("cut short in its length header");
    if (file_io::get_le(header + 8, 4) != masked_crc32c(header, 8))
      return at("its length's CRC does not match");
    auto length = file_io::get_le(header, 8);
    // A length beyond the file is corruption the CRC did not catch; never allocate for it.
    auto left = size - offset - sizeof header;
    if (length > left || left - length < 4)
      return at("cut short: " + std::to_string(length) + " bytes announced, " +
                std::to_string(left) + " left");
    std::string data(length, '\0');
    std::uint8_t footer[4];
    if (std::fread(data.data(), 1, length, file.get()) != length ||
        std::fread(footer, 1, sizeof footer, file.get()) != sizeof footer)
      return at("cut short in its data");
    if (file_io::get_le(footer, 4) != masked_crc32c(data.data(), data.size()))
      return at("its data's CRC does not match");
    records.push_back(std::move(data));
    offset += sizeof header + length + sizeof footer;
  }
  return records;
}

} // namespace actorflow

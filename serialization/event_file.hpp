#pragma once
/// TensorBoard event files: what `tensorboard --logdir DIR` reads. Each file is a sequence of
/// records (TFRecord framing: a little-endian uint64 length, its masked CRC-32C, the bytes,
/// their masked CRC-32C), each record one Event (serialization/tensorboard.proto, TensorFlow's
/// field numbers): the file version first, then scalars and the graph.
///   auto events = event_file_writer::open("out");                        // a new file in out/
///   AF_RETURN_IF_ERROR(events->add_scalars(12, {{"loss", 0.43}, {"accuracy", 0.86}}));
///   AF_RETURN_IF_ERROR(events->add_graph(g));                            // nodes, ops, devices
/// Every record is flushed to the file when added, so a reader (or a crash) sees whole records
/// up to the last one. No protobuf types here: they stay in event_file.cpp.

#include "graph/graph.hpp"
#include "graph/status.hpp"
#include "serialization/file_io.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace actorflow {

class event_file_writer {
public:
  /// Creates `log_dir` when missing and a new file "events.out.tfevents.<seconds>.<host>.<pid>"
  /// in it (its seconds after any earlier file's there, as TensorBoard reads them in name
  /// order, which also keeps names unique), and writes the version record. A run resumed at a step says so with
  /// `resumed_at_step`: a SessionLog START at that step, after which TensorBoard shows this
  /// file's events instead of the earlier files' beyond it (an interrupted run's steps past its
  /// checkpoint). Older files stay as they are. Errors name the directory or file.
  static result<std::unique_ptr<event_file_writer>> open(const std::string& log_dir,
                                                         std::optional<std::int64_t> resumed_at_step = {});
  event_file_writer(const event_file_writer&) = delete;
  event_file_writer& operator=(const event_file_writer&) = delete;

  /// One Summary of scalars (tag, value) at `step`.
  status add_scalars(std::int64_t step, const std::vector<std::pair<std::string, double>>& values);
  /// A serialized Summary (serialize_summary's, or tf.summary's from Python) at `step`.
  status add_summary(std::int64_t step, const std::string& serialized_summary);
  /// The graph as TensorBoard draws it: every node with its op, inputs ("name", "name:1",
  /// "^name" for control inputs), device (the placed one, else the requested one), dtype and
  /// output shapes.
  status add_graph(const graph& g);

  const std::string& path() const { return path_; }

private:
  event_file_writer(int fd, std::string path) : file_(fd), path_(std::move(path)) {}
  status write_event(const std::string& serialized_event);

  file_io::fd_guard file_;
  std::string path_;
};

/// One value of a Summary: a scalar (TensorBoard's simple_value: the value's only element) or
/// a histogram of every element.
struct summary_value {
  std::string tag;
  bool histogram = false;
  std::vector<double> values;
};

/// `values` as a serialized Summary (what TF's summary ops output). A histogram has TF's
/// default buckets (limits +-1e-12 x 1.1^k up to 1e20, and 0), runs of empty buckets merged
/// as TF writes them. A scalar value of other than one element is an error naming its tag.
result<std::string> serialize_summary(const std::vector<summary_value>& values);

/// The payloads of every record of an event (or TFRecord) file, both CRCs checked. A torn or
/// corrupted record is an error naming the file and the record's byte offset.
result<std::vector<std::string>> read_event_records(const std::string& path);

/// CRC-32C (Castagnoli) of `size` bytes, and the masked form TFRecord stores (rotated right by
/// 15 bits plus 0xa282ead8, so that a CRC of data holding CRCs stays strong).
std::uint32_t crc32c(const void* data, std::size_t size);
std::uint32_t masked_crc32c(const void* data, std::size_t size);

} // namespace actorflow

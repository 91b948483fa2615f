#pragma once
/// Training metrics: a CSV file written as training goes, TensorBoard event files beside it
/// (serialization/event_file.hpp: the same scalars, and the graph), and an SVG picture of the
/// curves.
///   metrics_log log;
///   AF_RETURN_IF_ERROR(log.open("out/metrics.csv"));             // and out/events.out.tfevents.*
///   log.add({step, epoch, loss, accuracy, examples_per_second});
///   log.add_graph(g);
///   AF_RETURN_IF_ERROR(write_curve_svg("out/curve.svg", log.rows(), "MLP on Fashion-MNIST"));

#include "graph/graph.hpp"
#include "graph/status.hpp"

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace actorflow {
class event_file_writer;
}

namespace actorflow::train {

struct metrics_row {
  std::int64_t step = 0;
  int epoch = 0;
  double loss = 0;
  /// Accuracy on the batch (or on the test set for an evaluation row); negative when the model
  /// measures none (linear regression).
  double accuracy = 0;
  double examples_per_second = 0;
  /// Not in the CSV, only in the event files: the step's wall time (0: not measured), and the
  /// gradients the ps shards dropped as stale so far (negative: not synchronous training).
  double step_seconds = 0;
  std::int64_t stale_gradients_dropped = -1;
};

class metrics_log {
public:
  metrics_log();
  ~metrics_log();
  /// Creates (truncates) the CSV file and writes its header, and starts a new event file in
  /// its directory; an error names the file.
  status open(const std::string& path);
  /// For a run resumed at `step`: keeps the file's rows up to that step (for the curve too),
  /// drops those after it (the interrupted run's steps beyond its checkpoint) and appends from
  /// there. A missing file starts afresh; a malformed one is an error naming it and the line.
  /// The earlier event files stay; a new one begins with a SessionLog START at `step`, so that
  /// TensorBoard continues the curves from there.
  status resume(const std::string& path, std::int64_t step);
  /// The same for a run that goes back to `step` while it runs (mirrored training restored
  /// after a lost worker): the rows after it leave the file and the curve, and a new event
  /// file starts at `step`.
  status rewind(std::int64_t step);
  /// Appends a row to the file (flushed) and keeps it for the curve; its scalars go to the event
  /// file (loss, accuracy, examples_per_second, step_time_seconds, stale_gradients_dropped).
  void add(const metrics_row& row);
  /// The graph, for TensorBoard's graph view: the first call writes it (call it once the graph
  /// is placed, so that devices show), later calls do nothing.
  void add_graph(const graph& g);
  const std::vector<metrics_row>& rows() const { return rows_; }

private:
  /// The CSV with its header and `kept`, and a new event file (a START at `resumed_at`).
  status start(const std::string& path, const std::vector<metrics_row>& kept,
               std::optional<std::int64_t> resumed_at);
  void write_csv(const metrics_row& row);
  /// Training goes on without event files after a failed write (said once on stderr).
  void events_failed(const status& why);

  std::string path_;
  std::ofstream file_;
  std::vector<metrics_row> rows_;
  std::unique_ptr<event_file_writer> events_;
  bool graph_written_ = false;
};

/// Draws loss and accuracy against the step as an SVG a browser opens; error names the file.
status write_curve_svg(const std::string& path, const std::vector<metrics_row>& rows,
                       const std::string& title);

} // namespace actorflow::train

#pragma once
/// Training metrics: a CSV file written as training goes, and an SVG picture of the curves.
///   metrics_log log;
///   AF_RETURN_IF_ERROR(log.open("out/metrics.csv"));
///   log.add({step, epoch, loss, accuracy, examples_per_second});
///   AF_RETURN_IF_ERROR(write_curve_svg("out/curve.svg", log.rows(), "MLP on Fashion-MNIST"));

#include "graph/status.hpp"

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace actorflow::train {

struct metrics_row {
  std::int64_t step = 0;
  int epoch = 0;
  double loss = 0;
  /// Accuracy on the batch (or on the test set for an evaluation row).
  double accuracy = 0;
  double examples_per_second = 0;
};

class metrics_log {
public:
  /// Creates (truncates) the CSV file and writes its header; an error names the file.
  status open(const std::string& path);
  /// For a run resumed at `step`: keeps the file's rows up to that step (for the curve too),
  /// drops those after it (the interrupted run's steps beyond its checkpoint) and appends from
  /// there. A missing file starts afresh; a malformed one is an error naming it and the line.
  status resume(const std::string& path, std::int64_t step);
  /// Appends a row to the file (flushed) and keeps it for the curve.
  void add(const metrics_row& row);
  const std::vector<metrics_row>& rows() const { return rows_; }

private:
  std::ofstream file_;
  std::vector<metrics_row> rows_;
};

/// Draws loss and accuracy against the step as an SVG a browser opens; error names the file.
status write_curve_svg(const std::string& path, const std::vector<metrics_row>& rows,
                       const std::string& title);

/// Creates `dir` (and its parents) or checks it is a writable directory; error names it.
status ensure_writable_directory(const std::string& dir);

} // namespace actorflow::train

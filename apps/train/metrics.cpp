#include "train/metrics.hpp"

#include "serialization/event_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>


namespace actorflow::train {

metrics_log::metrics_log() = default;
metrics_log::~metrics_log() = default;

status metrics_log::open(const std::string& path) { return start(path, {}, std::nullopt); }

status metrics_log::start(const std::string& path, const std::vector<metrics_row>& kept,
                          std::optional<std::int64_t> resumed_at) {
  path_ = path;
  if (file_.is_open())
    file_.close();
  file_.open(path, std::ios::out | std::ios::trunc);
  if (!file_)
    return make_error(errc::invalid_argument, "cannot write metrics file '" + path + "'");
  file_ << "step,epoch,loss,accuracy,examples_per_second\n";
  // The kept rows are in the earlier event files already: only the CSV gets them again.
  for (auto& row : kept) {
    rows_.push_back(row);
    write_csv(row);
  }
  file_.flush();
  auto dir = std::filesystem::path{path}.parent_path().string();
  auto opened = event_file_writer::open(dir.empty() ? "." : dir, resumed_at);
  if (!opened)
    return opened.error();
  events_ = std::move(*opened);
  return {};
}

void metrics_log::events_failed(const status& why) {
  std::cerr << "actorflow-train: no more TensorBoard events: " << why.message() << std::endl;
  events_.reset();
}

void metrics_log::add_graph(const graph& g) {
  if (!events_ || graph_written_)
    return;
  graph_written_ = true;
  if (auto st = events_->add_graph(g); !st.ok())
    events_failed(st);
}

status metrics_log::resume(const std::string& path, std::int64_t step) {
  std::vector<metrics_row> kept;
  {
    std::ifstream in{path};
    std::string line;
    int number = 0;
    while (in && std::getline(in, line)) {
      if (++number == 1 || line.empty())
        continue; // the header
      metrics_row row;
      char comma[4];
      std::istringstream fields{line};
      fields >> row.step >> comma[0] >> row.epoch >> comma[1] >> row.loss >> comma[2] >>
        row.accuracy >> comma[3] >> row.examples_per_second;
      if (!fields || comma[0] != ',' || comma[1] != ',' || comma[2] != ',' || comma[3] != ',')
        return make_error(errc::data_loss, "metrics file '" + path + "', line " +
                                             std::to_string(number) + ": not a metrics row");
      if (row.step <= step)
        kept.push_back(row);
    }
  }
  return start(path, kept, step);
}

status metrics_log::rewind(std::int64_t step) {
  std::vector<metrics_row> kept;
  for (auto& row : rows_)
    if (row.step <= step)
      kept.push_back(row);
  rows_.clear();
  return start(path_, kept, step);
}

void metrics_log::write_csv(const metrics_row& row) {
  file_ << row.step << ',' << row.epoch << ',' << row.loss << ',' << row.accuracy << ','
        << row.examples_per_second << '\n';
}

void metrics_log::add(const metrics_row& row) {
  rows_.push_back(row);
  if (file_) {
    write_csv(row);
    file_.flush();
  }
  if (!events_)
    return;
  std::vector<std::pair<std::string, double>> scalars{{"loss", row.loss}};
  if (row.accuracy >= 0)
    scalars.emplace_back("accuracy", row.accuracy);
  if (row.examples_per_second > 0)
    scalars.emplace_back("examples_per_second", row.examples_per_second);
  if (row.step_seconds > 0)
    scalars.emplace_back("step_time_seconds", row.step_seconds);
  if (row.stale_gradients_dropped >= 0)
    scalars.emplace_back("stale_gradients_dropped", static_cast<double>(row.stale_gradients_dropped));
  if (auto st = events_->add_scalars(row.step, scalars); !st.ok())
    events_failed(st);
}

namespace {

/// Maps data coordinates into a plot box.
struct axis {
  double lo, hi, pixel_lo, pixel_hi;
  double operator()(double v) const {
    if (hi <= lo)
      return (pixel_lo + pixel_hi) / 2;
    return pixel_lo + (v - lo) / (hi - lo) * (pixel_hi - pixel_lo);
  }
};

std::string polyline(const std::vector<metrics_row>& rows, const axis& x, const axis& y,
                     double metrics_row::*field, const char* colour) {
  std::ostringstream out;
  out << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"2\" points=\"";
  for (auto& r : rows)
    if (std::isfinite(r.*field) && r.*field >= 0) // negative: not measured
      out << x(static_cast<double>(r.step)) << ',' << y(r.*field) << ' ';
  out << "\"/>\n";
  return out.str();
}

} // namespace

status write_curve_svg(const std::string& path, const std::vector<metrics_row>& rows,
                       const std::string& title) {
  const double width = 800, height = 480, left = 70, right = 730, top = 50, bottom = 420;
  double max_step = 1, max_loss = 1e-9;
  for (auto& r : rows) {
    max_step = std::max(max_step, static_cast<double>(r.step));
    if (std::isfinite(r.loss))
      max_loss = std::max(max_loss, r.loss);
  }
  axis x{0, max_step, left, right};
  axis loss_y{0, max_loss, bottom, top};
  axis accuracy_y{0, 1, bottom, top};
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"13\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << width / 2 << "\" y=\"25\" text-anchor=\"middle\" font-size=\"16\">" << title
      << "</text>\n"
      << "<line x1=\"" << left << "\" y1=\"" << bottom << "\" x2=\"" << right << "\" y2=\"" << bottom
      << "\" stroke=\"black\"/>\n"
      << "<line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\"" << bottom
      << "\" stroke=\"black\"/>\n"
      << "<line x1=\"" << right << "\" y1=\"" << top << "\" x2=\"" << right << "\" y2=\"" << bottom
      << "\" stroke=\"black\"/>\n";
  for (int i = 0; i <= 4; ++i) {
    double f = i / 4.0;
    auto py = bottom - f * (bottom - top);
    char loss_label[32], acc_label[32], step_label[32];
    std::snprintf(loss_label, sizeof loss_label, "%.3g", f * max_loss);
    std::snprintf(acc_label, sizeof acc_label, "%.2f", f);
    std::snprintf(step_label, sizeof step_label, "%.0f", f * max_step);
    svg << "<text x=\"" << left - 8 << "\" y=\"" << py + 4 << "\" text-anchor=\"end\" fill=\"#c0392b\">"
        << loss_label << "</text>\n"
        << "<text x=\"" << right + 8 << "\" y=\"" << py + 4 << "\" fill=\"#2471a3\">" << acc_label
        << "</text>\n"
        << "<text x=\"" << x(f * max_step) << "\" y=\"" << bottom + 20
        << "\" text-anchor=\"middle\">" << step_label << "</text>\n"
        << "<line x1=\"" << left << "\" y1=\"" << py << "\" x2=\"" << right << "\" y2=\"" << py
        << "\" stroke=\"#ddd\"/>\n";
  }
  svg << "<text x=\"" << (left + right) / 2 << "\" y=\"" << bottom + 45
      << "\" text-anchor=\"middle\">step</text>\n"
      << "<text x=\"20\" y=\"" << (top + bottom) / 2 << "\" fill=\"#c0392b\" transform=\"rotate(-90 20 "
      << (top + bottom) / 2 << ")\" text-anchor=\"middle\">loss</text>\n"
      << "<text x=\"" << width - 15 << "\" y=\"" << (top + bottom) / 2 << "\" fill=\"#2471a3\" transform=\"rotate(90 "
      << width - 15 << ' ' << (top + bottom) / 2 << ")\" text-anchor=\"middle\">batch accuracy</text>\n"
      << polyline(rows, x, loss_y, &metrics_row::loss, "#c0392b")
      << polyline(rows, x, accuracy_y, &metrics_row::accuracy, "#2471a3") << "</svg>\n";
  auto temp = path + ".tmp";
  {
    std::ofstream file{temp, std::ios::out | std::ios::trunc};
    if (!file)
      return make_error(errc::invalid_argument, "cannot write curve file '" + path + "'");
    file << svg.str();
    if (!file.flush())
      return make_error(errc::invalid_argument, "cannot write curve file '" + path + "'");
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec)
    return make_error(errc::invalid_argument, "cannot write curve file '" + path + "': " + ec.message());
  return {};
}

} // namespace actorflow::train

#pragma once
/// One column of an actorflow-train metrics.csv (step,epoch,loss,accuracy,examples_per_second),
/// row by row, the header skipped: what the process tests compare between runs.
///   auto losses = metrics_column(dir + "/metrics.csv", 2);
/// Empty when the file cannot be read; a row without the column is skipped.

#include <fstream>
#include <string>
#include <vector>

namespace actorflow::testing {

inline std::vector<double> metrics_column(const std::string& path, int column) {
  std::vector<double> values;
  std::ifstream in{path};
  for (std::string row; std::getline(in, row);) {
    if (row.empty() || row.rfind("step,", 0) == 0)
      continue;
    std::size_t at = 0;
    for (int c = 0; c < column && at != std::string::npos; ++c)
      if ((at = row.find(',', at)) != std::string::npos)
        ++at;
    if (at != std::string::npos && at < row.size())
      values.push_back(std::stod(row.substr(at)));
  }
  return values;
}

} // namespace actorflow::testing

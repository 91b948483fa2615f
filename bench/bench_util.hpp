#pragma once
/// Small helpers shared by the benchmarks: timing, medians and the one-line JSON result.
///   auto seconds = bench::time_seconds([&] { work(); });
///   auto times = bench::step_seconds(30, [&] { return run_step(); });   // nullopt: one failed
///   bench::emit({"matmul_1024_f32_t1", gflops, "GFLOP/s", direct_gflops, gflops / direct_gflops});
/// Each benchmark prints only its result lines on stdout; everything else goes to stderr.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace bench {

/// Wall-clock seconds `work` takes.
template <class F>
double time_seconds(F&& work) {
  auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The median of `values` (the mean of the middle two for an even count); 0 when empty.
inline double median(std::vector<double> values) {
  if (values.empty())
    return 0.0;
  std::sort(values.begin(), values.end());
  auto mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

/// The seconds each of `steps` runs of `step` took (it returns false on a failure, which it
/// reports itself); nullopt when one failed.
template <class F>
std::optional<std::vector<double>> step_seconds(int steps, F&& step) {
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) {
    bool ok = true;
    times.push_back(time_seconds([&] { ok = step(); }));
    if (!ok)
      return std::nullopt;
  }
  return times;
}

/// Positional argument `index` as a positive int, or `fallback` when absent or not positive.
inline int positive_arg(int argc, char** argv, int index, int fallback) {
  if (argc <= index)
    return fallback;
  int value = std::atoi(argv[index]);
  return value > 0 ? value : fallback;
}

/// One benchmark figure; baseline and ratio are present only when measured in the same run.
struct figure {
  std::string name;
  double value = 0.0;
  std::string unit;
  std::optional<double> baseline;
  std::optional<double> ratio;
  std::string note;
};

inline std::string json_number(double x) {
  if (!std::isfinite(x))
    return "null";
  char text[64];
  std::snprintf(text, sizeof text, "%.6g", x);
  return text;
}

/// Escapes the few characters our own strings could contain.
inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + '"';
}

/// Prints `f` as one JSON line on stdout and flushes it.
inline void emit(const figure& f) {
  std::string line = "{\"bench\": " + json_string(f.name) + ", \"value\": " + json_number(f.value) +
                     ", \"unit\": " + json_string(f.unit);
  if (f.baseline)
    line += ", \"baseline\": " + json_number(*f.baseline);
  if (f.ratio)
    line += ", \"ratio\": " + json_number(*f.ratio);
  if (!f.note.empty())
    line += ", \"note\": " + json_string(f.note);
  line += "}";
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

/// Runs `/usr/bin/python3 <bench dir>/<script> <args>` (ACTORFLOW_BENCH_PYTHON overrides the
/// interpreter, ACTORFLOW_BENCH_SCRIPTS the directory: a bundle run on another machine) and
/// returns what it printed, or nothing, with a warning on stderr, when Python,
/// torch or the script fails: a missing baseline is not a failure.
inline std::optional<std::string> python_output(const std::string& source_dir,
                                                const std::string& script, const std::string& args) {
  const char* python = std::getenv("ACTORFLOW_BENCH_PYTHON");
  const char* scripts = std::getenv("ACTORFLOW_BENCH_SCRIPTS");
  std::string command = std::string(python ? python : "/usr/bin/python3") + " '" +
                        (scripts ? std::string{scripts} : source_dir) + "/" + script + "' " + args;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    std::fprintf(stderr, "warning: cannot start `%s`; no PyTorch baseline\n", command.c_str());
    return std::nullopt;
  }
  std::string text;
  char chunk[256];
  while (std::fgets(chunk, sizeof chunk, pipe) != nullptr)
    text += chunk;
  int rc = pclose(pipe);
  if (rc != 0) {
    std::fprintf(stderr, "warning: `%s` failed (status %d; is torch importable?); no PyTorch baseline\n",
                 command.c_str(), rc);
    return std::nullopt;
  }
  return text;
}

/// The positive number after `"key":` in a script's JSON output; nothing, with a warning, when
/// there is none.
inline std::optional<double> json_field(const std::string& text, const std::string& key) {
  auto quoted = "\"" + key + "\":";
  auto at = text.find(quoted);
  double value = at == std::string::npos ? 0.0 : std::strtod(text.c_str() + at + quoted.size(), nullptr);
  if (!(value > 0.0)) {
    std::fprintf(stderr, "warning: no positive '%s' in the baseline's output: %s\n", key.c_str(),
                 text.c_str());
    return std::nullopt;
  }
  return value;
}

/// python_output, then the number after `"key":` in it.
inline std::optional<double> python_json_number(const std::string& source_dir,
                                                const std::string& script, const std::string& args,
                                                const std::string& key) {
  auto text = python_output(source_dir, script, args);
  if (!text)
    return std::nullopt;
  return json_field(*text, key);
}

} // namespace bench

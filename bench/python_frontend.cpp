// The Python front end against the C++ API it wraps, side by side in one run (the machine is
// shared and noisy, so each pair is measured in alternation and the best of each kept):
//   python_run_overhead_us: one scalar fetched through tf.Session.run from Python, minus the same
//     fetch through the C++ session here (the baseline, microseconds a run).
//   python_mlp_train_examples_per_s_t1: actorflow-train's MLP built with the TF1 API and trained
//     from a Python loop feeding numpy batches (bench/python_frontend.py mlp), against
//     `actorflow-train --local --threads 1` on the same model, data and batch (whose figure counts
//     the session's step time only, not its batches'); _vs_cpp_loop: against the same training
//     loop in C++ here (bench::train_actorflow, 300 steps after 20, wall clock with the batches,
//     as the Python loop is timed); and PyTorch eager (bench/torch_mlp.py) when /usr/bin/python3
//     imports torch.
// The Python side runs /usr/bin/python3 with PYTHONPATH set to this build's python/ directory.
#include "bench_training.hpp"
#include "bench_util.hpp"

#include "actors/session.hpp"
#include "graph/ops.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#ifndef ACTORFLOW_BENCH_SOURCE_DIR
#define ACTORFLOW_BENCH_SOURCE_DIR "bench"
#endif
#ifndef ACTORFLOW_PYTHON_DIR
#define ACTORFLOW_PYTHON_DIR "build/python"
#endif
#ifndef ACTORFLOW_TRAIN_BINARY
#define ACTORFLOW_TRAIN_BINARY "actorflow-train"
#endif

using namespace actorflow;

namespace {

constexpr int runs = 20000;
constexpr int rounds = 3;

/// Microseconds a run of one scalar fetch through the C++ session, the best of 5 rounds (as
/// python_frontend.py overhead measures its own).
std::optional<double> native_run_us() {
  graph g;
  auto c = ops::constant(g, 3.f, "c");
  session s{g};
  for (int i = 0; i < 1000; ++i)
    if (!s.run({c}))
      return std::nullopt;
  double best = 0;
  for (int round = 0; round < 5; ++round) {
    bool ok = true;
    auto seconds = bench::time_seconds([&] {
      for (int i = 0; i < runs && ok; ++i)
        ok = static_cast<bool>(s.run({c}));
    });
    if (!ok)
      return std::nullopt;
    auto us = 1e6 * seconds / runs;
    best = round == 0 ? us : std::min(best, us);
  }
  return best;
}

/// actorflow-train --local --threads 1's "examples/s: N" for one epoch.
std::optional<double> actorflow_train_examples_per_second() {
  // Its metrics and curve go to a temporary directory, removed after it.
  std::string command = std::string{"d=$(mktemp -d) && '"} + ACTORFLOW_TRAIN_BINARY +
                        "' --local --threads 1 --epochs 1 --model mlp --output-dir \"$d\" 2>&1; "
                        "rc=$?; rm -rf \"$d\"; exit $rc";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr)
    return std::nullopt;
  std::string text;
  char chunk[256];
  while (std::fgets(chunk, sizeof chunk, pipe) != nullptr)
    text += chunk;
  if (pclose(pipe) != 0) {
    std::fprintf(stderr, "warning: actorflow-train failed:\n%s\n", text.c_str());
    return std::nullopt;
  }
  auto at = text.rfind("examples/s: ");
  if (at == std::string::npos)
    return std::nullopt;
  return std::strtod(text.c_str() + at + 12, nullptr);
}

std::optional<double> best(std::optional<double> so_far, std::optional<double> value, bool lower) {
  if (!value)
    return so_far;
  if (!so_far)
    return value;
  return lower ? std::min(*so_far, *value) : std::max(*so_far, *value);
}

} // namespace

int main() {
  setenv("PYTHONPATH", ACTORFLOW_PYTHON_DIR, 1);
  const std::string source = ACTORFLOW_BENCH_SOURCE_DIR;

  std::optional<double> native, python;
  for (int round = 0; round < rounds; ++round) {
    native = best(native, native_run_us(), true);
    python = best(python, bench::python_json_number(source, "python_frontend.py", "overhead",
                                                    "python_run_us"), true);
  }
  if (!native || !python) {
    std::fprintf(stderr, "bench_python_frontend: the scalar fetch failed\n");
    return 1;
  }
  char note[160];
  std::snprintf(note, sizeof note, "tf.Session.run %.2f us, C++ session::run %.2f us, best of %d",
                *python, *native, rounds);
  bench::emit({"python_run_overhead_us", *python - *native, "us", *native, *python / *native, note});

  auto data = bench::load_training_data();
  if (!data) {
    std::fprintf(stderr, "bench_python_frontend: %s\n", data.error().to_string().c_str());
    return 1;
  }
  std::optional<double> from_python, from_cpp, from_cpp_loop;
  for (int round = 0; round < 2; ++round) {
    from_cpp = best(from_cpp, actorflow_train_examples_per_second(), false);
    auto loop = bench::train_actorflow(*data, 1);
    if (loop)
      from_cpp_loop = best(from_cpp_loop, loop->examples_per_second, false);
    from_python = best(from_python, bench::python_json_number(source, "python_frontend.py", "mlp",
                                                              "examples_per_second"), false);
  }
  if (!from_python || !from_cpp || !from_cpp_loop) {
    std::fprintf(stderr, "bench_python_frontend: the MLP training failed\n");
    return 1;
  }
  bench::emit({"python_mlp_train_examples_per_s_t1", *from_python, "examples/s", *from_cpp,
               *from_python / *from_cpp,
               "baseline: actorflow-train --local --threads 1 (one epoch; its figure counts step "
               "time only); Python: 300 timed steps after 20, wall clock"});
  bench::emit({"python_mlp_train_vs_cpp_loop_examples_per_s_t1", *from_python, "examples/s",
               *from_cpp_loop, *from_python / *from_cpp_loop,
               "baseline: the same loop through the C++ session (bench::train_actorflow), wall clock"});
  auto torch = bench::python_json_number(source, "torch_mlp.py", "--threads 1", "examples_per_second");
  if (torch)
    bench::emit({"python_mlp_train_vs_torch_examples_per_s_t1", *from_python, "examples/s", *torch,
                 *from_python / *torch, "baseline: PyTorch eager, bench/torch_mlp.py --threads 1"});
  else
    std::fprintf(stderr, "bench_python_frontend: no PyTorch baseline (python3-torch not importable)\n");
  return 0;
}

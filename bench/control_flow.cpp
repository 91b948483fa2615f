// Control flow (graph/control_flow.hpp): what one iteration of a while_loop costs, and the RNN.
//   while_loop_us_per_iteration   a loop of 10,000 iterations whose body is eleven scalar
//                                 float32 ops, one session step on one inter-op and one intra-op thread;
//                                 baseline PyTorch eager running the same loop in Python
//                                 (bench/torch_while_loop.py), same run
//   rnn_train_examples_per_s_t1   actorflow-train's RNN (a tanh cell of 128 over 28 rows, Adam
//                                 0.001, batch 128) at one thread; baseline PyTorch 1.13 CPU
//                                 training the same model (torch.nn.RNN), same data and batch
//   bench_control_flow [iterations] [steps]
#include "bench_training.hpp"
#include "bench_util.hpp"

#include "actors/session.hpp"
#include "graph/control_flow.hpp"
#include "graph/ops.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#ifndef ACTORFLOW_BENCH_SOURCE_DIR
#define ACTORFLOW_BENCH_SOURCE_DIR "bench"
#endif

using namespace actorflow;

namespace {

/// Microseconds per iteration of the eleven-op loop, median over `steps` steps; negative on
/// error.
double loop_us_per_iteration(int iterations, int steps) {
  graph g;
  // Made once, outside the loop (as torch_while_loop.py's a..m are): the body brings them in as
  // loop invariants. Written inside the body, each would be a Const run every iteration.
  auto c = [&](float v) { return ops::constant(g, v); };
  auto a = c(0.9f), b = c(0.1f), cc = c(1.1f), d = c(0.2f), e = c(0.05f), f = c(0.95f),
       gg = c(0.01f), h = c(1.02f), k = c(0.03f), m = c(1.01f);
  auto limit = ops::constant(g, iterations, "limit");
  auto one = ops::constant(g, std::int32_t{1}, "one");
  auto out = ops::while_loop(
    [&](const std::vector<output>& v) { return ops::less(v[0], limit); },
    [&](const std::vector<output>& v) {
      // The body torch_while_loop.py runs: eleven scalar ops on x.
      auto x = ((((ops::tanh(v[1] * a + b) * cc + d) - e) * f + gg) * h - k) / m;
      return std::vector<output>{v[0] + one, x};
    },
    {ops::constant(g, std::int32_t{0}, "i"), ops::constant(g, 0.5f, "x")});
  if (!g.status().ok()) {
    std::fprintf(stderr, "control_flow: %s\n", g.status().to_string().c_str());
    return -1;
  }
  session_options options;
  options.inter_op_parallelism_threads = 1;
  options.intra_op_parallelism_threads = 1;
  options.use_per_session_threads = true;
  session s{g, options};
  // The same eleven ops in double on the host: what the loop must end with.
  double expected = 0.5;
  for (int i = 0; i < iterations; ++i)
    expected = ((((std::tanh(expected * 0.9 + 0.1) * 1.1 + 0.2) - 0.05) * 0.95 + 0.01) * 1.02 - 0.03) / 1.01;
  auto step = [&] {
    auto r = s.run({out[0], out[1]});
    if (!r || r->at(0).scalar_value<std::int32_t>() != iterations ||
        std::abs(r->at(1).scalar_value<double>() - expected) > 1e-3) {
      std::fprintf(stderr, "control_flow: the loop failed: %s\n",
                   r ? "wrong count or value" : r.error().to_string().c_str());
      return false;
    }
    return true;
  };
  if (!step())
    return -1;
  auto times = bench::step_seconds(steps, step);
  if (!times)
    return -1;
  return 1e6 * bench::median(*times) / iterations;
}

} // namespace

int main(int argc, char** argv) {
  const int iterations = bench::positive_arg(argc, argv, 1, 10000);
  const int steps = bench::positive_arg(argc, argv, 2, 5);
  auto torch_loop = bench::python_json_number(
    ACTORFLOW_BENCH_SOURCE_DIR, "torch_while_loop.py",
    "--iterations " + std::to_string(iterations) + " --steps " + std::to_string(steps),
    "us_per_iteration");
  auto ours = loop_us_per_iteration(iterations, steps);
  if (ours < 0)
    return 1;
  bench::figure loop{"while_loop_us_per_iteration", ours, "us/iteration", torch_loop, std::nullopt,
                     "a while_loop with an eleven-op scalar body, " + std::to_string(iterations) +
                       " iterations in one step, one thread; lower is better; ratio = baseline "
                       "/ value (PyTorch 1.13 eager, the same loop in Python), so ratio > 1 "
                       "means actorflow is faster"};
  if (torch_loop)
    loop.ratio = *torch_loop / ours;
  bench::emit(loop);

  auto data = bench::load_training_data();
  if (!data) {
    std::fprintf(stderr, "control_flow: %s\n", data.error().to_string().c_str());
    return 1;
  }
  const int rnn_steps = 100;
  // PyTorch first: OpenBLAS threads of ours would otherwise still spin beside it.
  auto torch_rnn = bench::python_json_number(
    ACTORFLOW_BENCH_SOURCE_DIR, "torch_mlp.py",
    "--model rnn --threads 1 --batch 128 --steps " + std::to_string(rnn_steps) + " --warmup " +
      std::to_string(bench::default_warmup_steps),
    "examples_per_second");
  auto rnn = bench::train_actorflow(*data, 1, {train::classifier::rnn, 128, rnn_steps});
  if (!rnn) {
    std::fprintf(stderr, "control_flow: rnn: %s\n", rnn.error().to_string().c_str());
    return 1;
  }
  bench::figure r{"rnn_train_examples_per_s_t1", rnn->examples_per_second, "examples/s", torch_rnn,
                  std::nullopt,
                  "actorflow-train's RNN (tanh cell of 128 over 28 rows in a while_loop), Adam "
                  "0.001, batch 128, 1 thread; baseline PyTorch 1.13 CPU torch.nn.RNN, same model, "
                  "data, batch"};
  if (torch_rnn)
    r.ratio = rnn->examples_per_second / *torch_rnn;
  bench::emit(r);
  return 0;
}

// The price of all-or-nothing steps (run_options::all_or_nothing): a between-graph worker (this
// process, serving its own task) runs steps that add 1 to a variable on each of two ps tasks
// (actorflow-worker processes on loopback), the second delta after a 256x256 matmul on the
// worker. Steps per second with the option, against the same steps without it, alternating in
// rounds of 2 s in one run (the commit costs a prepared/commit message round per step).
#include "support/paired_updates.hpp"
#include "support/processes.hpp"
#include "bench_util.hpp"

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

using namespace actorflow;
using namespace std::chrono_literals;
using actorflow::testing::child_process;
using clock_type = std::chrono::steady_clock;

int main() {
  auto address = [] { return "127.0.0.1:" + std::to_string(testing::free_loopback_port()); };
  auto spec_text = "ps=" + address() + "," + address() + ";worker=" + address();
  auto spec = cluster_spec::parse(spec_text);
  if (!spec)
    return 1;
  std::vector<std::unique_ptr<child_process>> ps;
  for (int t = 0; t < 2; ++t) {
    ps.push_back(std::make_unique<child_process>(
      ACTORFLOW_WORKER_BINARY, std::vector<std::string>{"--cluster", spec_text, "--job", "ps",
                                                        "--task", std::to_string(t), "--threads", "1"}));
    if (!ps.back()->wait_for_line("serving on", 20s))
      return 1;
  }
  testing::paired_updates worker{std::make_shared<const cluster_spec>(*spec), 0};
  if (!worker.ok() || !worker.s->run_targets({ops::global_variables_initializer(worker.g)}).ok())
    return 1;
  auto& s = *worker.s;
  auto steps_per_second = [&](bool whole, std::chrono::seconds window) -> double {
    run_options per_step;
    per_step.all_or_nothing = whole;
    long steps = 0;
    auto started = clock_type::now();
    while (clock_type::now() - started < window) {
      if (!s.run_with(per_step, {}, {}, {worker.up_a, worker.up_b}).ok())
        return -1;
      ++steps;
    }
    return steps / std::chrono::duration<double>(clock_type::now() - started).count();
  };
  steps_per_second(true, 1s); // warm-up: plans, links
  std::vector<double> whole, plain;
  for (int round = 0; round < 3; ++round) {
    whole.push_back(steps_per_second(true, 2s));
    plain.push_back(steps_per_second(false, 2s));
  }
  for (auto* rates : {&whole, &plain})
    for (auto rate : *rates)
      if (rate < 0)
        return 1;
  auto w = bench::median(whole), p = bench::median(plain);
  std::fprintf(stderr, "all-or-nothing: %.0f steps/s, plain %.0f (medians of 3 rounds of 2 s)\n", w, p);
  bench::emit({"all_or_nothing_steps_per_s", w, "steps/s", p, w / p,
               "2 ps + this worker, each step adds to a variable on each ps (one after a 256x256 "
               "matmul); baseline: the same steps without all_or_nothing, alternating rounds"});
  worker.served->stop();
  for (auto& p : ps)
    p->signal(SIGTERM);
  return 0;
}

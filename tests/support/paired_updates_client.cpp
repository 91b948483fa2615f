// A between-graph worker for the all-or-nothing test (tests/apps/between_graph.test.cpp): task
// N of job "worker" of --cluster, serving its own devices like actorflow-train's workers, runs
// steps that each add 1 to "a" on /job:ps/task:0 and 1 to "b" on /job:ps/task:1, b's delta
// only after a slow product on this worker, until it is killed. With --whole the steps are
// all-or-nothing (run_options::all_or_nothing), so however often it is killed, a == b.
//   paired_updates_client --cluster SPEC --task 0 --init      # initialises a and b, exits 0
//   paired_updates_client --cluster SPEC --task 0 --whole     # "step N" every 10 steps
#include "support/paired_updates.hpp"

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

using namespace actorflow;

int main(int argc, char** argv) {
  std::string spec_text;
  int task = 0;
  bool init = false, whole = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--cluster") == 0 && i + 1 < argc)
      spec_text = argv[++i];
    else if (std::strcmp(argv[i], "--task") == 0 && i + 1 < argc)
      task = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--init") == 0)
      init = true;
    else if (std::strcmp(argv[i], "--whole") == 0)
      whole = true;
  }
  auto spec = cluster_spec::parse(spec_text);
  if (!spec) {
    std::fprintf(stderr, "paired_updates_client: %s\n", spec.error().message().c_str());
    return 2;
  }
  testing::paired_updates worker{std::make_shared<const cluster_spec>(*spec), task};
  if (!worker.ok()) {
    std::fprintf(stderr, "paired_updates_client: %s\n", worker.started.message().c_str());
    return 1;
  }
  auto& s = *worker.s;
  if (init) {
    auto st = s.run_targets({ops::global_variables_initializer(worker.g)});
    if (!st.ok())
      std::fprintf(stderr, "paired_updates_client: %s\n", st.message().c_str());
    return st.ok() ? 0 : 1;
  }
  run_options per_step;
  per_step.all_or_nothing = whole;
  for (long step = 1;; ++step) {
    auto r = s.run_with(per_step, {}, {}, {worker.up_a, worker.up_b});
    if (!r) {
      std::fprintf(stderr, "paired_updates_client: %s\n", r.error().message().c_str());
      return 1;
    }
    if (step % 10 == 0) {
      std::printf("step %ld\n", step);
      std::fflush(stdout);
    }
  }
}

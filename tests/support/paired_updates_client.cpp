// A between-graph worker for the all-or-nothing test (tests/apps/between_graph.test.cpp): task
// N of job "worker" of --cluster, serving its own devices like actorflow-train's workers, runs
// steps that each add 1 to "a" on /job:ps/task:0 and 1 to "b" on /job:ps/task:1, b's delta
// only after a slow product on this worker, until it is killed. With --whole the steps are
// all-or-nothing (run_options::all_or_nothing), so however often it is killed, a == b.
//   paired_updates_client --cluster SPEC --task 0 --init      # initialises a and b, exits 0
//   paired_updates_client --cluster SPEC --task 0 --whole     # "step N" every 10 steps
#include "actors/cluster_spec.hpp"
#include "actors/server.hpp"
#include "actors/session.hpp"
#include "actors/session_actor.hpp"
#include "graph/ops.hpp"

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
  auto cluster = std::make_shared<const cluster_spec>(*spec);
  auto me = "/job:worker/task:" + std::to_string(task);
  server_options serving;
  serving.system = &default_actor_system();
  serving.threads = 1;
  serving.device_filters = {"/job:ps", me};
  auto served = server::start(cluster, "worker", task, serving);
  if (!served) {
    std::fprintf(stderr, "paired_updates_client: %s\n", served.error().message().c_str());
    return 1;
  }
  graph g;
  actorflow::variable a, b;
  {
    auto d = g.device("/job:ps/task:0");
    a = ops::variable(g, 0.f, "a");
  }
  {
    auto d = g.device("/job:ps/task:1");
    b = ops::variable(g, 0.f, "b");
  }
  output up_a, up_b;
  {
    auto d = g.device(me);
    auto big = ops::ones(g, {256, 256});
    auto slow = ops::reduce_sum(ops::matmul(big, big)) * ops::constant(g, 0.f);
    up_a = ops::assign_add(a, ops::constant(g, 1.f));
    up_b = ops::assign_add(b, ops::constant(g, 1.f) + slow);
  }
  session_options options;
  options.master = existing_master((*served)->master());
  options.timeout_seconds = 10;
  session s{g, options};
  if (init) {
    auto st = s.run_targets({ops::global_variables_initializer(g)});
    if (!st.ok())
      std::fprintf(stderr, "paired_updates_client: %s\n", st.message().c_str());
    return st.ok() ? 0 : 1;
  }
  run_options per_step;
  per_step.all_or_nothing = whole;
  for (long step = 1;; ++step) {
    auto r = s.run_with(per_step, {}, {}, {up_a, up_b});
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

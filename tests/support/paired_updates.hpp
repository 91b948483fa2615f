#pragma once
/// What the all-or-nothing test (tests/support/paired_updates_client.cpp) and its benchmark
/// (bench/all_or_nothing.cpp) run: a between-graph worker, served in this process, whose steps
/// add 1 to "a" on /job:ps/task:0 and 1 to "b" on /job:ps/task:1, b's delta only after a
/// 256x256 matmul on the worker (so a's update is ready long before b's).
///   paired_updates worker{cluster, 0};
///   if (!worker.ok()) ...;  worker.s->run_with(per_step, {}, {}, {worker.up_a, worker.up_b});
#include "actors/cluster_spec.hpp"
#include "actors/server.hpp"
#include "actors/session.hpp"
#include "actors/session_actor.hpp"
#include "graph/ops.hpp"

#include <memory>
#include <string>

namespace actorflow::testing {

struct paired_updates {
  graph g;
  variable a, b;
  output up_a, up_b;
  std::unique_ptr<server> served;
  std::unique_ptr<session> s;
  /// Why the worker could not start; ok when it serves.
  status started;

  paired_updates(std::shared_ptr<const cluster_spec> cluster, int task) {
    auto me = "/job:worker/task:" + std::to_string(task);
    {
      auto d = g.device("/job:ps/task:0");
      a = ops::variable(g, 0.f, "a");
    }
    {
      auto d = g.device("/job:ps/task:1");
      b = ops::variable(g, 0.f, "b");
    }
    {
      auto d = g.device(me);
      auto big = ops::ones(g, {256, 256});
      auto slow = ops::reduce_sum(ops::matmul(big, big)) * ops::constant(g, 0.f);
      up_a = ops::assign_add(a, ops::constant(g, 1.f));
      up_b = ops::assign_add(b, ops::constant(g, 1.f) + slow);
    }
    // Served as actorflow-train's between-graph workers are: its master reaches the ps tasks
    // and itself only.
    server_options serving;
    serving.system = &default_actor_system();
    serving.threads = 1;
    serving.device_filters = {"/job:ps", me};
    auto started_server = server::start(std::move(cluster), "worker", task, serving);
    if (!started_server) {
      started = started_server.error();
      return;
    }
    served = std::move(*started_server);
    session_options options;
    options.master = existing_master(served->master());
    options.timeout_seconds = 10;
    s = std::make_unique<session>(g, options);
  }

  bool ok() const { return started.ok(); }
};

} // namespace actorflow::testing

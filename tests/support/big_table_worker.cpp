// One worker of a between-graph job training a table bigger than one process should hold
// (issue 29's scale run; tests/apps/big_table.test.cpp at 1e8 parameters, bench/big_table.cpp
// at 1e9): a --rows x --dim float32 table partitioned into --parts shards round robin over the
// ps tasks (actorflow-worker), each step looking up --batch random ids (each ps gathers only its
// rows of them) and pulling them towards zero by sparse SGD applied on the ps. The chief
// initialises (every shard's initial values made on its ps), saves a sharded checkpoint when
// training ends (each ps writes its own shards) and says how long that took; with
// --restore-only it restores the latest checkpoint into fresh ps tasks, timed, trains no step
// and prints the probe: the sum of the restored rows of ids 0 .. 63, to compare with the shard.
//   big_table_worker --cluster SPEC --task N --rows R --dim D --parts P --steps S --batch B
//                    --checkpoint-dir DIR [--restore-only]
// Lines: "probe <sum>", "steps <global step> rows_per_second <rows looked up and updated / s>",
// "saved_seconds <s>" (the chief's close: its final sharded save), "restored_seconds <s>".
#include "actors/server.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "graph/partitioned_variable.hpp"
#include "graph/replica_device_setter.hpp"
#include "graph/sparse_ops.hpp"
#include "train/monitored_session.hpp"

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

using namespace actorflow;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int fail(const std::string& what) {
  std::fprintf(stderr, "big_table_worker: %s\n", what.c_str());
  return 1;
}

} // namespace

int main(int argc, char** argv) {
  std::string spec, checkpoint_dir;
  int task = 0, parts = 8, batch = 4096;
  std::int64_t rows = 1000000, dim = 64, steps = 100;
  bool restore_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--restore-only") {
      restore_only = true;
      continue;
    }
    std::string value = i + 1 < argc ? argv[++i] : "";
    if (flag == "--cluster") spec = value;
    else if (flag == "--task") task = std::stoi(value);
    else if (flag == "--rows") rows = std::stoll(value);
    else if (flag == "--dim") dim = std::stoll(value);
    else if (flag == "--parts") parts = std::stoi(value);
    else if (flag == "--steps") steps = std::stoll(value);
    else if (flag == "--batch") batch = std::stoi(value);
    else if (flag == "--checkpoint-dir") checkpoint_dir = value;
    else return fail("unknown flag " + flag);
  }
  auto cluster = cluster_spec::parse(spec);
  if (!cluster)
    return fail("--cluster: " + cluster.error().message());
  auto shared = std::make_shared<const cluster_spec>(*cluster);
  auto me = "/job:worker/task:" + std::to_string(task);
  server_options serving;
  serving.device_filters = {"/job:ps", me};
  serving.threads = 1;
  auto served = server::start(shared, "worker", task, serving);
  if (!served)
    return fail(served.error().message());

  graph g;
  output ids, probe, loss, train;
  actorflow::variable global_step;
  gradient_descent_optimizer sgd{0.5};
  {
    replica_device_setter_options placement_options;
    placement_options.worker_device = me;
    auto placement = replica_device_setter_for(*cluster, placement_options);
    if (!placement)
      return fail(placement.error().message());
    auto on_cluster = g.device(*placement);
    auto table = ops::partitioned_variable(g, "table", tensor_shape{rows, dim},
                                           random_uniform_initializer(-1.0, 1.0, 7),
                                           fixed_size_partitioner(parts));
    global_step = ops::variable(g, ops::constant(g, std::int64_t{0}), "global_step");
    ids = ops::placeholder(g, dtype::int64, tensor_shape{-1}, "ids");
    auto looked_up = ops::embedding_lookup(table, ids, "div");
    loss = ops::reduce_mean(ops::square(looked_up), {}, false, "loss");
    train = ops::group(g, {sgd.minimize(loss, table.shards()),
                           ops::assign_add(global_step, ops::constant(g, std::int64_t{1}))},
                       "train");
    std::vector<std::int64_t> first(64);
    for (std::int64_t i = 0; i < 64; ++i)
      first[static_cast<std::size_t>(i)] = i;
    probe = ops::reduce_sum(
      ops::embedding_lookup(table, ops::constant(g, tensor::from_vector<std::int64_t>(first)), "div"),
      {}, false, "probe");
  }
  if (!g.status().ok())
    return fail(g.status().message());

  train::monitored_session_options o;
  o.session.target = (*served)->target();
  o.session.inter_op_parallelism_threads = 1;
  o.session.intra_op_parallelism_threads = 1;
  o.global_step = global_step;
  o.is_chief = task == 0;
  o.checkpoint_dir = task == 0 ? checkpoint_dir : "";
  o.sharded_checkpoints = true;
  o.keep_checkpoints = 1;
  o.cluster = shared;
  o.init_timeout_seconds = 600;
  o.hooks.push_back(train::stop_at_step_hook(global_step.read, steps));
  auto created_at = std::chrono::steady_clock::now();
  auto session = train::monitored_session::create(g, std::move(o));
  if (!session)
    return fail(session.error().message());
  if (restore_only)
    std::printf("restored_seconds %.3f\n", seconds_since(created_at));
  auto say_probe = [&]() -> bool {
    auto p = (*session)->run({probe});
    if (!p)
      return fail(p.error().message()) == 0;
    std::printf("probe %.9g\n", static_cast<double>(p->at(0).scalar_value<float>()));
    std::fflush(stdout);
    return true;
  };
  if (restore_only)
    return say_probe() ? 0 : 1;

  std::mt19937_64 random{static_cast<std::uint64_t>(11 + task)};
  std::uniform_int_distribution<std::int64_t> id_of{0, rows - 1};
  std::vector<std::int64_t> batch_ids(static_cast<std::size_t>(batch));
  std::int64_t looked = 0;
  auto started = std::chrono::steady_clock::now();
  while (!(*session)->should_stop()) {
    for (auto& id : batch_ids)
      id = id_of(random);
    auto r = (*session)->run({loss}, {{ids, tensor::from_vector<std::int64_t>(batch_ids)}}, {train});
    if (!r)
      return fail(r.error().message());
    looked += batch;
  }
  std::printf("steps %lld rows_per_second %.0f\n", static_cast<long long>((*session)->global_step()),
              static_cast<double>(looked) / seconds_since(started));
  auto closing = std::chrono::steady_clock::now();
  if (auto closed = (*session)->close(); !closed.ok())
    return fail(closed.message());
  if (task == 0)
    std::printf("saved_seconds %.3f\n", seconds_since(closing));
  std::fflush(stdout);
  return 0;
}

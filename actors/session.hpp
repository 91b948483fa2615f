#pragma once
/// Running graphs: a session hands its graph to a master (actors/master.hpp), which places it
/// on the devices of this process or of a cluster, partitions it by device, registers each
/// partition with that device's actor and runs steps. Local sessions spawn their own master
/// and one task; `target` opens the session on a remote master instead.
///   graph g;  auto a = ops::variable(g, 3.f, "a");  auto c = a * ops::constant(g, 4.f);
///   session s{g};
///   s.run({}, {}, {ops::global_variables_initializer(g)});
///   auto r = s.run({c});          // r->at(0).scalar_value<float>() == 12
/// This header carries no CAF: embedders with their own actor system pass it in. From inside an
/// actor, use the non-blocking session actor instead (actors/session_actor.hpp): a blocking run
/// there waits on the thread the actors need.

#include "actors/cluster_spec.hpp"
#include "devices/gpu_options.hpp"
#include "devices/update_fence.hpp"
#include "graph/graph.hpp"
#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace caf {
class actor_system;
}

namespace actorflow {

class runtime_env;

/// A master that already runs in this process, for session_options::master. Made by
/// existing_master() (actors/session_actor.hpp), which holds the typed handle.
struct master_ref;

struct session_options {
  /// Threads that run ready nodes; 0 means one per core.
  int inter_op_parallelism_threads = 0;
  /// Threads for multithreaded kernels (and the BLAS); 0 means one per core.
  int intra_op_parallelism_threads = 0;
  /// Give this session pools of its own instead of its env's shared ones.
  bool use_per_session_threads = false;
  /// The per-process state the session's tasks use: shared pools, BLAS threads, the default
  /// allocator (devices/runtime_env.hpp). Null: runtime_env::process_default().
  std::shared_ptr<runtime_env> env;
  /// Print "name: device" for every node placed (to standard error, and to placement_log).
  bool log_device_placement = false;
  /// Pinned nodes that cannot run where they are pinned fall back to a device that can.
  bool allow_soft_placement = false;
  /// Fuse MatMul/Conv2D + bias Add (+ Relu) into one kernel where a device has one
  /// (graph/fusion.hpp); the master's environment ACTORFLOW_FUSION=0 turns it off as well.
  /// Each fusion adds a "fused ..." line to placement_log.
  bool fuse_ops = true;
  /// TensorFlow's mixed_bfloat16 policy: "bfloat16" makes the CPU's float32 MatMuls and
  /// convolutions (and their gradients) compute with bfloat16 operands and float32 accumulation,
  /// on AMX where the CPU has it; variables and all else stay float32 (graph/mixed_precision.hpp).
  /// Empty: the master's ACTORFLOW_MIXED_PRECISION decides (float32 when unset). Each marked
  /// node adds a "mixed_precision ..." line to placement_log.
  std::string mixed_precision;
  /// Deterministic mode for tests: no inter-op pool, every node runs inside its device actor.
  bool run_inline = false;
  /// Deterministic tests: runs the test scheduler before every wait for an answer.
  std::function<void()> drive;
  /// Receives each message a device actor handles ("/device:CPU:0 run step 1").
  std::function<void(const std::string&)> trace;
  /// Number of CPU devices (TensorFlow's device_count {"CPU": n}): /cpu:0 .. /cpu:n-1, sharing
  /// the pools. More than one gives cross-device partitions inside one process.
  int cpu_device_count = 1;
  /// Test devices for this session's own tasks (TEST:0 ..., devices/test_device.hpp): they take
  /// a GPU's path (streams, device memory, copies) on any machine. -1: ACTORFLOW_TEST_DEVICES
  /// decides.
  int test_device_count = -1;
  /// TensorFlow's GPUOptions for this session's own tasks: per_process_gpu_memory_fraction and
  /// allow_growth.
  gpu_options gpu;

  /// A master to open the session on, "caf://host:port" (any task of a cluster, or
  /// actorflow-master): it places and runs the graph on its cluster. The client only sends its
  /// graph, feeds and fetches. Needs an actor system with CAF's middleman.
  std::string target;
  /// A master already spawned in this process (existing_master(spawn_master(...)), or a task's
  /// handle): the session opens on it and leaves it running when it ends.
  std::shared_ptr<const master_ref> master;
  /// Runs on a cluster instead of this process's devices: this process acts as the master and
  /// reaches every task's service (actorflow-worker) at its address over CAF's network layer.
  /// Tasks keep their variables across sessions, as TensorFlow servers do.
  std::shared_ptr<const cluster_spec> cluster;
  /// Runs an in-process cluster instead: these jobs with this many tasks each, e.g.
  /// {{"ps", 1}, {"worker", 2}}. Every task gets its own devices and task service, and the
  /// session drives them through the master and task protocol a real cluster uses, with local
  /// messages. The tasks end with the session.
  std::map<std::string, int> in_process_cluster;
  /// With `cluster`: the tasks this process's master reaches, as device-name prefixes
  /// ("/job:ps", "/job:worker/task:1"; TensorFlow's device_filters). Empty: every task. A
  /// session that runs on one worker and the ps tasks must not wait for the other workers.
  std::vector<std::string> device_filters;
  /// Where nodes whose request names neither job nor task go ("/job:worker/task:0"); empty
  /// means task 0 of the job "worker", or of the first job when there is none.
  std::string default_task;
  /// Bound on reaching a task and on every answer from a task; a task that does not answer in
  /// time fails the operation with an error naming it. 0 means no bound for local devices and
  /// 10 s on a cluster (target or cluster). A session waits for its master at most three such
  /// bounds (reaching the tasks, registering partitions, the step) plus a second; with no
  /// bound it still notices a master that goes down.
  double timeout_seconds = 0;
  /// Opening the session waits this long for a target, or (with `cluster`) a task, where
  /// nothing listens yet (started after this client), trying again every half second and
  /// saying every 5 s what it waits for (TensorFlow's "CreateSession still waiting for response
  /// from worker"); any other failure to connect fails at once. 0: fail at once.
  double connect_timeout_seconds = 60;
  /// The most memory the tensors this session's kernels allocate may hold at once on each
  /// device (TensorFlow has no such cap); a step that would go over fails with
  /// resource_exhausted naming the node, the device and the limit. Tensors a step fetches or
  /// stores in a variable count until they are freed. A task's ACTORFLOW_SESSION_MEMORY_BYTES
  /// caps it for every session on that task. 0: only the task's cap.
  std::size_t memory_limit_bytes = 0;
};

/// Where the time of one step went (TensorFlow's RunMetadata, in small).
struct step_stats {
  /// session::run from call to return.
  double total_seconds = 0;
  /// The longest time a device spent executing its partition; the rest of total_seconds is
  /// framework overhead (planning lookups, messages, feeding and fetching).
  double execution_seconds = 0;
};

/// Options of one step (TensorFlow's RunOptions, in small).
struct run_options {
  /// What the step's variable updates claim, so that a step run again applies them at most
  /// once (devices/update_fence.hpp); cluster_coordinator sets it. Unfenced by default.
  update_fence fence;
  /// The step's variable updates apply on every device or on none: each update whose inputs
  /// depend on no other update of the step waits until all of them, on every device, are
  /// ready, then the step commits them together (devices/commit_gate.hpp). A worker lost in
  /// the middle of a step then leaves no variable half updated. Costs a message round per step.
  bool all_or_nothing = false;
  /// The step's bound in milliseconds (TensorFlow's RunOptions.timeout_in_ms): a step still
  /// running then is aborted on every device and fails with deadline_exceeded; the session
  /// stays usable. 0: no bound of its own (session_options::timeout_seconds bounds each
  /// task's answer, not the step).
  std::int64_t timeout_ms = 0;
};

/// A session for plain (non-actor) code: every call blocks until the master answers.
class session {
public:
  /// A session on the process-wide actor system.
  explicit session(graph& g, session_options options = {});
  /// A session whose actors live in `system` (embedders, deterministic tests).
  session(caf::actor_system& system, graph& g, session_options options = {});
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  /// Runs one step: computes `fetches` (returned in order), feeding `feeds` and also running
  /// `targets` (whose outputs are not returned). Only what these need runs. Errors name the node
  /// and device that failed; a failing node ends the step on every device.
  result<std::vector<tensor>> run(const std::vector<output>& fetches, const feed_list& feeds = {},
                                  const std::vector<output>& targets = {},
                                  step_stats* stats = nullptr);
  /// run() with per-step options.
  result<std::vector<tensor>> run_with(const run_options& options, const std::vector<output>& fetches,
                                  const feed_list& feeds = {},
                                  const std::vector<output>& targets = {},
                                  step_stats* stats = nullptr);
  /// Runs `targets` only.
  status run_targets(const std::vector<output>& targets, const feed_list& feeds = {});

  /// Aborts this session's steps in flight, from any thread (a client giving up on them:
  /// Ctrl-C): each run waiting for one returns an aborted error soon after. Steps started later
  /// run as usual.
  void cancel_running_steps();

  /// Every "name: device" line placement produced so far.
  const std::vector<std::string>& placement_log() const;

  /// Closes this session on its master; the next run opens a new one with the same graph.
  /// After a task the session used was lost and came back (restarted at its address), the old
  /// session's plans still name the lost task's devices; a reopened one places the graph over
  /// the cluster as it is now. Variables live on the tasks and are not touched.
  void reopen();
  /// Full names of this session's devices.
  std::vector<std::string> device_names() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// The process-wide actor system sessions use by default.
caf::actor_system& default_actor_system();

/// Caps the default actor system's scheduler threads; only effective before its first use
/// (before the first session). Returns false when it is too late. 0 means one per core, at
/// least two.
bool set_default_scheduler_threads(int threads);

} // namespace actorflow

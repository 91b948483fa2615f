#pragma once
/// Command-line options of actorflow-train.
///   auto parsed = parse_train_options(argc, argv);
///   if (!parsed) { std::cerr << "actorflow-train: " << parsed.error().message() << '\n'; return 2; }

#include "graph/status.hpp"
#include "support/security_flags.hpp"

#include <cstdint>
#include <string>

namespace actorflow::train {

struct train_options {
  std::string model = "mlp";
  int epochs = 3;
  int batch_size = 128;
  double learning_rate = 0.1;
  /// sgd, momentum or adam.
  std::string optimizer = "sgd";
  std::uint64_t seed = 1;
  /// How data-parallel replicas (between-graph workers) walk the training set. "global": every
  /// process shuffles the whole set with `seed`, and worker k of N takes positions k, k + N, ...
  /// of each global batch of N * batch_size, so N synchronous workers see exactly the batches
  /// one process at batch N * batch_size sees (`--local` walks that same order). "shard": each
  /// worker shuffles its own contiguous share (rows [k n / N, (k + 1) n / N)) with seed + k,
  /// as separate input pipelines would.
  std::string data_order = "global";
  /// Caps every pool, the BLAS's included; 0 means one per core.
  int threads = 0;
  /// session_options::mixed_precision: "" (ACTORFLOW_MIXED_PRECISION decides, else float32),
  /// "float32", or "bfloat16" (mixed_bfloat16: bf16 MatMuls and convolutions, float32 variables).
  std::string mixed_precision;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  /// metrics.csv and curve.svg go here.
  std::string output_dir = "actorflow-train-output";
  std::string checkpoint_dir;
  bool resume = false;
  /// Keep this many checkpoints.
  int keep_checkpoints = 3;
  /// Between-graph: each ps task writes and reads its own variables' shard of every checkpoint
  /// (TF's Saver(sharded=True)).
  bool sharded_checkpoints = false;
  /// linreg and word2vec: number of steps (word2vec's default 100000). mlp, cnn and rnn in
  /// this process, on a cluster's master or mirrored: a bound on the --epochs' steps, when
  /// given (classifier_steps).
  int steps = 1000;
  bool steps_given = false;
  /// word2vec: the corpus (a dictd dictionary, gzip or plain), WordNet's directory for the
  /// score, the vocabulary's size, the vectors' size, candidates per step, and the loss
  /// ("nce" or "sampled_softmax").
  std::string corpus = "/usr/share/dictd/gcide.dict.dz";
  std::string wordnet_dir = "/usr/share/wordnet";
  int vocabulary = 50000;
  int embedding_dim = 128;
  int num_sampled = 64;
  std::string sampled_loss = "nce";
  /// wide-deep: each field's ids in the synthetic click log (train/click_log.hpp); its
  /// embedding_dim defaults to 8.
  std::int64_t ids_per_field = 100000;
  /// Write a metrics row (and a plain progress line when not on a terminal) every N steps.
  int log_every = 50;
  /// Where to train. A master "caf://host:port" (with `cluster`, data parallel over its ps and
  /// worker jobs; without, one model on the master's default device); else with `cluster`
  /// alone this process is the cluster's master; else an in-process cluster of ps_tasks +
  /// worker_tasks tasks; `local` trains on this process's devices only.
  std::string target;
  std::string cluster;
  std::string ps_job = "ps";
  std::string worker_job = "worker";
  int ps_tasks = 1;
  int worker_tasks = 2;
  bool local = false;
  /// Towers on this many GPUs of this process (SPEC's several GPUs: /gpu:0, /gpu:1, ...), the
  /// variables and the averaging on /cpu:0, with soft placement; 0: no local towers.
  int gpus = 0;
  /// The device type --gpus puts towers on: "GPU", or "TEST" (the test device, which takes the
  /// GPU's path on machines without one).
  std::string tower_device_type = "GPU";
  /// --gpus towers keep a copy of the variables each and all-reduce their gradients
  /// (MirroredStrategy) instead of averaging them on the CPU.
  bool all_reduce = false;
  /// Between-graph replication: this process is task `task` of job `job` (the worker job) of
  /// `cluster`, with a graph of its own; variables live on the ps tasks and are shared by every
  /// worker. Task 0 is the chief. Unset: in-graph (or local) training.
  std::string job;
  int task = 0;
  /// Non-chief workers wait at most this long for the chief to initialise the variables (and
  /// for the ps tasks to come up).
  int init_timeout_seconds = 60;
  /// Cluster training (between-graph, --coordinator): a step, and a probe of a task, that has
  /// no answer after this long fails (TF's operation_timeout_in_ms); a hung task is then found
  /// out this soon.
  int step_timeout_seconds = 10;
  /// A client that starts before its master or tasks listen waits this long for them (saying
  /// every 5 s what it waits for); 0 fails at once (session_options::connect_timeout_seconds).
  int connect_timeout_seconds = 60;
  /// Between-graph, synchronous rounds (SyncReplicasOptimizer): each round averages the
  /// gradients of `replicas_to_aggregate` workers (0: every worker) before one update;
  /// `total_replicas` (0: every worker) more than that makes the slowest workers backups.
  bool sync = false;
  int replicas_to_aggregate = 0;
  int total_replicas = 0;
  /// A round missing gradients this long after its first closes with those it has (a lost
  /// worker stalls the others no longer; the rounds are counted as short). 0: wait for all.
  int round_timeout_seconds = 30;
  /// TF2's ParameterServerStrategy: with `cluster`, this process coordinates the worker job's
  /// tasks (actorflow-worker), scheduling one closure per batch on whichever worker is free,
  /// each on that worker's shard of the data; a closure whose worker is lost runs again on
  /// another, its update counted once (actors/cluster_coordinator.hpp).
  bool coordinator = false;
  /// "mirrored": with --cluster/--job/--task (or TF_CONFIG), MultiWorkerMirroredStrategy: no
  /// ps; every worker holds the variables, the chief's initial values are broadcast, and each
  /// step applies the all-reduced mean gradient on every replica (actors/collective.hpp).
  /// Empty: between-graph with ps tasks.
  std::string strategy;
  /// --strategy mirrored: every N steps (0: never) the replicas compare a hash of every
  /// variable, and the run fails naming the first variable that differs.
  int check_replicas = 0;
  /// --strategy mirrored: gradients go in buckets of at most this many MiB (PyTorch DDP's
  /// bucket_cap_mb; the first bucket at most 1 MiB), each all-reduced as soon as the backward
  /// pass has made its gradients.
  double bucket_mb = 25;
  /// Where to write a picture of the placed graph (.dot, .svg, .png or .pdf); empty: nowhere.
  std::string graph_out;
  /// Print "node: device" for every node placed (TensorFlow's log_device_placement).
  bool log_device_placement = false;
  /// Serve Prometheus metrics on this port (0: none), on `bind`, else where this process's
  /// task listens, else 127.0.0.1 (apps::metrics_host).
  int metrics_port = 0;
  /// The address this process listens on: a between-graph worker's task (default: its spec
  /// address's host) and the metrics endpoint.
  std::string bind;
  /// --token-file, --tls-cert, --tls-key, --tls-ca (applied by main before any actor system).
  apps::security_flags security;
  bool help = false;
};

/// The options, or an error naming the flag at fault ("--epochs: 'x' is not a number").
result<train_options> parse_train_options(int argc, const char* const* argv);

/// The --help text listing every flag.
std::string train_usage();

/// The steps an mlp, cnn or rnn run takes: --epochs of `steps_per_epoch`, or --steps when
/// given and fewer.
std::int64_t classifier_steps(const train_options& o, std::int64_t steps_per_epoch);

} // namespace actorflow::train

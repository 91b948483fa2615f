#include "train/options.hpp"

#include "support/flags.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <sstream>

namespace actorflow::train {

namespace {

/// --gpus beyond this is a typo: no machine has more GPUs in one process.
constexpr int max_local_towers = 16;

status bad(const std::string& flag, const std::string& why) {
  return make_error(errc::invalid_argument, flag + ": " + why);
}

status parse_positive_double(const std::string& flag, const std::string& text, double& out) {
  try {
    std::size_t used = 0;
    auto value = std::stod(text, &used);
    if (used != text.size())
      return bad(flag, "'" + text + "' is not a number");
    if (!(value > 0))
      return bad(flag, "must be positive, got " + text);
    out = value;
    return {};
  } catch (...) {
    return bad(flag, "'" + text + "' is not a number");
  }
}

status one_of(const std::string& flag, const std::string& text,
              std::initializer_list<const char*> allowed, std::string& out) {
  std::string list;
  for (auto* a : allowed) {
    if (text == a) {
      out = text;
      return {};
    }
    list += (list.empty() ? "" : ", ") + std::string{a};
  }
  return bad(flag, "'" + text + "' is not one of " + list);
}

} // namespace

std::string train_usage() {
  return R"(usage: actorflow-train [flags]
Trains a model with actorflow: in this process (--local, --gpus, an in-process cluster), on a
cluster's master (--target, --cluster), as one worker of a between-graph cluster (--job/--task or
TF_CONFIG), or coordinating a cluster's workers (--coordinator).

  --model NAME           mlp (784-256-128-10 ReLU network on Fashion-MNIST), cnn (two 5x5
                         convolutions with max pooling, then 512-128-10), rnn (a tanh cell of
                         128 units over the 28 rows of each image, in a while loop), linreg
                         (the classic y = 0.1 x + 0.3 example), word2vec (skip-gram vectors of
                         a dictionary's words by a sampled loss, scored against WordNet) or
                         wide-deep (click prediction on a synthetic click log, hash embedding
                         tables, FTRL and Adagrad, scored by AUC against the true model's);
                         default mlp
  --epochs N             mlp, cnn, rnn: passes over the training set (default 3)
  --batch-size N         mlp, cnn, rnn: examples per step (default 128; cnn 32)
  --learning-rate X      default 0.1 (linreg: 0.5; word2vec: 1.0; cnn, rnn: 0.001 with adam,
                         else 0.01; wide-deep: FTRL's and Adagrad's, 0.2)
  --optimizer NAME       sgd, momentum (0.9) or adam (default sgd; cnn, rnn: adam)
  --seed N               seeds initial weights and batch order (default 1)
  --data-order ORDER     between-graph: global (every worker shuffles the whole training set
                         with --seed and takes rows k, k+N, ... of each batch of N x
                         --batch-size: N --sync workers see exactly the batches of --local
                         --batch-size N x B) or shard (each worker shuffles its own contiguous
                         share, with seed + task) (default global)
  --threads N            caps every thread pool and the BLAS; 0 = one per core (default 0)
  --mixed-precision P    float32 or bfloat16 (TensorFlow's mixed_bfloat16: the CPU's MatMuls
                         and convolutions take bf16 operands, on AMX where the CPU has it, and
                         accumulate in float32; variables stay float32) (default float32, or
                         ACTORFLOW_MIXED_PRECISION)
  --steps N              linreg, word2vec, wide-deep: training steps (default 1000; word2vec
                         100000; wide-deep 2000); mlp, cnn, rnn in this process, on a
                         cluster's master or --strategy mirrored: stop after N steps if
                         --epochs has more (default: --epochs' steps)
  --ids-per-field N      wide-deep: ids of each field of the click log (default 100000)
  --corpus FILE          word2vec: a dictd dictionary, gzip or plain (default Debian's
                         dict-gcide, /usr/share/dictd/gcide.dict.dz)
  --wordnet-dir DIR      word2vec: WordNet's data files, to score the vectors by
                         (default /usr/share/wordnet, from wordnet-base)
  --vocabulary N         word2vec: the N - 1 most frequent words and UNK (default 50000)
  --embedding-dim N      word2vec, wide-deep: the vectors' size (default 128; wide-deep 8)
  --num-sampled N        word2vec: candidates per step of the sampled loss (default 64)
  --sampled-loss L       word2vec: nce (default) or sampled_softmax
  --data-dir DIR         Fashion-MNIST idx files (default /usr/share/datasets/fashion-mnist)
  --output-dir DIR       where metrics.csv, curve.svg and the TensorBoard event files
                         (tensorboard --logdir DIR) go (default actorflow-train-output)
  --checkpoint-dir DIR   save a checkpoint there after every epoch (linreg: every 100 steps and
                         at the end)
  --keep-checkpoints N   how many checkpoints to keep (default 3)
  --sharded-checkpoints  between-graph: each ps task writes (and at --resume reads) the shard of
                         every checkpoint holding its own variables, in --checkpoint-dir on its
                         machine, and the chief the file that records the shards: no variable's
                         value passes through the chief (TF's Saver(sharded=True))
  --resume               continue from the latest checkpoint in --checkpoint-dir, and with the
                         metrics.csv (and so the curve) of the run it continues (--strategy
                         mirrored: give it to every worker; the chief's checkpoint is restored
                         and broadcast)
  --log-every N          metrics row every N steps (default 50)
  --target caf://H:P     train on the cluster whose master listens there (actorflow-master,
                         or a worker started with --master); with --cluster, data parallel
                         over its ps and worker jobs, without, on the master's default device
  --cluster SPEC         the cluster (JSON file, JSON text or ps=h:p;worker=h:p,h:p); without
                         --target this process is its master
  --ps-job NAME          the cluster's parameter-server job (default ps)
  --worker-job NAME      the cluster's worker job (default worker)
  --ps-tasks N           in-process cluster (no --cluster): parameter servers (default 1)
  --worker-tasks N       in-process cluster (no --cluster): workers, one tower each (default 2)
  --local                train in this process on one device, without ps or worker tasks
  --gpus N               train in this process on N towers pinned to /gpu:0 .. /gpu:N-1, the
                         variables and the averaged update on /cpu:0 (soft placement: towers
                         go to the CPU where there is no such GPU)
  --tower-device-type T  the device type of --gpus towers: GPU (default) or TEST (the test
                         device, the GPU's path on a machine without one)
  --all-reduce           --gpus towers keep their own copy of the variables and all-reduce
                         their gradients (MirroredStrategy) instead of averaging on the CPU
  --job NAME --task N    between-graph replication: this process is worker task N of --cluster
                         (or of TF_CONFIG, which also names job and task), training a graph of
                         its own on its shard of the data, asynchronously, with the variables on
                         the ps tasks; task 0 is the chief (initialises or restores, writes
                         checkpoints and metrics, reports test accuracy). The ps tasks
                         (actorflow-worker) exit once every worker has finished. word2vec
                         and wide-deep too (async only): their tables shared on the ps
                         tasks, each worker on its part of the corpus or its own stretch of
                         the click log, the chief scoring the shared model
  --init-timeout S       between-graph, not the chief: wait at most S seconds for the chief to
                         initialise the variables (default 60)
  --step-timeout S       --cluster or --target (in-graph, between-graph, --coordinator): a step
                         or a probe of a task with no answer after S seconds fails, and a hung
                         task is found out (default 10)
  --sync                 between-graph in synchronous rounds: every variable's gradients are
                         averaged over --replicas-to-aggregate workers and applied once per round;
                         stale gradients are dropped (sgd: the ps apply each round; any other
                         --optimizer: the chief applies it to each round's mean)
  --replicas-to-aggregate K  gradients per round (default: every worker)
  --total-replicas N     the number of workers (default: the worker job's size); more workers
                         than K makes the slowest of each round backups that nobody waits for
  --round-timeout S      a round that has some but not K gradients S seconds after its first
                         closes with those it has (a lost worker does not stall the others;
                         the chief reports the short rounds); 0 waits for all (default 30)
  --strategy mirrored    with --cluster/--job/--task (or TF_CONFIG): MultiWorkerMirroredStrategy,
                         no ps: every worker keeps the variables, the chief's initial values
                         are broadcast, each step applies the all-reduced mean gradient on every
                         worker (the chief evaluates and writes metrics)
  --check-replicas N     with --strategy mirrored: every N steps the workers compare a hash of
                         every variable; a difference fails the run naming the variable
  --bucket-mb X          with --strategy mirrored: gradient buckets of at most X MiB, the first
                         at most 1 MiB, filled from the last layer back; each bucket's
                         all-reduce starts once the backward pass has made its gradients,
                         while it goes on (PyTorch DDP's bucket_cap_mb) (default 25)
  --coordinator          with --cluster: coordinate its worker tasks (actorflow-worker) as TF2's
                         ParameterServerStrategy does: one closure per batch on whichever worker
                         is free, on that worker's shard of the data; a closure whose worker is
                         lost (killed, hung, cut off) runs again on another and its update
                         counts once; a restarted worker rejoins
  --graph-out FILE       a picture of the graph as placed, coloured by device, with its
                         _Send/_Recv pairs and name scopes: FILE.dot, or .svg/.png/.pdf drawn by
                         graphviz's dot (not with --coordinator: each worker places its own copy)
  --metrics-port N       serve Prometheus metrics at http://HOST:N/metrics (HOST: --bind):
                         steps and their latency, bytes per peer and channel, shard updates,
                         stale gradients, allocator bytes, open sessions, and with a cluster
                         whether each task answers (default 0: none). With a cluster token a
                         scrape presents "Authorization: Bearer TOKEN"; with TLS it is HTTPS,
                         and the scraper presents a certificate of the cluster CA
  --bind HOST            the address this process listens on, e.g. 0.0.0.0 in a pod: a
                         between-graph worker's task and --metrics-port (default: the task's
                         spec address's host), or --metrics-port alone (default 127.0.0.1)
  --connect-timeout S    wait at most S seconds for a master (--target) or task that does not
                         listen yet (started after this client), saying every 5 s what is
                         awaited; 0 fails at once (default 60)
  --log-device-placement print "node: device" to standard error for every node placed
  --help                 this text
)";
}

result<train_options> parse_train_options(int argc, const char* const* argv) {
  train_options o;
  bool learning_rate_set = false, optimizer_set = false, batch_size_set = false;
  bool embedding_dim_set = false;
  apps::flag_set flags;
  flags.values = {
    {"--model", [&](auto& v) { return one_of("--model", v, {"mlp", "cnn", "rnn", "linreg", "word2vec", "wide-deep"}, o.model); }},
    {"--epochs", [&](auto& v) { return apps::parse_int_flag("--epochs", v, 1, o.epochs); }},
    {"--batch-size",
     [&](auto& v) {
       batch_size_set = true;
       return apps::parse_int_flag("--batch-size", v, 1, o.batch_size);
     }},
    {"--learning-rate",
     [&](auto& v) {
       learning_rate_set = true;
       return parse_positive_double("--learning-rate", v, o.learning_rate);
     }},
    {"--optimizer",
     [&](auto& v) {
       optimizer_set = true;
       return one_of("--optimizer", v, {"sgd", "momentum", "adam"}, o.optimizer);
     }},
    {"--data-order", [&](auto& v) { return one_of("--data-order", v, {"shard", "global"}, o.data_order); }},
    {"--strategy", [&](auto& v) { return one_of("--strategy", v, {"mirrored"}, o.strategy); }},
    {"--check-replicas",
     [&](auto& v) { return apps::parse_int_flag("--check-replicas", v, 0, o.check_replicas); }},
    {"--bucket-mb", [&](auto& v) { return parse_positive_double("--bucket-mb", v, o.bucket_mb); }},
    {"--seed", [&](auto& v) { return apps::parse_int_flag<std::uint64_t>("--seed", v, 0, o.seed); }},
    {"--mixed-precision",
     [&](auto& v) { return one_of("--mixed-precision", v, {"float32", "bfloat16"}, o.mixed_precision); }},
    {"--threads", [&](auto& v) { return apps::parse_int_flag("--threads", v, 0, o.threads, apps::max_threads_flag); }},
    {"--steps",
     [&](auto& v) {
       o.steps_given = true;
       return apps::parse_int_flag("--steps", v, 1, o.steps);
     }},
    {"--corpus", [&](auto& v) { o.corpus = v; return status{}; }},
    {"--wordnet-dir", [&](auto& v) { o.wordnet_dir = v; return status{}; }},
    {"--vocabulary", [&](auto& v) { return apps::parse_int_flag("--vocabulary", v, 2, o.vocabulary); }},
    {"--embedding-dim",
     [&](auto& v) {
       embedding_dim_set = true;
       return apps::parse_int_flag("--embedding-dim", v, 1, o.embedding_dim);
     }},
    {"--ids-per-field",
     [&](auto& v) { return apps::parse_int_flag<std::int64_t>("--ids-per-field", v, 1, o.ids_per_field); }},
    {"--num-sampled", [&](auto& v) { return apps::parse_int_flag("--num-sampled", v, 1, o.num_sampled); }},
    {"--sampled-loss",
     [&](auto& v) { return one_of("--sampled-loss", v, {"nce", "sampled_softmax"}, o.sampled_loss); }},
    {"--data-dir", [&](auto& v) { o.data_dir = v; return status{}; }},
    {"--output-dir", [&](auto& v) { o.output_dir = v; return status{}; }},
    {"--graph-out", [&](auto& v) { o.graph_out = v; return status{}; }},
    {"--checkpoint-dir", [&](auto& v) { o.checkpoint_dir = v; return status{}; }},
    {"--keep-checkpoints",
     [&](auto& v) { return apps::parse_int_flag("--keep-checkpoints", v, 1, o.keep_checkpoints); }},
    {"--bind", [&](auto& v) { o.bind = v; return status{}; }},
    {"--log-every", [&](auto& v) { return apps::parse_int_flag("--log-every", v, 1, o.log_every); }},
    {"--target", [&](auto& v) { o.target = v; return status{}; }},
    {"--cluster", [&](auto& v) { o.cluster = v; return status{}; }},
    {"--ps-job", [&](auto& v) { o.ps_job = v; return status{}; }},
    {"--worker-job", [&](auto& v) { o.worker_job = v; return status{}; }},
    {"--ps-tasks", [&](auto& v) { return apps::parse_int_flag("--ps-tasks", v, 1, o.ps_tasks); }},
    {"--worker-tasks", [&](auto& v) { return apps::parse_int_flag("--worker-tasks", v, 1, o.worker_tasks); }},
    {"--gpus", [&](auto& v) { return apps::parse_int_flag("--gpus", v, 1, o.gpus); }},
    {"--tower-device-type", [&](auto& v) {
       if (v != "GPU" && v != "TEST")
         return bad("--tower-device-type", "'" + v + "' is neither GPU nor TEST");
       o.tower_device_type = v;
       return status{};
     }},
    {"--job", [&](auto& v) { o.job = v; return status{}; }},
    {"--task", [&](auto& v) { return apps::parse_int_flag("--task", v, 0, o.task); }},
    {"--replicas-to-aggregate",
     [&](auto& v) { return apps::parse_int_flag("--replicas-to-aggregate", v, 1, o.replicas_to_aggregate); }},
    {"--total-replicas",
     [&](auto& v) { return apps::parse_int_flag("--total-replicas", v, 1, o.total_replicas); }},
    {"--round-timeout",
     [&](auto& v) { return apps::parse_int_flag("--round-timeout", v, 0, o.round_timeout_seconds); }},
    {"--init-timeout",
     [&](auto& v) { return apps::parse_int_flag("--init-timeout", v, 1, o.init_timeout_seconds); }},
    {"--step-timeout",
     [&](auto& v) { return apps::parse_int_flag("--step-timeout", v, 1, o.step_timeout_seconds); }},
  };
  apps::add_security_flags(flags, o.security);
  apps::add_metrics_port_flag(flags, o.metrics_port);
  apps::add_connect_timeout_flag(flags, o.connect_timeout_seconds);
  flags.switches = {{"--help", &o.help}, {"-h", &o.help}, {"--resume", &o.resume}, {"--local", &o.local},
                    {"--log-device-placement", &o.log_device_placement}, {"--sync", &o.sync},
                    {"--all-reduce", &o.all_reduce}, {"--coordinator", &o.coordinator},
                    {"--sharded-checkpoints", &o.sharded_checkpoints}};
  AF_RETURN_IF_ERROR(apps::parse_flags(argc, argv, flags));
  if (o.model == "linreg" && !learning_rate_set)
    o.learning_rate = 0.5;
  // word2vec's defaults are TF's word2vec_basic's: SGD at 1.0 on batches of 128.
  if (o.model == "word2vec") {
    if (!learning_rate_set)
      o.learning_rate = 1.0;
    if (!o.steps_given)
      o.steps = 100000;
    if (o.num_sampled >= o.vocabulary)
      return bad("--num-sampled", std::to_string(o.num_sampled) + " candidates out of a vocabulary of " +
                                    std::to_string(o.vocabulary));
  }
  if (o.model == "wide-deep") {
    if (!learning_rate_set)
      o.learning_rate = 0.2;
    if (!o.steps_given)
      o.steps = 2000;
    if (!embedding_dim_set)
      o.embedding_dim = 8;
  }
  // The CNN's defaults: Adam at 0.001 on batches of 32, which take it past 0.89 test accuracy
  // in three epochs (SGD at 0.1 on 128 stays near 0.86).
  if (o.model == "cnn" || o.model == "rnn") {
    if (!optimizer_set)
      o.optimizer = "adam";
    if (!learning_rate_set)
      o.learning_rate = o.optimizer == "adam" ? 0.001 : 0.01;
    if (!batch_size_set && o.model == "cnn")
      o.batch_size = 32;
  }
  if (o.resume && o.checkpoint_dir.empty())
    return bad("--resume", "needs --checkpoint-dir");
  if (o.gpus > max_local_towers)
    return bad("--gpus", std::to_string(o.gpus) + " towers; at most " +
                           std::to_string(max_local_towers));
  if (o.gpus > 0 && (o.local || !o.target.empty() || !o.cluster.empty() || !o.job.empty()))
    return bad("--gpus", "trains in this process: not with --local, --target, --cluster or --job");
  if (o.all_reduce && o.gpus == 0)
    return bad("--all-reduce", "all-reduces between --gpus towers: give --gpus N");
  if (o.gpus > 0 && o.model == "linreg")
    return bad("--gpus", "towers train the mlp, the cnn or the rnn, not linreg");
  if (o.local && (!o.target.empty() || !o.cluster.empty()))
    return bad("--local", "cannot be combined with --target or --cluster");
  if (!o.job.empty() && (o.local || !o.target.empty()))
    return bad("--job", "between-graph workers take --cluster (or TF_CONFIG), not --local or --target");
  if (o.coordinator && (o.cluster.empty() || !o.target.empty() || !o.job.empty() || o.sync))
    return bad("--coordinator", "coordinates the workers of --cluster: not with --target, --job or "
                                "--sync, and not without --cluster");
  if (o.coordinator && !o.graph_out.empty())
    return bad("--graph-out", "not with --coordinator: each worker places its own copy of the graph");
  if (o.coordinator && (o.model == "linreg" || o.model == "word2vec" || o.model == "wide-deep"))
    return bad("--coordinator", "coordinated training runs a classifier (--model mlp, cnn or rnn)");
  if (o.steps_given && (o.model == "mlp" || o.model == "cnn" || o.model == "rnn") &&
      (o.coordinator || (!o.job.empty() && o.strategy.empty())))
    return bad("--steps", "an " + o.model + " takes it in this process, on a cluster's master or "
                          "with --strategy mirrored, not as a between-graph or coordinated worker");
  if (o.sharded_checkpoints && (o.job.empty() || !o.strategy.empty() || o.checkpoint_dir.empty()))
    return bad("--sharded-checkpoints", "is for between-graph workers (--job, no --strategy) with "
                                        "--checkpoint-dir");
  if (!o.job.empty() && o.job == o.ps_job)
    return bad("--job", "'" + o.job + "' is the ps job: parameter servers run actorflow-worker");
  return o;
}

std::int64_t classifier_steps(const train_options& o, std::int64_t steps_per_epoch) {
  auto epochs = steps_per_epoch * o.epochs;
  return o.steps_given ? std::min<std::int64_t>(epochs, o.steps) : epochs;
}

} // namespace actorflow::train

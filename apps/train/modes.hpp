#pragma once
/// The modes of actorflow-train, each a function of its parsed flags (apps/actorflow-train.cpp is
/// the switch between them): an exit code, with what went wrong on standard error.
#include "actors/cluster_spec.hpp"
#include "train/run_common.hpp"

#include <string>

namespace actorflow::train_app {

/// The classic linear regression (--model linreg), locally or on the target's cluster.
int run_linreg(const train_options& o, const training_target& where);
/// A classifier, locally, in-graph on a cluster (data-parallel towers) or on local devices.
int run_mlp(const train_options& o, const training_target& where);
/// Skip-gram word vectors of a dictionary by a sampled loss (--model word2vec), locally or on
/// the in-process cluster (the tables on the ps tasks).
int run_word2vec(const train_options& o, const training_target& where);
/// Click prediction over hash embeddings (--model wide-deep), locally or on the in-process
/// cluster (the tables' shards on the ps tasks).
int run_wide_deep(const train_options& o, const training_target& where);
/// Between-graph replication: this process is worker `task` of `job`; async, or --sync rounds.
int run_between_graph(const train_options& o, const cluster_spec& cluster, const std::string& job,
                      int task);
/// Between-graph word2vec and wide-deep (async): worker `task` of `job`, the tables and
/// variables shared on the ps tasks, each worker on a stream of examples of its own.
int run_word2vec_worker(const train_options& o, const cluster_spec& cluster, const std::string& job,
                        int task);
int run_wide_deep_worker(const train_options& o, const cluster_spec& cluster, const std::string& job,
                         int task);
/// --strategy mirrored: MultiWorkerMirroredStrategy, this process worker `task` of `job`, no ps.
int run_mirrored(const train_options& o, const cluster_spec& cluster, const std::string& job,
                 int task);
/// --coordinator: TF2's ParameterServerStrategy with a ClusterCoordinator.
int run_coordinated(const train_options& o, const cluster_spec& cluster);

} // namespace actorflow::train_app

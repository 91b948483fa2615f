// actorflow-train: the main job. Trains the classic linear regression or a 784-256-128-10 ReLU
// MLP on Fashion-MNIST with actorflow sessions, shows progress, writes metrics.csv and
// curve.svg, and ends with "examples/s: N" and "test accuracy: X" (mlp). By default it trains
// on an in-process cluster (1 ps + 2 workers, data parallel); --target/--cluster train on a
// real cluster and --local in this process alone.
#include "actors/cluster_liveness.hpp"
#include "actors/cluster_spec.hpp"
#include "actors/session.hpp"
#include "actors/transport_security.hpp"
#include "support/flags.hpp"
#include "support/metrics_http.hpp"
#include "support/security_flags.hpp"
#include "train/modes.hpp"
#include "train/options.hpp"

#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>

using namespace actorflow;
using namespace actorflow::train_app;

int run(int argc, char** argv) {
  auto parsed = train::parse_train_options(argc, argv);
  if (!parsed) {
    std::cerr << "actorflow-train: " << parsed.error().message() << '\n';
    return 2;
  }
  auto& o = *parsed;
  if (o.help) {
    std::cout << train::train_usage() << apps::security_flags_help;
    return 0;
  }
  if (auto s = apps::apply_security_flags(o.security); !s.ok())
    return usage_error(s);
  if (o.threads > 0)
    set_default_scheduler_threads(o.threads);
  // --metrics-port, once it is known where this process listens: where its task does (the host
  // of its spec address, or --bind), on loopback when it is no task of a cluster. With a cluster
  // known, the endpoint also says whether each of its tasks answers. An exit code on failure.
  std::unique_ptr<apps::metrics_endpoint> metrics_served;
  std::unique_ptr<cluster_liveness> liveness;
  auto start_metrics = [&](const std::string& task_host, const cluster_spec* cluster) -> std::optional<int> {
    auto served = apps::serve_metrics("actorflow-train", apps::metrics_host(o.bind, task_host),
                                      o.metrics_port, process_transport_security());
    if (!served) {
      std::cerr << "actorflow-train: " << served.error().message() << '\n';
      return apps::metrics_exit_code(served.error());
    }
    metrics_served = std::move(*served);
    if (metrics_served && cluster != nullptr)
      liveness = std::make_unique<cluster_liveness>(*cluster);
    return std::nullopt;
  };
  if (o.coordinator) {
    auto spec = cluster_spec::parse(o.cluster);
    if (!spec) {
      std::cerr << "actorflow-train: --cluster: " << spec.error().message() << '\n';
      return 2;
    }
    if (auto distinct = check_distinct_addresses(*spec); !distinct.ok()) {
      std::cerr << "actorflow-train: --cluster: " << distinct.message() << '\n';
      return 2;
    }
    if (auto failed = start_metrics("", &*spec))
      return *failed;
    return run_coordinated(o, *spec);
  }
  if (!o.job.empty() || (o.cluster.empty() && o.target.empty() && !o.local &&
                         std::getenv("TF_CONFIG") != nullptr)) {
    // Between-graph: --cluster/--job/--task, or TF_CONFIG (which --job/--task may override).
    if (o.model == "linreg") {
      std::cerr << "actorflow-train: between-graph training runs a classifier, word2vec or "
                   "wide-deep, not linreg\n";
      return 2;
    }
    if ((o.model == "word2vec" || o.model == "wide-deep") && (o.sync || o.strategy == "mirrored")) {
      std::cerr << "actorflow-train: between-graph " << o.model << " is asynchronous: not with "
                << (o.sync ? "--sync" : "--strategy mirrored") << " yet\n";
      return 2;
    }
    cluster_spec cluster;
    auto job = o.job;
    auto task = o.task;
    if (!o.cluster.empty()) {
      auto spec = cluster_spec::parse(o.cluster);
      if (!spec) {
        std::cerr << "actorflow-train: --cluster: " << spec.error().message() << '\n';
        return 2;
      }
      cluster = std::move(*spec);
    } else {
      auto config = tf_config_from_environment();
      if (!config) {
        std::cerr << "actorflow-train: " << config.error().message() << '\n';
        return 2;
      }
      cluster = config->cluster;
      if (job.empty()) {
        job = config->job;
        task = config->task_index;
      }
    }
    if (job.empty()) {
      std::cerr << "actorflow-train: --job is required with --cluster for between-graph training\n";
      return 2;
    }
    if (auto distinct = check_distinct_addresses(cluster); !distinct.ok()) {
      std::cerr << "actorflow-train: " << distinct.message() << '\n';
      return 2;
    }
    // This worker's task listens on its spec address's host (an unknown task fails just after).
    std::string task_host;
    if (auto address = cluster.address(job, task))
      if (auto split = parse_host_port(*address))
        task_host = split->host;
    if (auto failed = start_metrics(task_host, &cluster))
      return *failed;
    if (o.strategy == "mirrored")
      return run_mirrored(o, cluster, job, task);
    if (o.model == "word2vec")
      return run_word2vec_worker(o, cluster, job, task);
    if (o.model == "wide-deep")
      return run_wide_deep_worker(o, cluster, job, task);
    return run_between_graph(o, cluster, job, task);
  }
  auto where = resolve_target(o);
  if (!where) {
    std::cerr << "actorflow-train: " << where.error().message() << '\n';
    return 2;
  }
  std::optional<cluster_spec> cluster;
  if (!o.cluster.empty())
    if (auto spec = cluster_spec::parse(o.cluster))
      cluster = std::move(*spec);
  if (auto failed = start_metrics("", cluster ? &*cluster : nullptr))
    return *failed;
  if (o.model == "word2vec")
    return run_word2vec(o, *where);
  if (o.model == "wide-deep")
    return run_wide_deep(o, *where);
  return o.model == "linreg" ? run_linreg(o, *where) : run_mlp(o, *where);
}

int main(int argc, char** argv) { return apps::run_main("actorflow-train", run, argc, argv); }


// actorflow-k8s: renders the Kubernetes manifests of one training cluster from a few
// parameters and prints them (YAML, one document each) on standard output:
//   actorflow-k8s --name demo --ps 2 --workers 3 | kubectl apply -f -
//   actorflow-k8s --dockerfile > Dockerfile        # the image the manifests run
// What it renders, for job name N:
//   - a headless Service per task (N-ps-0, N-worker-1, ...): stable DNS names, the task's port,
//     its bulk port (large tensors) and its Prometheus metrics port (--metrics-port, and the
//     prometheus.io annotations on every pod: scheme https with --tls-secret);
//   - a Job per task, whose pod is told its cluster and its own job and task in TF_CONFIG built
//     from the DNS names, listens on 0.0.0.0 (--bind) and restarts on failure. ps tasks run
//     actorflow-worker and complete (exit 0) by themselves once every worker has finished;
//     workers run actorflow-train between graphs (async or --sync), the chief (worker 0)
//     writing checkpoints, metrics and the graph's picture to the log volume. In in-graph mode
//     every task runs actorflow-worker and a client Job trains through worker 0;
//   - a TensorBoard Deployment and Service reading the log volume.
// Errors name the flag at fault; exit 2.
#include "support/flags.hpp"

#include <cctype>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using actorflow::status;
using actorflow::errc;
using actorflow::make_error;

struct k8s_options {
  std::string name;
  std::string namespace_name = "default";
  std::string image = "actorflow:latest";
  int ps = 1;
  int workers = 2;
  /// async, sync (between-graph) or in-graph (a client over actorflow-worker tasks).
  std::string mode = "async";
  std::string model = "mlp";
  int epochs = 3;
  /// More actorflow-train flags, passed on as they are.
  std::string train_flags;
  std::string data_pvc;
  std::string logs_pvc;
  std::string cpu = "1";
  std::string memory = "2Gi";
  int gpus = 0;
  std::string tls_secret;
  int port = 2222;
  int bulk_port = 2223;
  int metrics_port = 9100;
  bool dockerfile = false;
  bool help = false;
};

const char* usage = R"(usage: actorflow-k8s --name NAME [options]      (YAML on standard output)
       actorflow-k8s --dockerfile                  (the image's Dockerfile)

  --name NAME          the training job's name: a DNS label (lower case letters, digits, '-')
  --namespace NS       Kubernetes namespace (default default)
  --image IMAGE        the image with actorflow's programs (default actorflow:latest)
  --ps N               parameter-server tasks (default 1)
  --workers N          worker tasks (default 2)
  --mode MODE          async or sync (between-graph: each worker trains its own graph), or
                       in-graph (a client Job trains through worker 0) (default async)
  --model MODEL        mlp, cnn or rnn (default mlp)
  --epochs N           training epochs (default 3)
  --train-flags TEXT   more actorflow-train flags, as they are (e.g. "--optimizer adam")
  --data-pvc NAME      PersistentVolumeClaim with Fashion-MNIST, mounted at /data (default: the
                       image's /usr/share/datasets/fashion-mnist)
  --logs-pvc NAME      PersistentVolumeClaim for metrics, checkpoints and TensorBoard, at /logs
                       (default: an emptyDir per pod, and no TensorBoard)
  --cpu Q --memory Q   requests of every task's container (default 1 and 2Gi)
  --gpus N             nvidia.com/gpu per worker (default 0)
  --tls-secret NAME    a Secret with tls.crt, tls.key and ca.crt (deploy/tls/make-cluster-certs.sh):
                       every task then speaks mutual TLS, its metrics too (HTTPS; Prometheus
                       presents a certificate of the same CA)
  --port N             every task's port (default 2222); --bulk-port N its bulk port (2223)
  --metrics-port N     every pod's Prometheus metrics port (default 9100; the pods carry the
                       prometheus.io/scrape, prometheus.io/port and, with --tls-secret,
                       prometheus.io/scheme annotations)
  --help               this text
)";

bool dns_label(const std::string& s) {
  if (s.empty() || s.size() > 40 || s.front() == '-' || s.back() == '-')
    return false;
  for (char c : s)
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-'))
      return false;
  return true;
}

status parse(int argc, char** argv, k8s_options& o) {
  actorflow::apps::flag_set flags;
  auto text = [](std::string& to) {
    return [&to](const std::string& v) {
      to = v;
      return status{};
    };
  };
  flags.values = {
    {"--name", text(o.name)},
    {"--namespace", text(o.namespace_name)},
    {"--image", text(o.image)},
    {"--ps", [&](const std::string& v) { return actorflow::apps::parse_int_flag("--ps", v, 1, o.ps, 64); }},
    {"--workers", [&](const std::string& v) { return actorflow::apps::parse_int_flag("--workers", v, 1, o.workers, 256); }},
    {"--mode", text(o.mode)},
    {"--model", text(o.model)},
    {"--epochs", [&](const std::string& v) { return actorflow::apps::parse_int_flag("--epochs", v, 1, o.epochs); }},
    {"--train-flags", text(o.train_flags)},
    {"--data-pvc", text(o.data_pvc)},
    {"--logs-pvc", text(o.logs_pvc)},
    {"--cpu", text(o.cpu)},
    {"--memory", text(o.memory)},
    {"--gpus", [&](const std::string& v) { return actorflow::apps::parse_int_flag("--gpus", v, 0, o.gpus, 16); }},
    {"--tls-secret", text(o.tls_secret)},
    {"--port", [&](const std::string& v) { return actorflow::apps::parse_int_flag("--port", v, 1, o.port, 65535); }},
    {"--bulk-port", [&](const std::string& v) { return actorflow::apps::parse_int_flag("--bulk-port", v, 1, o.bulk_port, 65535); }},
    {"--metrics-port", [&](const std::string& v) { return actorflow::apps::parse_int_flag("--metrics-port", v, 1, o.metrics_port, 65535); }},
  };
  flags.switches = {{"--dockerfile", &o.dockerfile}, {"--help", &o.help}, {"-h", &o.help}};
  AF_RETURN_IF_ERROR(actorflow::apps::parse_flags(argc, argv, flags));
  if (o.help || o.dockerfile)
    return {};
  if (o.name.empty())
    return make_error(errc::invalid_argument, "--name is required");
  if (!dns_label(o.name))
    return make_error(errc::invalid_argument, "--name: '" + o.name +
                                                "' is not a DNS label of at most 40 characters "
                                                "(lower case letters, digits, '-')");
  if (!dns_label(o.namespace_name))
    return make_error(errc::invalid_argument, "--namespace: '" + o.namespace_name + "' is not a DNS label");
  if (o.mode != "async" && o.mode != "sync" && o.mode != "in-graph")
    return make_error(errc::invalid_argument, "--mode: '" + o.mode + "' is not async, sync or in-graph");
  // actorflow-train's classifiers (apps/train/models.hpp), which the pods run.
  if (o.model != "mlp" && o.model != "cnn" && o.model != "rnn")
    return make_error(errc::invalid_argument, "--model: '" + o.model + "' is not mlp, cnn or rnn");
  if (o.port == o.bulk_port)
    return make_error(errc::invalid_argument, "--bulk-port: the same as --port");
  if (o.metrics_port == o.port || o.metrics_port == o.bulk_port)
    return make_error(errc::invalid_argument, "--metrics-port: the same as --port or --bulk-port");
  return {};
}

/// `s` as a YAML double-quoted scalar.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

class renderer {
public:
  explicit renderer(const k8s_options& o) : o_(o), cluster_json_(cluster_json()) {}

  std::string render() {
    for (int i = 0; i < o_.ps; ++i)
      task("ps", i);
    for (int i = 0; i < o_.workers; ++i)
      task("worker", i);
    if (o_.mode == "in-graph")
      client();
    if (!o_.logs_pvc.empty())
      tensorboard();
    return out_.str();
  }

private:
  std::string task_name(const std::string& job, int i) const {
    return o_.name + "-" + job + "-" + std::to_string(i);
  }
  std::string address(const std::string& job, int i) const {
    return task_name(job, i) + "." + o_.namespace_name + ".svc.cluster.local:" + std::to_string(o_.port);
  }
  std::string cluster_json() const {
    std::string json = "{";
    for (auto [job, count] : {std::pair<std::string, int>{"ps", o_.ps}, {"worker", o_.workers}}) {
      json += (json.size() > 1 ? ", \"" : "\"") + job + "\": [";
      for (int i = 0; i < count; ++i)
        json += (i > 0 ? ", \"" : "\"") + address(job, i) + "\"";
      json += "]";
    }
    return json + "}";
  }
  std::string tf_config(const std::string& job, int i) const {
    return "{\"cluster\": " + cluster_json_ + ", \"task\": {\"type\": \"" + job +
           "\", \"index\": " + std::to_string(i) + "}}";
  }

  void labels(const std::string& indent, const std::string& job, int i) {
    out_ << indent << "app.kubernetes.io/name: actorflow\n"
         << indent << "app.kubernetes.io/instance: " << o_.name << '\n'
         << indent << "actorflow/job: " << job << '\n'
         << indent << "actorflow/task: " << quoted(std::to_string(i)) << '\n';
  }

  std::string tls_flags() const {
    if (o_.tls_secret.empty())
      return "";
    return " --tls-cert /etc/actorflow/tls/tls.crt --tls-key /etc/actorflow/tls/tls.key"
           " --tls-ca /etc/actorflow/tls/ca.crt";
  }

  /// The model, its data and where its logs go (/logs/LOG_NAME): every training command's.
  std::string training_flags(const std::string& log_name) const {
    return " --model " + o_.model + " --epochs " + std::to_string(o_.epochs) + " --data-dir " +
           (o_.data_pvc.empty() ? "/usr/share/datasets/fashion-mnist" : "/data") +
           " --output-dir /logs/" + log_name;
  }

  std::string metrics_flag() const { return " --metrics-port " + std::to_string(o_.metrics_port); }

  std::string command_of(const std::string& job, int i) const {
    bool trains = job == "worker" && o_.mode != "in-graph";
    if (!trains)
      return "actorflow-worker --bind 0.0.0.0 --bulk-port " + std::to_string(o_.bulk_port) +
             metrics_flag() + tls_flags();
    // --bind: the pod's own Service name resolves only once the pod is ready.
    std::string c = "actorflow-train --bind 0.0.0.0" + metrics_flag() + training_flags(task_name(job, i));
    if (o_.mode == "sync")
      c += " --sync";
    if (i == 0)
      c += " --checkpoint-dir /logs/checkpoints --graph-out /logs/" + task_name(job, i) + "/graph.svg";
    if (!o_.train_flags.empty())
      c += " " + o_.train_flags;
    return c + tls_flags();
  }

  void service(const std::string& job, int i) {
    out_ << "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: " << task_name(job, i)
         << "\n  namespace: " << o_.namespace_name << "\n  labels:\n";
    labels("    ", job, i);
    out_ << "spec:\n  clusterIP: None\n  selector:\n";
    labels("    ", job, i);
    out_ << "  ports:\n  - name: actorflow\n    port: " << o_.port << "\n  - name: bulk\n    port: "
         << o_.bulk_port << "\n  - name: metrics\n    port: " << o_.metrics_port << '\n';
  }

  void volumes(const std::string& indent) {
    out_ << indent << "volumes:\n" << indent << "- name: logs\n";
    if (o_.logs_pvc.empty())
      out_ << indent << "  emptyDir: {}\n";
    else
      out_ << indent << "  persistentVolumeClaim:\n" << indent << "    claimName: " << o_.logs_pvc << '\n';
    if (!o_.data_pvc.empty())
      out_ << indent << "- name: data\n" << indent << "  persistentVolumeClaim:\n"
           << indent << "    claimName: " << o_.data_pvc << "\n" << indent << "    readOnly: true\n";
    if (!o_.tls_secret.empty())
      out_ << indent << "- name: tls\n" << indent << "  secret:\n" << indent
           << "    secretName: " << o_.tls_secret << '\n';
  }

  void container(const std::string& indent, const std::string& name, const std::string& command,
                 const std::string& tf_config_json, bool gpus, bool serves) {
    out_ << indent << "- name: " << name << "\n"
         << indent << "  image: " << o_.image << "\n"
         << indent << "  command: [\"sh\", \"-c\", " << quoted("exec " + command) << "]\n";
    if (!tf_config_json.empty())
      out_ << indent << "  env:\n" << indent << "  - name: TF_CONFIG\n" << indent
           << "    value: " << quoted(tf_config_json) << '\n';
    out_ << indent << "  ports:\n";
    // The client Job listens on nothing but its metrics.
    if (serves)
      out_ << indent << "  - containerPort: " << o_.port << "\n"
           << indent << "  - containerPort: " << o_.bulk_port << "\n";
    out_ << indent << "  - name: metrics\n" << indent << "    containerPort: " << o_.metrics_port << "\n"
         << indent << "  resources:\n" << indent << "    requests:\n"
         << indent << "      cpu: " << quoted(o_.cpu) << "\n"
         << indent << "      memory: " << quoted(o_.memory) << "\n";
    if (gpus && o_.gpus > 0)
      out_ << indent << "    limits:\n" << indent << "      nvidia.com/gpu: " << o_.gpus << '\n';
    out_ << indent << "  volumeMounts:\n" << indent << "  - name: logs\n" << indent
         << "    mountPath: /logs\n";
    if (!o_.data_pvc.empty())
      out_ << indent << "  - name: data\n" << indent << "    mountPath: /data\n" << indent
           << "    readOnly: true\n";
    if (!o_.tls_secret.empty())
      out_ << indent << "  - name: tls\n" << indent << "    mountPath: /etc/actorflow/tls\n"
           << indent << "    readOnly: true\n";
  }

  /// A Job: its pod restarts on failure and the Job completes when it exits 0 (a ps does so by
  /// itself once every worker finished; a worker when training is done).
  void job_of(const std::string& name, const std::string& job, int i, const std::string& command,
              const std::string& tf_config_json, bool gpus) {
    out_ << "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: " << name
         << "\n  namespace: " << o_.namespace_name << "\n  labels:\n";
    labels("    ", job, i);
    out_ << "spec:\n  backoffLimit: 10\n  template:\n    metadata:\n      annotations:\n"
         << "        prometheus.io/scrape: \"true\"\n        prometheus.io/port: \""
         << o_.metrics_port << "\"\n";
    // With TLS the metrics are HTTPS only (and ask for a certificate of the cluster CA).
    if (!o_.tls_secret.empty())
      out_ << "        prometheus.io/scheme: \"https\"\n";
    out_ << "      labels:\n";
    labels("        ", job, i);
    out_ << "    spec:\n      restartPolicy: OnFailure\n";
    if (job != "client")
      out_ << "      hostname: " << name << "\n      subdomain: " << name << '\n';
    out_ << "      containers:\n";
    container("      ", job, command, tf_config_json, gpus, job != "client");
    volumes("      ");
  }

  void task(const std::string& job, int i) {
    service(job, i);
    job_of(task_name(job, i), job, i, command_of(job, i), tf_config(job, i), job == "worker");
  }

  void client() {
    // --bind: the client is no task, so its metrics would listen on loopback only.
    auto command = "actorflow-train --bind 0.0.0.0" + metrics_flag() + " --target caf://" + address("worker", 0) +
                   " --cluster '" + cluster_json_ + "'" + training_flags(o_.name + "-client") +
                   " --graph-out /logs/" + o_.name + "-client/graph.svg" +
                   (o_.train_flags.empty() ? "" : " " + o_.train_flags) + tls_flags();
    job_of(o_.name + "-client", "client", 0, command, "", false);
  }

  void tensorboard() {
    auto name = o_.name + "-tensorboard";
    out_ << "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " << name
         << "\n  namespace: " << o_.namespace_name << "\nspec:\n  replicas: 1\n  selector:\n"
         << "    matchLabels:\n      app.kubernetes.io/name: " << name << "\n  template:\n"
         << "    metadata:\n      labels:\n        app.kubernetes.io/name: " << name << "\n"
         << "    spec:\n      containers:\n      - name: tensorboard\n"
         << "        image: tensorflow/tensorflow:latest\n"
         << "        command: [\"tensorboard\", \"--logdir\", \"/logs\", \"--bind_all\"]\n"
         << "        ports:\n        - containerPort: 6006\n"
         << "        volumeMounts:\n        - name: logs\n          mountPath: /logs\n"
         << "          readOnly: true\n"
         << "      volumes:\n      - name: logs\n        persistentVolumeClaim:\n"
         << "          claimName: " << o_.logs_pvc << "\n";
    out_ << "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: " << name
         << "\n  namespace: " << o_.namespace_name << "\nspec:\n  selector:\n"
         << "    app.kubernetes.io/name: " << name << "\n  ports:\n  - port: 6006\n";
  }

  const k8s_options& o_;
  /// The cluster of every TF_CONFIG and of the client's --cluster.
  const std::string cluster_json_;
  std::ostringstream out_;
};

const char* dockerfile = R"(# The image actorflow-k8s's manifests run: actorflow's programs and Fashion-MNIST.
#   docker build -t actorflow:latest .      (from the repository's root)
FROM debian:bookworm
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      make sudo ca-certificates && rm -rf /var/lib/apt/lists/*
COPY . /src/actorflow
WORKDIR /src/actorflow
# `make deps` installs the build's Debian packages and the dataset; `make install` builds and
# installs the libraries and programs into /usr/local.
RUN apt-get update && make deps && make install PREFIX=/usr/local && rm -rf build /var/lib/apt/lists/*
WORKDIR /
)";

/// 0 once everything went out; with SIGPIPE ignored (run_main), a reader that went away
/// (`| kubectl apply -f -` failing) shows here instead of killing the program.
int written(const char* what) {
  std::cout.flush();
  if (std::cout)
    return 0;
  std::cerr << "actorflow-k8s: cannot write the " << what << " to standard output\n";
  return 1;
}

int run(int argc, char** argv) {
  k8s_options o;
  if (auto st = parse(argc, argv, o); !st.ok()) {
    std::cerr << "actorflow-k8s: " << st.message() << "\n" << usage;
    return 2;
  }
  if (o.help) {
    std::cout << usage;
    return written("usage");
  }
  if (o.dockerfile) {
    std::cout << dockerfile;
    return written("Dockerfile");
  }
  std::cout << renderer{o}.render();
  return written("manifests");
}

} // namespace

int main(int argc, char** argv) { return actorflow::apps::run_main("actorflow-k8s", run, argc, argv); }

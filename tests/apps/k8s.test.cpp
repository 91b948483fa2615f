// actorflow-k8s renders manifests; python3's yaml (Debian's python3-yaml) reads them back, so
// the test checks the structure Kubernetes will see, not the text.
#include "support/processes.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using actorflow::testing::command_result;
using actorflow::testing::run_command;

/// Renders with `flags` and runs the Python `checks` on the documents (`docs`, a list of
/// dicts); its output ends with "ok" when every assert held.
command_result check_manifests(const std::string& flags, const std::string& checks) {
  auto script = "import json, sys, yaml\n"
                "docs = [d for d in yaml.safe_load_all(sys.stdin) if d]\n"
                "by = lambda kind: {d['metadata']['name']: d for d in docs if d['kind'] == kind}\n" +
                checks + "\nprint('ok')\n";
  auto path = "/tmp/af-k8s-check-" + std::to_string(::getpid()) + ".py";
  {
    std::ofstream file{path};
    file << script;
  }
  auto r = run_command(std::string{ACTORFLOW_K8S_BINARY} + " " + flags + " | /usr/bin/python3 " + path);
  std::remove(path.c_str());
  return r;
}

} // namespace

TEST_CASE("actorflow-k8s renders a Service and a Job per task, each pod told its cluster and task in TF_CONFIG") {
  auto r = check_manifests("--name demo --ps 2 --workers 3", R"(
services, jobs = by('Service'), by('Job')
tasks = ['demo-ps-0', 'demo-ps-1', 'demo-worker-0', 'demo-worker-1', 'demo-worker-2']
assert sorted(services) == tasks, services
assert sorted(jobs) == tasks, jobs
for name, s in services.items():
    assert s['spec']['clusterIP'] == 'None', name
    assert [p['port'] for p in s['spec']['ports']] == [2222, 2223, 9100], name
    pod = jobs[name]['spec']['template']
    # Prometheus finds every pod's metrics through its annotations.
    assert pod['metadata']['annotations'] == {'prometheus.io/scrape': 'true', 'prometheus.io/port': '9100'}
    ports = [p['containerPort'] for p in pod['spec']['containers'][0]['ports']]
    assert ports == [2222, 2223, 9100], ports
    assert all(pod['metadata']['labels'][k] == v for k, v in s['spec']['selector'].items()), name
    assert pod['spec']['restartPolicy'] == 'OnFailure', name
    env = {e['name']: e['value'] for e in pod['spec']['containers'][0]['env']}
    config = json.loads(env['TF_CONFIG'])
    job, index = name.split('-')[1], int(name.split('-')[2])
    assert config['task'] == {'type': job, 'index': index}, config
    assert config['cluster']['ps'] == ['demo-ps-%d.default.svc.cluster.local:2222' % i for i in range(2)]
    assert len(config['cluster']['worker']) == 3
    command = pod['spec']['containers'][0]['command'][2]
    if job == 'ps':
        assert 'actorflow-worker --bind 0.0.0.0 --bulk-port 2223 --metrics-port 9100' in command, command
    else:
        assert 'actorflow-train --bind 0.0.0.0 --metrics-port 9100 --model mlp --epochs 3' in command, command
        assert ('--checkpoint-dir' in command) == (index == 0), command
assert not by('Deployment')  # no log volume: no TensorBoard
)");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.rfind("ok\n") + 3 == r.output.size()); // the last line: every assert held
}

TEST_CASE("actorflow-k8s takes volumes, requests, GPUs, TLS and the in-graph mode") {
  auto r = check_manifests(
    "--name run7 --namespace ml --ps 1 --workers 2 --mode in-graph --data-pvc data --logs-pvc logs "
    "--cpu 2 --memory 4Gi --gpus 1 --tls-secret certs --train-flags \"--optimizer adam\"", R"(
jobs = by('Job')
assert sorted(jobs) == ['run7-client', 'run7-ps-0', 'run7-worker-0', 'run7-worker-1'], jobs
client = jobs['run7-client']['spec']['template']['spec']['containers'][0]
# The client is no task: without --bind its metrics would listen on loopback, out of Prometheus's reach.
assert 'actorflow-train --bind 0.0.0.0 --metrics-port 9100 --target caf://run7-worker-0.ml.svc.cluster.local:2222' in client['command'][2]
assert '--optimizer adam' in client['command'][2]
assert [p['containerPort'] for p in client['ports']] == [9100], client['ports']  # metrics only
worker = jobs['run7-worker-1']['spec']['template']['spec']
container = worker['containers'][0]
assert container['command'][2].startswith('exec actorflow-worker'), container['command']
assert container['resources']['requests'] == {'cpu': '2', 'memory': '4Gi'}
assert container['resources']['limits'] == {'nvidia.com/gpu': 1}
assert '--tls-ca /etc/actorflow/tls/ca.crt' in container['command'][2]
# With TLS every pod's metrics are HTTPS only: the annotations tell Prometheus so.
for name, job in jobs.items():
    annotations = job['spec']['template']['metadata']['annotations']
    assert annotations == {'prometheus.io/scrape': 'true', 'prometheus.io/port': '9100',
                           'prometheus.io/scheme': 'https'}, (name, annotations)
mounts = {m['name']: m['mountPath'] for m in container['volumeMounts']}
assert mounts == {'logs': '/logs', 'data': '/data', 'tls': '/etc/actorflow/tls'}, mounts
volumes = {v['name']: v for v in worker['volumes']}
assert volumes['logs']['persistentVolumeClaim']['claimName'] == 'logs'
assert volumes['tls']['secret']['secretName'] == 'certs'
ps = jobs['run7-ps-0']['spec']['template']['spec']['containers'][0]
assert 'limits' not in ps['resources']  # GPUs go to workers
assert jobs['run7-ps-0']['metadata']['namespace'] == 'ml'
board = by('Deployment')['run7-tensorboard']['spec']['template']['spec']
assert board['volumes'][0]['persistentVolumeClaim']['claimName'] == 'logs'
assert 'run7-tensorboard' in by('Service')
)");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.rfind("ok\n") + 3 == r.output.size()); // the last line: every assert held
}

TEST_CASE("actorflow-k8s refuses bad parameters naming the flag, and prints its Dockerfile") {
  for (auto [flags, flag] : {std::pair{"--ps 2", "--name"}, std::pair{"--name Demo", "--name"},
                             std::pair{"--name d --mode lockstep", "--mode"},
                             std::pair{"--name d --workers 0", "--workers"},
                             std::pair{"--name d --bulk-port 2222", "--bulk-port"},
                             std::pair{"--name d --metrics-port 2223", "--metrics-port"},
                             std::pair{"--name d --model svm", "--model"}}) {
    auto r = run_command(std::string{ACTORFLOW_K8S_BINARY} + " " + flags);
    INFO(flags);
    CHECK(r.exit_code == 2);
    // The usage printed after the error lists every flag: the error, its first line, names it.
    auto error = r.output.substr(0, r.output.find('\n'));
    CHECK(error.rfind("actorflow-k8s: ", 0) == 0);
    CHECK(error.find(flag) != std::string::npos);
  }
  // Every classifier actorflow-train has.
  for (auto model : {"mlp", "cnn", "rnn"})
    CHECK(run_command(std::string{ACTORFLOW_K8S_BINARY} + " --name d --model " + model).exit_code == 0);
  auto docker = run_command(std::string{ACTORFLOW_K8S_BINARY} + " --dockerfile");
  CHECK(docker.exit_code == 0);
  CHECK(docker.output.find("FROM debian:bookworm") != std::string::npos);
  CHECK(docker.output.find("make install") != std::string::npos);
}

#!/usr/bin/python3
"""Reads the manifests actorflow-k8s renders (multi-document YAML) and prints, as bash
assignments for netns_k8s.sh to eval, what it takes to run each Job's pod outside Kubernetes:

  pod_count=N                     the Jobs, in the order of the manifests; pod I of them:
  pod_name[I]=...                 the Job's name (one pod per Job)
  pod_hostname[I]=...             spec.hostname ('' when none)
  pod_restart[I]=OnFailure        spec.restartPolicy (OnFailure or Never)
  pod_task[I]='worker 0'          TF_CONFIG's task ('' without TF_CONFIG)
  pod_command_I=(sh -c '...')     the container's command
  pod_env_I=('TF_CONFIG=...')     its env, NAME=VALUE
  pod_mounts_I=(PATH KIND SOURCE MODE ...)  per volume mount: the mountPath, emptyDir or pvc,
                                  the volume's name (emptyDir) or claim (pvc), ro or rw
  pod_names_I=(...)               the DNS names that lead to pod I: every Service selecting it,
                                  as <svc>.<namespace>.svc.cluster.local and <svc>, and its own
                                  <hostname>.<subdomain>.<namespace>.svc.cluster.local

  python3 k8s_pods.py MANIFESTS.yaml

Strict: anything this emulation does not do (another kind, a secret volume, a nested mount
path, args, a Service selecting no pod or several, a TF_CONFIG address no Service names, ...)
is an error on standard error and exit 1, not something silently left out.
"""
import json
import shlex
import sys

import yaml

SUFFIX = "svc.cluster.local"


def die(message):
    print("k8s_pods.py: " + message, file=sys.stderr)
    sys.exit(1)


def need(condition, message):
    if not condition:
        die(message)


def only_keys(what, mapping, allowed):
    need(isinstance(mapping, dict), "%s: not a mapping: %r" % (what, mapping))
    extra = sorted(set(mapping) - set(allowed))
    need(not extra, "%s: not emulated by this test: %s" % (what, ", ".join(extra)))


def main():
    need(len(sys.argv) == 2, "usage: k8s_pods.py MANIFESTS.yaml")
    with open(sys.argv[1]) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    need(docs, "no documents in " + sys.argv[1])

    services, jobs = [], []
    seen = set()
    for d in docs:
        need(isinstance(d, dict), "a document is not a mapping: %r" % (d,))
        kind, api = d.get("kind"), d.get("apiVersion")
        meta = d.get("metadata") or {}
        name, namespace = meta.get("name"), meta.get("namespace")
        need(isinstance(name, str) and name, "a %s without metadata.name" % kind)
        need(isinstance(namespace, str) and namespace, "%s %s: no metadata.namespace" % (kind, name))
        need((kind, namespace, name) not in seen, "%s %s/%s twice" % (kind, namespace, name))
        seen.add((kind, namespace, name))
        if (api, kind) == ("v1", "Service"):
            services.append(d)
        elif (api, kind) == ("batch/v1", "Job"):
            jobs.append(d)
        else:
            die("%s %s (%s): only v1 Services and batch/v1 Jobs are run by this test" % (kind, name, api))
    need(jobs, "no Job to run")

    pods = []
    for j in jobs:
        name, namespace = j["metadata"]["name"], j["metadata"]["namespace"]
        what = "Job " + name
        spec = j.get("spec")
        only_keys(what + " spec", spec, ["backoffLimit", "template", "completions", "parallelism"])
        need(spec.get("completions", 1) == 1 and spec.get("parallelism", 1) == 1,
             what + ": one pod per Job is emulated (completions and parallelism 1)")
        template = spec.get("template")
        only_keys(what + " template", template, ["metadata", "spec"])
        labels = (template.get("metadata") or {}).get("labels") or {}
        pod = template.get("spec")
        only_keys(what + " pod spec", pod, ["restartPolicy", "hostname", "subdomain", "containers", "volumes"])
        restart = pod.get("restartPolicy")
        need(restart in ("OnFailure", "Never"),
             "%s: restartPolicy %r (a Job's pod has OnFailure or Never)" % (what, restart))
        containers = pod.get("containers")
        need(isinstance(containers, list) and len(containers) == 1,
             what + ": exactly one container is emulated")
        c = containers[0]
        only_keys(what + " container", c, ["name", "image", "command", "env", "ports", "resources", "volumeMounts"])
        command = c.get("command")
        need(isinstance(command, list) and command and all(isinstance(a, str) for a in command),
             what + ": command is not a non-empty list of strings")
        env = []
        for e in c.get("env") or []:
            only_keys(what + " env", e, ["name", "value"])
            need(isinstance(e.get("name"), str) and isinstance(e.get("value"), str),
                 what + ": env needs a name and a string value: %r" % (e,))
            env.append(e["name"] + "=" + e["value"])
        ports = set()
        for p in c.get("ports") or []:
            only_keys(what + " port", p, ["containerPort", "name", "protocol"])
            need(p.get("protocol", "TCP") == "TCP", what + ": only TCP ports")
            ports.add(p["containerPort"])
        volumes = {}
        for v in pod.get("volumes") or []:
            only_keys(what + " volume", v, ["name", "emptyDir", "persistentVolumeClaim"])
            vname = v.get("name")
            need(vname not in volumes, "%s: volume %s twice" % (what, vname))
            if "emptyDir" in v and "persistentVolumeClaim" not in v:
                need(not v["emptyDir"], "%s: volume %s: emptyDir options are not emulated" % (what, vname))
                volumes[vname] = ("emptyDir", vname, False)
            elif "persistentVolumeClaim" in v and "emptyDir" not in v:
                claim = v["persistentVolumeClaim"]
                only_keys(what + " volume " + vname, claim, ["claimName", "readOnly"])
                volumes[vname] = ("pvc", claim["claimName"], bool(claim.get("readOnly")))
            else:
                die("%s: volume %s is neither an emptyDir nor a persistentVolumeClaim" % (what, vname))
        mounts, paths = [], set()
        for m in c.get("volumeMounts") or []:
            only_keys(what + " volumeMount", m, ["name", "mountPath", "readOnly"])
            need(m.get("name") in volumes, "%s: mount of an unknown volume %r" % (what, m.get("name")))
            path = m.get("mountPath")
            # The pod's root is a tmpfs with the host's top-level directories bound in: a mount
            # below one of those would have to create its mount point in the host's tree.
            need(isinstance(path, str) and path.count("/") == 1 and len(path) > 1 and path.startswith("/"),
                 "%s: mountPath %r: only top-level paths (/name) are emulated" % (what, path))
            need(path not in paths, "%s: mountPath %s twice" % (what, path))
            paths.add(path)
            kind, source, read_only = volumes[m["name"]]
            mounts += [path, kind, source, "ro" if read_only or m.get("readOnly") else "rw"]
        task = ""
        config = dict(e.split("=", 1) for e in env).get("TF_CONFIG")
        if config is not None:
            try:
                parsed = json.loads(config)
                task = "%s %d" % (parsed["task"]["type"], parsed["task"]["index"])
            except (ValueError, KeyError, TypeError) as err:
                die("%s: TF_CONFIG %r: %s" % (what, config, err))
        pods.append(dict(name=name, namespace=namespace, labels=labels, hostname=pod.get("hostname", ""),
                         subdomain=pod.get("subdomain", ""), restart=restart, command=command, env=env,
                         mounts=mounts, ports=ports, task=task, config=config, names=[]))

    # Headless Services: their names resolve to the address of the one pod each selects.
    ports_of = {}  # DNS name -> the Service's ports
    for s in services:
        name, namespace = s["metadata"]["name"], s["metadata"]["namespace"]
        spec = s.get("spec") or {}
        need(spec.get("clusterIP") == "None", "Service %s: not headless (clusterIP None)" % name)
        selector = spec.get("selector")
        need(isinstance(selector, dict) and selector, "Service %s: no selector" % name)
        chosen = [p for p in pods
                  if p["namespace"] == namespace and all(p["labels"].get(k) == v for k, v in selector.items())]
        need(len(chosen) == 1, "Service %s selects %d pods, not one: %s"
             % (name, len(chosen), [p["name"] for p in chosen]))
        pod = chosen[0]
        service_ports = set()
        for p in spec.get("ports") or []:
            need(p.get("targetPort", p.get("port")) == p.get("port"),
                 "Service %s: a targetPort is not emulated" % name)
            need(p["port"] in pod["ports"], "Service %s: port %s is not a containerPort of %s"
                 % (name, p["port"], pod["name"]))
            service_ports.add(p["port"])
        for dns in ("%s.%s.%s" % (name, namespace, SUFFIX), name):
            need(dns not in ports_of, "DNS name %s twice" % dns)
            pod["names"].append(dns)
            ports_of[dns] = service_ports
    for p in pods:
        if p["hostname"] and p["subdomain"]:
            if "%s.%s.%s" % (p["subdomain"], p["namespace"], SUFFIX) in ports_of:
                p["names"].append("%s.%s.%s.%s" % (p["hostname"], p["subdomain"], p["namespace"], SUFFIX))

    # Every address in a TF_CONFIG is a Service's name and port: what the pods dial.
    for p in pods:
        if p["config"] is None:
            continue
        cluster = json.loads(p["config"]).get("cluster")
        need(isinstance(cluster, dict) and cluster, "Job %s: TF_CONFIG has no cluster" % p["name"])
        for job, addresses in cluster.items():
            for address in addresses:
                host, _, port = address.rpartition(":")
                need(host in ports_of, "Job %s: TF_CONFIG address %s: no Service is named %s"
                     % (p["name"], address, host))
                need(port.isdigit() and int(port) in ports_of[host],
                     "Job %s: TF_CONFIG address %s: not a port of Service %s" % (p["name"], address, host))

    q = shlex.quote
    print("pod_count=%d" % len(pods))
    for i, p in enumerate(pods):
        print("pod_name[%d]=%s" % (i, q(p["name"])))
        print("pod_hostname[%d]=%s" % (i, q(p["hostname"])))
        print("pod_restart[%d]=%s" % (i, q(p["restart"])))
        print("pod_task[%d]=%s" % (i, q(p["task"])))
        for key in ("command", "env", "mounts", "names"):
            print("pod_%s_%d=(%s)" % (key, i, " ".join(q(a) for a in p[key])))


if __name__ == "__main__":
    main()

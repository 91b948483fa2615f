"""TF1's between-graph how-to as real processes on loopback: 2 ps tasks (an actorflow-worker
and a Python tf.train.Server) and 2 Python workers (programs/between_graph_worker.py) training
with MonitoredTrainingSession, StopAtStepHook and the chief's checkpoints; asynchronous, then
with SyncReplicasOptimizer. Ports are picked free, every wait is bounded, and only the
processes started here are killed."""

import json
import os
import re
import subprocess

import pytest

import actorflow.compat.v1 as tf
from seed_processes import PYTHON, free_ports

PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")
BUILD = os.environ.get("ACTORFLOW_BUILD_DIR",
                       os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "build"))
ACTORFLOW_WORKER = os.path.join(BUILD, "apps", "actorflow-worker")


def run_cluster(tmp_path, steps, sync, checkpoints=None):
    """Runs the cluster until both workers exit; their JSON lines and the checkpoint directory."""
    ports = free_ports(4)
    spec = {"ps": ["127.0.0.1:%d" % p for p in ports[:2]],
            "worker": ["127.0.0.1:%d" % p for p in ports[2:]]}
    spec_json = json.dumps(spec)
    checkpoints = checkpoints or str(tmp_path / ("sync" if sync else "async"))
    started = []
    logs = []

    def start(name, command):
        path = str(tmp_path / ("%s-%d.log" % (name, ports[0])))
        log = open(path, "w")
        logs.append((name, path))
        with log:   # the child has its own copy of the descriptor
            started.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                            env=dict(os.environ, PYTHONUNBUFFERED="1")))
        return started[-1]

    def output_of(name, path):
        # Opened anew, so that reading never moves the offset the child writes at.
        with open(path) as f:
            return "----- %s -----\n%s" % (name, f.read())

    try:
        start("ps0", [ACTORFLOW_WORKER, "--cluster", spec_json, "--job", "ps", "--task", "0",
                      "--threads", "1"])
        start("ps1", [PYTHON, os.path.join(PROGRAMS, "ps_server.py"), spec_json, "1"])
        workers = []
        for task in (0, 1):
            command = [PYTHON, os.path.join(PROGRAMS, "between_graph_worker.py"),
                       "--cluster", spec_json, "--task", str(task), "--steps", str(steps),
                       "--checkpoint-dir", checkpoints] + (["--sync"] if sync else [])
            workers.append(start("worker%d" % task, command))
        results = []
        for task, worker in enumerate(workers):
            try:
                code = worker.wait(timeout=200)
            except subprocess.TimeoutExpired:
                code = "timed out"
            name, path = logs[2 + task]
            text = output_of(name, path)
            assert code == 0, "worker %d exited %s\n%s" % (
                task, code, "\n".join(output_of(n, p) for n, p in logs))
            results.append(json.loads(text.strip().splitlines()[-1]))
        return results, checkpoints
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)


def loss_at_the_start(results):
    """The loss of the untrained model: the first step's of the worker that took global step 0.

    The model starts from zeros (loss about 1.3). Asynchronous workers start when the variables
    are ready, so either may take the first step, and the other may take the next ten before
    this one steps again (hook steps 0, 9, 11, ... in a CI run): only the first loss of the worker
    that read global step 0 is the untrained model's (at most one concurrent update from it)."""
    first = min(results, key=lambda r: r["hook_steps"][0])
    assert first["hook_steps"][0] == 0, results
    assert first["initial_loss"] > 0.5, results
    return first["initial_loss"]


def checkpoint_steps(directory):
    return sorted(int(m.group(1)) for m in
                  (re.match(r"ckpt-(\d+)\.afckpt$", n) for n in os.listdir(directory)) if m)


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync_replicas"])
def test_two_workers_train_on_two_ps_tasks_and_the_chief_checkpoints(tmp_path, sync):
    steps = 120 if sync else 200
    results, checkpoints = run_cluster(tmp_path, steps, sync)
    start = loss_at_the_start(results)
    for r in results:
        # Each stopped at the last step (StopAtStepHook), the global step counting both
        # workers' steps (asynchronous) or the rounds (synchronous).
        assert r["global_step"] >= steps, r
        assert r["last_loss"] < 0.05 * start, results
        # The Python hook ran once a step, and saw the global step only grow.
        assert len(r["hook_steps"]) == r["steps"], r
        assert r["hook_steps"] == sorted(r["hook_steps"]), r
    total = sum(r["steps"] for r in results)
    if sync:
        # Every round takes both workers' gradients: each ran about one step a round.
        for r in results:
            assert steps <= r["steps"] <= steps + 2, results
        assert max(r["global_step"] for r in results) <= steps + 1, results
    else:
        # Every step of either worker counts once in the one global step on the ps (a worker
        # that starts late may find the chief nearly done: how they share it is timing).
        assert all(r["steps"] >= 1 for r in results), results
        assert total - 2 <= max(r["global_step"] for r in results) <= total + 2, results
    saved = checkpoint_steps(checkpoints)
    assert saved, os.listdir(checkpoints)
    # The chief saved every 50 steps and at the end (at its last global step).
    assert saved[-1] >= steps and len(saved) >= 2, saved
    latest = tf.train.latest_checkpoint(checkpoints)
    assert latest == os.path.join(checkpoints, "ckpt-%d.afckpt" % saved[-1])


def test_a_new_cluster_goes_on_from_the_chiefs_last_checkpoint(tmp_path):
    checkpoints = str(tmp_path / "shared")
    first, _ = run_cluster(tmp_path, 100, False, checkpoints)
    first_saved = checkpoint_steps(checkpoints)[-1]
    assert first_saved >= 100
    # Fresh ps tasks and workers: the chief restores the checkpoint into the new ps tasks, so
    # training starts from the trained model and the global step it had.
    second, _ = run_cluster(tmp_path, first_saved + 40, False, checkpoints)
    chief = second[0]
    assert chief["first_loss"] < 0.05 * loss_at_the_start(first), (first, second)
    assert chief["global_step"] >= first_saved + 40
    assert sum(r["steps"] for r in second) <= 40 + 4, second
    assert checkpoint_steps(checkpoints)[-1] >= first_saved + 40


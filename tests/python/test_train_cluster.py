"""ClusterSpec, Server and replica_device_setter in one process (the seed tests run them as
processes)."""

import threading

import numpy as np
import pytest

import actorflow.compat.v1 as tf
from seed_processes import free_ports


@pytest.fixture(autouse=True)
def fresh_default_graph():
    tf.reset_default_graph()
    yield


def test_cluster_spec_dense_form():
    spec = tf.train.ClusterSpec({"ps": ["127.0.0.1:2222"], "worker": ["a:1", "b:2"]})
    assert spec.jobs == ["ps", "worker"]
    assert spec.as_dict() == {"ps": ["127.0.0.1:2222"], "worker": ["a:1", "b:2"]}
    assert spec.num_tasks("worker") == 2
    assert spec.job_tasks("worker") == ["a:1", "b:2"]
    assert spec.task_address("worker", 1) == "b:2"
    assert spec.task_indices("ps") == [0]
    assert tf.train.ClusterSpec(spec) == spec
    with pytest.raises(ValueError, match="No such job"):
        spec.num_tasks("chief")


def test_cluster_spec_sparse_form():
    spec = tf.train.ClusterSpec({"worker": {1: "b:2", 3: "d:4"}, "ps": {0: "a:1"}})
    assert spec.as_dict() == {"worker": {1: "b:2", 3: "d:4"}, "ps": ["a:1"]}
    assert spec.num_tasks("worker") == 2
    assert spec.task_indices("worker") == [1, 3]
    assert spec.job_tasks("worker") == [None, "b:2", None, "d:4"]
    # A sparse spec without gaps is a dense one.
    assert tf.train.ClusterSpec({"w": {1: "b:2", 0: "a:1"}}).as_dict() == {"w": ["a:1", "b:2"]}
    with pytest.raises(ValueError, match="job 'worker' has no task 0"):
        tf.train.Server(spec, job_name="worker", task_index=1)


@pytest.mark.parametrize("jobs, message", [({"worker": ["no-port"]}, "no-port"),
                                           ({"worker": ["a:1", "a:1"]}, "a:1"),
                                           ({"worker": [7]}, "must be a string"),
                                           ({3: ["a:1"]}, "must be a string")])
def test_a_bad_cluster_spec_names_what_is_wrong(jobs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        tf.train.ClusterSpec(jobs)


def test_a_local_server_serves_sessions_and_join_returns_when_it_stops(capsys):
    server = tf.train.Server.create_local_server()
    assert server.target.startswith("caf://127.0.0.1:")
    assert capsys.readouterr().err == "Started server with target: %s\n" % server.target
    joined = threading.Event()
    joiner = threading.Thread(target=lambda: (server.join(), joined.set()))
    joiner.start()                      # join releases the GIL: the session below still runs
    v = tf.Variable(np.array([1.0, 2.0], np.float32))
    doubled = v.assign(v * 2.0)
    with tf.Session(server.target) as sess:
        sess.run(v.initializer)
        sess.run(doubled)
    # Variables live on the server's task: a second session sees the first one's update.
    with tf.Session(server.target.replace("caf://", "grpc://")) as sess:
        np.testing.assert_array_equal(sess.run(v), [2.0, 4.0])
    assert not joined.is_set()
    server.stop()
    joiner.join(timeout=30)
    assert joined.is_set()


def test_a_two_task_cluster_in_one_process_runs_pinned_ops_on_both_tasks():
    ports = free_ports(2)
    spec = tf.train.ClusterSpec({"ps": ["127.0.0.1:%d" % ports[0]],
                                 "worker": ["127.0.0.1:%d" % ports[1]]})
    ps = tf.train.Server(spec, job_name="ps", task_index=0)
    worker = tf.train.Server(spec, job_name="worker", task_index=0)
    try:
        with tf.device(tf.train.replica_device_setter(cluster=spec)):
            w = tf.Variable(3.0, name="w")
            y = w * 5.0
        assert w.device == "/job:ps/task:0"
        assert y.device == "/job:worker"
        with tf.Session(worker.target) as sess:
            sess.run(w.initializer)
            assert sess.run(y) == 15.0
        assert w.op.assigned_device == "/job:ps/replica:0/task:0/device:CPU:0"
        assert y.op.assigned_device == "/job:worker/replica:0/task:0/device:CPU:0"
    finally:
        worker.stop()
        ps.stop()


def test_a_server_on_a_port_in_use_is_an_error_naming_the_address():
    ports = free_ports(1)
    spec = tf.train.ClusterSpec({"worker": ["127.0.0.1:%d" % ports[0]]})
    first = tf.train.Server(spec)
    try:
        with pytest.raises(tf.errors.OpError, match=str(ports[0])):
            tf.train.Server(spec, job_name="worker", task_index=0)
    finally:
        first.stop()


def test_replica_device_setter_round_robin_and_its_errors():
    setter = tf.train.replica_device_setter(ps_tasks=3, worker_device="/job:worker/task:2")
    with tf.device(setter):
        variables = [tf.Variable(float(i)) for i in range(4)]
        other = variables[0] * 2.0
    assert [v.device for v in variables] == ["/job:ps/task:0", "/job:ps/task:1",
                                             "/job:ps/task:2", "/job:ps/task:0"]
    assert other.device == "/job:worker/task:2"
    assert setter(other.op) == "/job:worker/task:2"
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.train.replica_device_setter(ps_tasks=-1)
    with pytest.raises(tf.errors.NotFoundError, match="ps"):
        tf.train.replica_device_setter(cluster={"worker": ["a:1"]})
    with pytest.raises(ValueError, match="ps_strategy"):
        tf.train.replica_device_setter(ps_tasks=2, ps_strategy=lambda op: 0)

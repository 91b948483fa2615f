"""Seeds 001_cluster_server.py (four tasks: canshu 0 and 1, gongzuo 0 and 1, each a process)
and 001_cluster_client.py, the in-graph regression pinned over them."""

import json

from seed_processes import Processes, free_ports
from test_seed_local_server import check_regression_output


def start_cluster(procs, jobs):
    """One 001_cluster_server.py per task of `jobs` ({job: task count}) on free ports; returns
    the spec and each task's printed target, after every task has started."""
    ports = iter(free_ports(sum(jobs.values())))
    cluster = {job: ["127.0.0.1:%d" % next(ports) for _ in range(n)] for job, n in jobs.items()}
    servers = [procs.start("001_cluster_server.py", AF_CLUSTER=json.dumps(cluster), AF_JOB=job,
                           AF_TASK=task)
               for job, n in jobs.items() for task in range(n)]
    return cluster, [procs.wait_for_target(s) for s in servers], servers


def test_the_in_graph_client_trains_on_four_server_processes():
    with Processes() as procs:
        cluster, targets, servers = start_cluster(procs, {"canshu": 2, "gongzuo": 2})
        # Each task serves at its own address in the spec.
        assert targets == ["caf://" + a for a in cluster["canshu"] + cluster["gongzuo"]]
        lines, _ = procs.run("001_cluster_client.py", AF_TARGET="grpc://" + cluster["gongzuo"][0])
        check_regression_output(lines)
        assert all(s.popen.poll() is None for s in servers), "a task ended while serving"


def test_the_client_may_open_its_session_on_a_parameter_task():
    with Processes() as procs:
        cluster, _, _ = start_cluster(procs, {"canshu": 2, "gongzuo": 2})
        lines, _ = procs.run("001_cluster_client.py", AF_TARGET="caf://" + cluster["canshu"][1])
        check_regression_output(lines)


def test_the_in_graph_model_is_placed_on_all_four_tasks():
    # The seed client's graph, built here so that its placement can be read back: what the
    # seed's "the placement log shows the four tasks used" asks.
    import numpy as np
    import actorflow.compat.v1 as tf

    with Processes() as procs:
        cluster, _, _ = start_cluster(procs, {"canshu": 2, "gongzuo": 2})
        g = tf.Graph()
        with g.as_default():
            x_data = np.random.rand(100).astype(np.float32)
            with tf.device("/job:canshu/task:0"):
                weights = tf.Variable(tf.random_uniform([1], -1.0, 1.0))
            with tf.device("/job:canshu/task:1"):
                biases = tf.Variable(tf.zeros([1]))
            with tf.device("/job:gongzuo/task:0"):
                loss = tf.reduce_mean(tf.square(weights * x_data + biases - (x_data * 0.1 + 0.3)))
            with tf.device("/job:gongzuo/task:1"):
                train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
            init = tf.global_variables_initializer()
            config = tf.ConfigProto(log_device_placement=True)
            with tf.Session("grpc://" + cluster["gongzuo"][0], config=config) as sess:
                sess.run(init)
                sess.run(train)
            placed = {op.name: op.assigned_device for op in g.get_operations()}
        task = lambda job, i: "/job:%s/replica:0/task:%d/device:CPU:0" % (job, i)  # noqa: E731
        assert placed[weights.op.name] == task("canshu", 0)
        assert placed[biases.op.name] == task("canshu", 1)
        # The model's nodes that the step runs (Mean itself is pruned: its gradient needs only
        # its input's shape).
        for name in ("mul", "add", "sub", "Square"):
            assert placed[name] == task("gongzuo", 0), name
        gradient_devices = {d for name, d in placed.items() if name.startswith("gradients/") and d}
        assert gradient_devices == {task("gongzuo", 1)}
        assert set(placed.values()) - {""} == {task("canshu", 0), task("canshu", 1),
                                               task("gongzuo", 0), task("gongzuo", 1)}

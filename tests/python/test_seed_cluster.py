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

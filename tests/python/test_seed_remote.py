"""Seed 000_remote.py: a session opened on a worker of a ps + worker cluster of processes.

The seed's comment (and its README) says it prints 9.0, but its code evaluates c = a * 3 with
a = 1.0, which is 3.0 (TensorFlow prints 3.0 for it too; 9.0 would be b * 3). The program must
stay unchanged, so this checks what it computes."""

from seed_processes import Processes
from test_seed_cluster import start_cluster


def test_c_eval_on_the_workers_target_prints_a_times_three():
    with Processes() as procs:
        cluster, _, _ = start_cluster(procs, {"ps": 1, "worker": 1})
        lines, _ = procs.run("000_remote.py", AF_TARGET="grpc://" + cluster["worker"][0])
        assert lines == ["3.0"]


def test_c_eval_on_the_ps_target_prints_a_times_three():
    with Processes() as procs:
        cluster, _, _ = start_cluster(procs, {"ps": 1, "worker": 1})
        lines, _ = procs.run("000_remote.py", AF_TARGET="caf://" + cluster["ps"][0])
        assert lines == ["3.0"]

"""Seeds 001_local_server.py and 001_client.py: a local server process, and the linear
regression trained through a session on its target."""

import re

from seed_processes import Processes

STEP_LINE = re.compile(r"^(\d+) \[(-?[0-9.e+-]+)\] \[(-?[0-9.e+-]+)\]$")


def check_regression_output(lines):
    """Every 20th step prints "step [W] [b]"; the last is step 980 with W = 0.1 and b = 0.3 to
    4 decimals (the seeds' README)."""
    steps = [STEP_LINE.match(line) for line in lines]
    assert all(steps), "lines not of the form 'step [W] [b]':\n%s" % "\n".join(lines)
    assert [int(m.group(1)) for m in steps] == list(range(0, 1000, 20))
    last = steps[-1]
    assert "%.4f %.4f" % (float(last.group(2)), float(last.group(3))) == "0.1000 0.3000", lines[-1]
    # Training moved the variables: the first line is not already the answer.
    first = steps[0]
    assert abs(float(first.group(2)) - 0.1) + abs(float(first.group(3)) - 0.3) > 1e-3


def test_the_client_trains_on_the_local_servers_grpc_target():
    with Processes() as procs:
        server = procs.start("001_local_server.py")
        target = procs.wait_for_target(server)
        assert re.match(r"^caf://127\.0\.0\.1:\d+$", target), target
        # The seed's own form of target: grpc://, which actorflow takes as its CAF server.
        lines, _ = procs.run("001_client.py", AF_TARGET=target.replace("caf://", "grpc://"))
        check_regression_output(lines)
        assert server.popen.poll() is None, "the server ended while serving"


def test_the_client_trains_on_the_caf_target_and_the_server_serves_a_second_client():
    with Processes() as procs:
        server = procs.start("001_local_server.py")
        target = procs.wait_for_target(server)
        for _ in range(2):
            lines, _ = procs.run("001_client.py", AF_TARGET=target)
            check_regression_output(lines)

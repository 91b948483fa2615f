"""Seed 000_placement.py: the chapter's placement snippets in one process."""

import re

from seed_processes import Processes


def test_the_placement_snippets_print_what_their_comments_say():
    with Processes() as procs:
        lines, stderr = procs.run("000_placement.py")
    assert lines[0] == "12.0"                         # a * b, a and b on /cpu:0
    assert lines[1] == "12.0"                         # the device function, soft placement
    # No GPU kernel for the int32 variable (no GPU at all here): the error names a node of it.
    assert re.match(r"^error: cannot assign a device to node '.*': could not satisfy explicit "
                    r"device specification '/device:GPU:0'", lines[2]), lines[2]
    assert lines[3] == "3"                            # soft placement falls back to the CPU
    assert lines[4] == "7.0"                          # control dependencies
    assert lines[5:] == [
        "Variable /job:ps/task:0",
        "Variable_1 /job:ps/task:1",
        "Variable_2 /job:ps/task:0",
        "Variable_3 /job:ps/task:1",
        "Variable_4 /job:ps/task:0",
        "add /job:worker",
        "mul /job:worker/device:GPU:1",
        "mul_1 /job:worker/task:1/device:GPU:1",
    ]
    # log_device_placement: every node of the first graph, placed on this process's CPU.
    for node in ("Variable", "Variable/Assign", "Variable/read", "mul"):
        assert "%s: /job:localhost/replica:0/task:0/device:CPU:0" % node in stderr.splitlines()

#!/usr/bin/python3
"""Baseline for bench_control_flow: PyTorch eager running bench_control_flow's while loop in
Python.

    /usr/bin/python3 bench/torch_while_loop.py [--iterations 10000] [--steps 5] [--warmup 1]

The loop: i = 0, x = 0.5; while i < iterations: eleven scalar ops on x (the body of
bench_control_flow's graph: * a, + b, tanh, * c, + d, - e, * f, + g, * h, - k, / m), i + 1.
The counter and the condition are tensors too, as in a graph. One thread, no autograd. Prints
one JSON line {"us_per_iteration": <median over steps>, "torch": "<version>"}; exits 2 when
torch cannot be imported.
"""

import argparse
import json
import math
import sys

from torch_timing import median_seconds


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=10000)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    args = parser.parse_args()
    try:
        import torch
    except Exception as err:
        print(f"torch_while_loop.py: cannot import torch: {err}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    t = lambda v: torch.tensor(v, dtype=torch.float32)
    a, b, c, d, e, f, g, h, k, m = (t(v) for v in (0.9, 0.1, 1.1, 0.2, 0.05, 0.95, 0.01, 1.02, 0.03, 1.01))
    limit = torch.tensor(args.iterations, dtype=torch.int32)
    one = torch.tensor(1, dtype=torch.int32)

    def step() -> float:
        i = torch.tensor(0, dtype=torch.int32)
        x = t(0.5)
        while bool(i < limit):
            x = ((((torch.tanh(x * a + b) * c + d) - e) * f + g) * h - k) / m
            i = i + one
        return float(x)

    seconds, result = median_seconds(step, args.warmup, args.steps)
    # The same eleven ops in float64 on the host: the loop computed what it should.
    expected = 0.5
    for _ in range(args.iterations):
        expected = ((((math.tanh(expected * 0.9 + 0.1) * 1.1 + 0.2) - 0.05) * 0.95 + 0.01) * 1.02 - 0.03) / 1.01
    if abs(result - expected) > 1e-3:
        print(f"torch_while_loop.py: wrong result {result}, expected {expected}", file=sys.stderr)
        return 1
    print(json.dumps({"us_per_iteration": 1e6 * seconds / args.iterations,
                      "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

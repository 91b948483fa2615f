#!/usr/bin/python3
"""Baseline for bench_executor_overhead: PyTorch eager doing a chain of scalar adds.

    /usr/bin/python3 bench/torch_scalar_adds.py [--adds 10000] [--steps 20] [--warmup 3]

Builds x0 = tensor(1.0); x_{i+1} = x_i + c, one eager op per add, on one thread. Prints one
JSON line {"us_per_op": <median over steps>, "torch": "<version>"} to stdout and nothing else.
Exits 2 when torch cannot be imported, so the caller can tell "no baseline" from a crash.
"""

import argparse
import json
import sys

from torch_timing import median_seconds


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--adds", type=int, default=10000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()

    try:
        import torch
    except Exception as err:  # ImportError, or a broken install raising something else
        print(f"torch_scalar_adds.py: cannot import torch: {err}", file=sys.stderr)
        return 2

    torch.set_num_threads(1)
    c = torch.tensor(1.0, dtype=torch.float32)
    x0 = torch.tensor(0.0, dtype=torch.float32)

    def step() -> float:
        x = x0
        for _ in range(args.adds):
            x = x + c
        return float(x)

    seconds, result = median_seconds(step, args.warmup, args.steps)
    if result != float(args.adds):
        print(f"torch_scalar_adds.py: wrong result {result}", file=sys.stderr)
        return 1
    us_per_op = seconds / args.adds * 1e6
    print(json.dumps({"us_per_op": us_per_op, "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

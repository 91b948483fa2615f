#!/usr/bin/python3
"""Baseline for bench_allreduce: PyTorch 1.13's torch.distributed all_reduce over gloo, the same
measurements as tests/support/collective_worker.cpp makes of actorflow's.

    /usr/bin/python3 bench/torch_gloo_allreduce.py [--workers 2] [--mib 64] [--iterations 5] [--latency-iterations 1000]

N processes on loopback (torch.multiprocessing, a gloo group joined through a store on
127.0.0.1 at a free port, one torch thread each). Each all-reduces (sum) --mib MiB of float32:
one warm-up, then its best of --iterations; then one float32, 10 warm-ups, then the median of
--latency-iterations back to back. The slowest member's figures count. Prints one JSON line
{"allreduce_seconds": ..., "allreduce_latency_us": ..., "workers": N, "torch": ...}; exits 2
when torch or its gloo backend is unusable.
"""

import argparse
import json
import sys
import time

from torch_rpc_util import free_port, join_gloo, run_processes

LATENCY_WARMUPS = 10


def run(rank, workers, port, mib, iterations, latency_iterations, result_queue):
    import torch
    dist = join_gloo(rank, workers, port, 300)
    count = int(mib * (1 << 20)) // 4
    # i % 7 as collective_worker fills its tensor; summed in place 1 + iterations times by at
    # most N, it stays far from float32's range.
    value = (torch.arange(count, dtype=torch.int64) % 7).to(torch.float32)
    best = float("inf")
    for it in range(iterations + 1):  # the first one warms up
        start = time.perf_counter()
        dist.all_reduce(value)
        seconds = time.perf_counter() - start
        if it > 0:
            best = min(best, seconds)
    # Zero: in-place sums of it stay zero over a thousand iterations (ones would reach inf).
    one = torch.zeros(1, dtype=torch.float32)
    times = []
    for it in range(LATENCY_WARMUPS + latency_iterations):
        start = time.perf_counter()
        dist.all_reduce(one)
        seconds = time.perf_counter() - start
        if it >= LATENCY_WARMUPS:
            times.append(seconds)
    times.sort()
    result_queue.put({"allreduce_seconds": best, "allreduce_latency_us": times[len(times) // 2] * 1e6,
                      "torch": torch.__version__})
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--mib", type=float, default=64)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--latency-iterations", type=int, default=1000)
    args = parser.parse_args()
    results = run_processes("torch_gloo_allreduce.py", run, args.workers,
                            (args.workers, free_port(), args.mib, args.iterations,
                             args.latency_iterations), needs="gloo")
    if results is None:
        return 2
    if len(results) != args.workers:
        print("torch_gloo_allreduce.py: %d of %d members reported" % (len(results), args.workers),
              file=sys.stderr)
        return 2
    print(json.dumps({
        "allreduce_seconds": max(r["allreduce_seconds"] for r in results),
        "allreduce_latency_us": max(r["allreduce_latency_us"] for r in results),
        "workers": args.workers,
        "torch": results[0]["torch"],
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())

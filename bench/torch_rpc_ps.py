#!/usr/bin/python3
"""Baseline for bench_cluster_step_rate: PyTorch 1.13's torch.distributed.rpc doing the classic
example's parameter-server layout.

    /usr/bin/python3 bench/torch_rpc_ps.py [--steps 300] [--warmup 30]

Three processes on loopback (torch.multiprocessing, MASTER_ADDR=127.0.0.1, a free port):
"ps0" holds W [1], "ps1" holds b [1], "trainer" per step fetches W and b from the ps (async RPCs
in parallel), computes y = W*x + b over the same 100 points, the mean squared error and its
gradients with autograd, and sends the SGD updates (learning rate 0.5) back to the ps (again
two parallel RPCs, waited for). Prints one JSON line {"steps_per_second": ..., "W": ..., "b": ...,
"torch": "..."}; exits 2 when torch or its RPC backend is unusable.
"""

import argparse
import json
import sys
import time

from torch_rpc_util import free_port, join_rpc, run_processes


_param = None


def ps_init(value):
    global _param
    import torch
    _param = torch.tensor(value, dtype=torch.float32)
    return True


def ps_get():
    return _param


def ps_apply(grad, lr):
    global _param
    _param -= lr * grad
    return True


def run(rank, port, steps, warmup, result_queue):
    import torch
    rpc = join_rpc(["trainer", "ps0", "ps1"], rank, port, 60)
    if rank == 0:
        g = torch.Generator().manual_seed(1)
        x = torch.rand(100, generator=g)
        y_true = x * 0.1 + 0.3
        w0 = (torch.rand(1, generator=g) * 2 - 1).tolist()
        rpc.rpc_sync("ps0", ps_init, args=(w0,))
        rpc.rpc_sync("ps1", ps_init, args=([0.0],))
        lr = 0.5

        def step():
            fw = rpc.rpc_async("ps0", ps_get)
            fb = rpc.rpc_async("ps1", ps_get)
            w = fw.wait().clone().requires_grad_(True)
            b = fb.wait().clone().requires_grad_(True)
            loss = ((w * x + b - y_true) ** 2).mean()
            gw, gb = torch.autograd.grad(loss, [w, b])
            uw = rpc.rpc_async("ps0", ps_apply, args=(gw, lr))
            ub = rpc.rpc_async("ps1", ps_apply, args=(gb, lr))
            uw.wait()
            ub.wait()

        for _ in range(warmup):
            step()
        start = time.perf_counter()
        for _ in range(steps):
            step()
        seconds = time.perf_counter() - start
        w = rpc.rpc_sync("ps0", ps_get).item()
        b = rpc.rpc_sync("ps1", ps_get).item()
        result_queue.put({"steps_per_second": steps / seconds, "W": w, "b": b,
                          "torch": torch.__version__})
    rpc.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    args = parser.parse_args()
    results = run_processes("torch_rpc_ps.py", run, 3, (free_port(), args.steps, args.warmup))
    if results is None:
        return 2
    if not results:
        print("torch_rpc_ps.py: the trainer produced no result", file=sys.stderr)
        return 2
    print(json.dumps(results[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

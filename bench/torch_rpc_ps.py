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
import os
import socket
import sys
import time


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def run(rank, world_size, port, steps, warmup, result_queue):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ.setdefault("TP_SOCKET_IFNAME", "lo")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch
    import torch.distributed.rpc as rpc
    torch.set_num_threads(1)
    names = ["trainer", "ps0", "ps1"]
    options = rpc.TensorPipeRpcBackendOptions(num_worker_threads=4, rpc_timeout=60,
                                              init_method="tcp://127.0.0.1:%d" % port)
    rpc.init_rpc(names[rank], rank=rank, world_size=world_size, rpc_backend_options=options)
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
    try:
        import torch
        import torch.multiprocessing as mp
        import torch.distributed.rpc as rpc
        if not rpc.is_available():
            raise RuntimeError("torch.distributed.rpc is not available")
    except Exception as e:  # noqa: BLE001
        print("torch_rpc_ps.py: %s" % e, file=sys.stderr)
        return 2
    os.environ.setdefault("GLOG_minloglevel", "2")  # quiet the RPC agents' shutdown lines
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    port = free_port()
    world_size = 3
    try:
        mp.start_processes(run, args=(world_size, port, args.steps, args.warmup, queue),
                           nprocs=world_size, join=True, start_method="spawn")
    except Exception as e:  # noqa: BLE001
        print("torch_rpc_ps.py: %s" % e, file=sys.stderr)
        return 2
    if queue.empty():
        print("torch_rpc_ps.py: the trainer produced no result", file=sys.stderr)
        return 2
    print(json.dumps(queue.get()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Baseline for between_graph_async_examples_per_s: PyTorch 1.13's torch.distributed.rpc with a
parameter server and two trainers training the MLP of actorflow-train asynchronously.

    /usr/bin/python3 bench/torch_rpc_mlp.py [--epochs 1] [--batch 128]

Three processes on loopback (torch.multiprocessing, MASTER_ADDR=127.0.0.1, a free port), one
thread each, as the actorflow run (--threads 1):
- "ps" holds the weights of the 784-256-128-10 ReLU MLP (Glorot-uniform weights, zero biases);
  a pull returns them, a push applies SGD at 0.1 under a lock (one update at a time, as a
  shard's mailbox orders them).
- "trainer0" and "trainer1" each take their half of the Fashion-MNIST training set (disjoint,
  shuffled with seed + rank) and, per batch of 128, pull the weights, compute the softmax
  cross-entropy gradients with autograd and push them, never waiting for the other trainer.
Each trainer times its own steps; when both are done the ps evaluates on the test set. Prints
one JSON line {"examples_per_second": (both trainers' added up), "accuracy": ..., "torch": ...};
exits 2 when torch, its RPC backend or the data is unusable.
"""

import argparse
import json
import sys
import threading
import time

from torch_mlp import load_fashion_mnist, make_mlp
from torch_rpc_util import free_port, join_rpc, run_processes

TRAINERS = 2


# --- the parameter server's state and RPC targets (run in the "ps" process) ---
_model = None
_lock = threading.Lock()
_lr = 0.1


def ps_pull():
    with _lock:
        return [p.detach().clone() for p in _model.parameters()]


def ps_push(grads):
    import torch
    with _lock, torch.no_grad():
        for p, g in zip(_model.parameters(), grads):
            p -= _lr * g
    return True


def run(rank, port, epochs, batch, result_queue):
    import torch
    global _model
    torch.set_num_threads(1)
    torch.manual_seed(1)
    names = ["ps"] + [f"trainer{k}" for k in range(TRAINERS)]
    if rank == 0:
        _model = make_mlp()
    rpc = join_rpc(names, rank, port, 300)
    if rank > 0:
        task = rank - 1
        x_all, y_all = load_fashion_mnist("train")
        n = x_all.shape[0]
        begin, end = n * task // TRAINERS, n * (task + 1) // TRAINERS
        x_mine, y_mine = x_all[begin:end], y_all[begin:end]
        local = make_mlp()
        loss_fn = torch.nn.CrossEntropyLoss()
        generator = torch.Generator().manual_seed(1 + task)
        steps = 0
        start = time.perf_counter()
        for _ in range(epochs):
            order = torch.randperm(x_mine.shape[0], generator=generator)
            for i in range(x_mine.shape[0] // batch):
                idx = order[i * batch:(i + 1) * batch]
                weights = rpc.rpc_sync("ps", ps_pull)
                with torch.no_grad():
                    for p, w in zip(local.parameters(), weights):
                        p.copy_(w)
                local.zero_grad()
                loss_fn(local(x_mine[idx]), y_mine[idx]).backward()
                rpc.rpc_sync("ps", ps_push, args=([p.grad for p in local.parameters()],))
                steps += 1
        seconds = time.perf_counter() - start
        result_queue.put({"trainer": task, "examples_per_second": steps * batch / seconds})
    # Waits for every process: the trainers are done once it returns.
    rpc.shutdown()
    if rank == 0:
        x_test, y_test = load_fashion_mnist("t10k")
        with torch.no_grad():
            accuracy = (_model(x_test).argmax(1) == y_test).float().mean().item()
        result_queue.put({"accuracy": accuracy, "torch": torch.__version__})


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch", type=int, default=128)
    args = parser.parse_args()
    try:
        import numpy  # noqa: F401
        load_fashion_mnist("t10k")
    except Exception as e:  # noqa: BLE001
        print("torch_rpc_mlp.py: %s" % e, file=sys.stderr)
        return 2
    results = run_processes("torch_rpc_mlp.py", run, 1 + TRAINERS,
                            (free_port(), args.epochs, args.batch))
    if results is None:
        return 2
    result = {"examples_per_second": 0.0}
    for item in results:
        result["examples_per_second"] += item.pop("examples_per_second", 0.0)
        item.pop("trainer", None)
        result.update(item)
    if "accuracy" not in result or result["examples_per_second"] <= 0:
        print("torch_rpc_mlp.py: incomplete results: %s" % result, file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

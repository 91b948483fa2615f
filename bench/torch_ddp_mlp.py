#!/usr/bin/python3
"""Baseline for bench_mirrored: PyTorch 1.13's DistributedDataParallel over gloo training the MLP
of actorflow-train synchronously, as actorflow-train --strategy mirrored does.

    /usr/bin/python3 bench/torch_ddp_mlp.py [--workers 2] [--epochs 1] [--steps N] [--batch 128] [--learning-rate 0.1]

--workers processes on loopback (torch.multiprocessing, a gloo group joined through a store on
127.0.0.1 at a free port, one torch thread each), each with its replica of the 784-256-128-10
ReLU MLP (Glorot-uniform weights, zero biases; DDP starts every replica from rank 0's). One
shared order of the Fashion-MNIST training set (shuffled with one seed, anew each epoch); each
step worker k takes positions k, k + N, ... of the next global batch of N x --batch, as
actorflow's mirrored workers do, and DDP all-reduces the mean gradient before SGD at
--learning-rate applies it on every replica. --steps stops earlier than --epochs would.
Each worker times its training loop (wall clock from a barrier after start-up to its last step);
then rank 0 evaluates on the test set. Prints one JSON line {"examples_per_second": (the
workers' added up), "examples_per_second_per_worker": [...], "accuracy": rank 0's, "steps": ...,
"torch": ...}; exits 2 when torch, its gloo backend or the data is unusable.
"""

import argparse
import json
import sys
import time

from torch_mlp import load_fashion_mnist, make_mlp
from torch_rpc_util import free_port, join_gloo, run_processes


def run(rank, workers, port, epochs, steps, batch, learning_rate, result_queue):
    import torch
    from torch.nn.parallel import DistributedDataParallel
    dist = join_gloo(rank, workers, port, 300)
    torch.manual_seed(1)
    model = DistributedDataParallel(make_mlp())
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)
    loss_fn = torch.nn.CrossEntropyLoss()
    x_all, y_all = load_fashion_mnist("train")
    global_batch = workers * batch
    steps_per_epoch = x_all.shape[0] // global_batch  # the last, short global batch dropped
    total_steps = min(steps, steps_per_epoch * epochs) if steps > 0 else steps_per_epoch * epochs
    # The same generator on every worker: one shared order.
    generator = torch.Generator().manual_seed(1)
    done = 0
    dist.barrier()  # every worker loaded and built: start-up is over
    start = time.perf_counter()
    while done < total_steps:
        order = torch.randperm(x_all.shape[0], generator=generator)
        for i in range(min(steps_per_epoch, total_steps - done)):
            mine = order[i * global_batch + rank:(i + 1) * global_batch:workers]
            optimizer.zero_grad()
            loss_fn(model(x_all[mine]), y_all[mine]).backward()
            optimizer.step()
        done += min(steps_per_epoch, total_steps - done)
    seconds = time.perf_counter() - start
    result = {"rank": rank, "examples_per_second": total_steps * batch / seconds,
              "steps": total_steps}
    if rank == 0:
        x_test, y_test = load_fashion_mnist("t10k")
        with torch.no_grad():
            result["accuracy"] = (model.module(x_test).argmax(1) == y_test).float().mean().item()
        result["torch"] = torch.__version__
    result_queue.put(result)
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=0, help="at most this many steps (0: no limit)")
    parser.add_argument("--batch", type=int, default=128, help="examples per worker and step")
    parser.add_argument("--learning-rate", type=float, default=0.1)
    args = parser.parse_args()
    try:
        import numpy  # noqa: F401
        load_fashion_mnist("t10k")
    except Exception as e:  # noqa: BLE001
        print("torch_ddp_mlp.py: %s" % e, file=sys.stderr)
        return 2
    results = run_processes("torch_ddp_mlp.py", run, args.workers,
                            (args.workers, free_port(), args.epochs, args.steps, args.batch,
                             args.learning_rate), needs="gloo")
    if results is None:
        return 2
    results.sort(key=lambda r: r["rank"])
    if len(results) != args.workers or "accuracy" not in results[0]:
        print("torch_ddp_mlp.py: incomplete results: %s" % results, file=sys.stderr)
        return 2
    per_worker = [r["examples_per_second"] for r in results]
    print(json.dumps({"examples_per_second": sum(per_worker),
                      "examples_per_second_per_worker": per_worker,
                      "accuracy": results[0]["accuracy"], "steps": results[0]["steps"],
                      "torch": results[0]["torch"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

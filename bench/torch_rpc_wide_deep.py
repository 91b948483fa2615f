#!/usr/bin/python3
"""Baseline for bench_wide_deep: PyTorch 1.13's torch.distributed.rpc parameter servers holding
actorflow-train --model wide-deep's tables and applying sparse gradients.

    /usr/bin/python3 bench/torch_rpc_wide_deep.py --data FILE [--warmup 50]

FILE (written by bench_wide_deep) holds each trainer's batches of the click log, the same
examples the actorflow workers train on, and the held-out set. Four processes on loopback
(torch.multiprocessing, a free port): "ps0" and "ps1" hold the seven tables (wide: user, item,
context, user x item, one weight per id; deep: user, item, context, 8-vectors), each row on the
ps of (its index mod 2), and the deep layers' weights (24 x 32 ReLU, 32 x 1) round robin, as
replica_device_setter places actorflow's. The ids are mapped to rows once before training (a
dense index per table over every id the file holds: PyTorch has no hash tables, so this favours
it). Each step of each trainer: the batch's unique ids per table looked up on their ps (async
RPCs in parallel), the logits (wide sum + deep MLP), the mean sigmoid cross-entropy and its
gradients by autograd, then the row gradients (summed per unique id) and the dense gradients
sent back, each ps applying FTRL (wide, TF's formula: rate 0.2, power -0.5, accumulator 0.1,
l1 0.001, l2 0.001) or Adagrad (deep, rate 0.2, accumulator 0.1) to the touched rows only, the
RPCs waited for. Prints one JSON line {"examples_per_second": both trainers' rates summed,
"auc": trainer 0's held-out AUC after both finished, "torch": "..."}; exits 2 when torch or its
RPC backend is unusable.
"""

import argparse
import json
import sys
import time

import numpy as np

from torch_rpc_util import free_port, join_rpc, run_processes

FIELDS = ["user", "item", "context", "cross"]
WIDE = ["wide_user", "wide_item", "wide_context", "wide_cross"]
DEEP = ["deep_user", "deep_item", "deep_context"]
DIM, HIDDEN, RATE = 8, 32, 0.2


def read_data(path):
    """{"batch", "steps", "workers", "train": [per worker: {field: int64 [steps*batch]},
    labels], "eval": ({field: ids}, labels)} from bench_wide_deep's file: int64 header
    (workers, steps, batch, eval examples), then per worker the four fields' ids and the
    float32 labels, then the held-out set the same way."""
    with open(path, "rb") as f:
        workers, steps, batch, n_eval = np.fromfile(f, np.int64, 4)
        def block(n):
            ids = {field: np.fromfile(f, np.int64, n) for field in FIELDS}
            return ids, np.fromfile(f, np.float32, n)
        train = [block(steps * batch) for _ in range(workers)]
        held_out = block(n_eval)
    return {"workers": int(workers), "steps": int(steps), "batch": int(batch), "train": train,
            "eval": held_out}


def row_maps(data):
    """Per table, every id of the file mapped to a dense row (the wide cross over the cross ids,
    the others over their field's)."""
    maps = {}
    for table in WIDE + DEEP:
        field = table.split("_", 1)[1]
        ids = np.concatenate([w[0][field] for w in data["train"]] + [data["eval"][0][field]])
        unique = np.unique(ids)
        maps[table] = unique
    return maps


# --- the ps side: tables and dense weights, each with its optimizer's slots ----------------------

_state = {}


def ps_create(name, rows, dim, kind, init_low, init_high, seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    if init_low == init_high:
        value = torch.full((rows, dim), float(init_low))
    else:
        value = torch.rand((rows, dim), generator=g) * (init_high - init_low) + init_low
    slots = {"accumulator": torch.full((rows, dim), 0.1)}
    if kind == "ftrl":
        slots["linear"] = torch.zeros((rows, dim))
    _state[name] = (value, kind, slots)
    return True


def ps_mark(flag):
    _state[flag] = True
    return True


def ps_marked(flag):
    return flag in _state


def wait_for_mark(rpc, flag):
    while not rpc.rpc_sync("ps0", ps_marked, args=(flag,)):
        time.sleep(0.02)


def ps_lookup(name, rows):
    return _state[name][0][rows]


def ps_read(name):
    return _state[name][0]


def ps_apply(name, rows, grad):
    import torch
    value, kind, slots = _state[name]
    acc = slots["accumulator"]
    if rows is None:  # a dense weight: every row
        rows = torch.arange(value.shape[0])
    if kind == "adagrad":
        a = acc[rows] + grad * grad
        acc[rows] = a
        value[rows] -= RATE * grad / a.sqrt()
        return True
    # FTRL-proximal as TF applies it (lr_power -0.5, l1 0.001, l2 0.001).
    l1, l2 = 0.001, 0.001
    linear = slots["linear"]
    a_old = acc[rows]
    a_new = a_old + grad * grad
    w = value[rows]
    lin = linear[rows] + grad - (a_new.sqrt() - a_old.sqrt()) / RATE * w
    quadratic = a_new.sqrt() / RATE + 2 * l2
    w_new = torch.where(lin.abs() > l1, (torch.sign(lin) * l1 - lin) / quadratic,
                        torch.zeros_like(lin))
    acc[rows] = a_new
    linear[rows] = lin
    value[rows] = w_new
    return True


# --- the trainers ---------------------------------------------------------------------------------

def auc(scores, labels):
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    i = 0
    while i < len(scores):  # ties share their mean rank
        j = i
        while j + 1 < len(scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1
        i = j + 1
    positives = labels > 0.5
    n_pos, n_neg = positives.sum(), (~positives).sum()
    if n_pos == 0 or n_neg == 0:
        return 0.5
    return (ranks[positives].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def run(rank, port, data_path, warmup, result_queue):
    import torch
    rpc = join_rpc(["trainer0", "trainer1", "ps0", "ps1"], rank, port, 300)
    if rank < 2:
        data = read_data(data_path)
        maps = row_maps(data)
        shards = ["ps0", "ps1"]
        dense = {"deep/w1": (3 * DIM, HIDDEN), "deep/b1": (1, HIDDEN), "deep/w2": (HIDDEN, 1),
                 "deep/b2": (1, 1)}
        dense_ps = {name: shards[i % 2] for i, name in enumerate(dense)}
        if rank == 0:
            made = []
            for t, table in enumerate(WIDE + DEEP):
                rows = len(maps[table])
                for s, ps in enumerate(shards):
                    shard_rows = (rows - s + 1) // 2
                    wide = table in WIDE
                    made.append(rpc.rpc_async(ps, ps_create, args=(
                        "%s/%d" % (table, s), shard_rows, 1 if wide else DIM,
                        "ftrl" if wide else "adagrad", 0.0 if wide else -0.05,
                        0.0 if wide else 0.05, 7 * t + s)))
            for name, (n, m) in dense.items():
                bound = 0.0 if "/b" in name else 1.0 / np.sqrt(n)
                made.append(rpc.rpc_async(dense_ps[name], ps_create, args=(
                    name, n, m, "adagrad", -bound, bound, len(made))))
            for f in made:
                f.wait()
            rpc.rpc_sync("ps0", ps_mark, args=("tables made",))
        else:
            wait_for_mark(rpc, "tables made")
        ids_of, labels = data["train"][rank]
        rows_of = {table: np.searchsorted(maps[table], ids_of[table.split("_", 1)[1]])
                   for table in WIDE + DEEP}
        batch, steps = data["batch"], data["steps"]

        def step(first, last, row_source, label_values, train=True):
            pulled = {}
            for table in WIDE + DEEP:
                unique, inverse = np.unique(row_source[table][first:last], return_inverse=True)
                parts = []
                for s, ps in enumerate(shards):
                    mine = np.nonzero(unique % 2 == s)[0]
                    local = torch.from_numpy(unique[mine] // 2)
                    parts.append((mine, local, rpc.rpc_async(ps, ps_lookup,
                                                            args=("%s/%d" % (table, s), local))))
                pulled[table] = (unique, inverse, parts)
            weights = {name: rpc.rpc_async(dense_ps[name], ps_read, args=(name,)) for name in dense}
            leaves, gathered = {}, {}
            for table, (unique, inverse, parts) in pulled.items():
                rows = torch.zeros((len(unique), 1 if table in WIDE else DIM))
                for mine, _, future in parts:
                    rows[torch.from_numpy(mine)] = future.wait()
                rows.requires_grad_(train)
                leaves[table] = rows
                gathered[table] = rows[torch.from_numpy(inverse)]
            w = {name: f.wait().clone().requires_grad_(train) for name, f in weights.items()}
            wide = sum(gathered[t] for t in WIDE)
            features = torch.cat([gathered[t] for t in DEEP], 1)
            hidden = torch.relu(features @ w["deep/w1"] + w["deep/b1"])
            logits = wide + hidden @ w["deep/w2"] + w["deep/b2"]
            if not train:
                return logits.detach().numpy()[:, 0]
            y = torch.from_numpy(label_values[first:last]).reshape(-1, 1)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y)
            grads = torch.autograd.grad(loss, list(leaves.values()) + list(w.values()))
            updates = []
            for (table, (unique, inverse, parts)), g in zip(pulled.items(), grads):
                for s, (mine, local, _) in enumerate(parts):
                    updates.append(rpc.rpc_async(shards[s], ps_apply, args=(
                        "%s/%d" % (table, s), local, g[torch.from_numpy(mine)])))
            for name, g in zip(w, grads[len(leaves):]):
                updates.append(rpc.rpc_async(dense_ps[name], ps_apply, args=(name, None, g)))
            for f in updates:
                f.wait()
            return float(loss)

        for k in range(warmup):
            step(k * batch, (k + 1) * batch, rows_of, labels)
        start = time.perf_counter()
        for k in range(warmup, steps):
            step(k * batch, (k + 1) * batch, rows_of, labels)
        rate = (steps - warmup) * batch / (time.perf_counter() - start)
        result_queue.put(("rate", rank, rate))
        if rank == 1:
            rpc.rpc_sync("ps0", ps_mark, args=("trainer 1 done",))
        else:
            # Scored once trainer 1 finished too.
            eval_ids, eval_labels = data["eval"]
            eval_rows = {table: np.searchsorted(maps[table], eval_ids[table.split("_", 1)[1]])
                         for table in WIDE + DEEP}
            wait_for_mark(rpc, "trainer 1 done")
            scores = np.concatenate([step(a, min(a + batch, len(eval_labels)), eval_rows,
                                          eval_labels, train=False)
                                     for a in range(0, len(eval_labels), batch)])
            result_queue.put(("auc", 0, auc(scores, eval_labels)))
    rpc.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    results = run_processes("torch_rpc_wide_deep.py", run, 4, (free_port(), args.data, args.warmup))
    if results is None:
        return 2
    rates = [r[2] for r in results if r[0] == "rate"]
    aucs = [r[2] for r in results if r[0] == "auc"]
    if len(rates) != 2 or len(aucs) != 1:
        print("torch_rpc_wide_deep.py: the trainers produced no result", file=sys.stderr)
        return 2
    import torch
    print(json.dumps({"examples_per_second": sum(rates), "auc": aucs[0],
                      "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

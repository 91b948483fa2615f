"""PyTorch 1.13's baseline for bench_word2vec: TF's word2vec_basic model, as actorflow-train
--model word2vec builds it, on the skip-gram batches bench_word2vec wrote, one thread.

    torch_word2vec.py BATCHES VOCABULARY DIM NUM_SAMPLED LEARNING_RATE WARMUP_STEPS VECTORS_OUT

BATCHES: int64 centers then int64 contexts, batch 128 each step. The tables are
nn.Embedding(sparse=True) (the embeddings, the NCE weights, the NCE biases as a table of one
column) under SGD, so each step touches the rows of its batch and of its candidates only, as
actorflow's embedding_lookup and SparseApplyGradientDescent do. The loss is TF's nce_loss: the
true and the sampled logits less log(expected count), sigmoid cross-entropy summed per example,
the batch's mean; candidates from TF's log-uniform sampler, drawn until NUM_SAMPLED are distinct
(num_tries enters the expected counts as TF's unique sampler does). Prints one JSON line:
examples_per_second over the steps after the warmup and last_loss, the mean of the last 1,000
steps' losses; writes the trained embeddings as float32
to VECTORS_OUT for bench_word2vec to score.
"""

import json
import math
import sys
import time

import numpy as np
import torch

BATCH = 128

batches_path, vocabulary, dim, num_sampled, learning_rate, warmup, vectors_out = sys.argv[1:8]
vocabulary, dim, num_sampled, warmup = int(vocabulary), int(dim), int(num_sampled), int(warmup)
learning_rate = float(learning_rate)

torch.set_num_threads(1)
torch.manual_seed(1)
ids = np.fromfile(batches_path, dtype=np.int64)
pairs = ids.size // 2
steps = pairs // BATCH
centers = torch.from_numpy(ids[:pairs].reshape(steps, BATCH))
contexts = torch.from_numpy(ids[pairs:].reshape(steps, BATCH))

embeddings = torch.nn.Embedding(vocabulary, dim, sparse=True)
torch.nn.init.uniform_(embeddings.weight, -1.0, 1.0)
weights = torch.nn.Embedding(vocabulary, dim, sparse=True)
torch.nn.init.trunc_normal_(weights.weight, 0.0, 1.0 / math.sqrt(dim), -2.0 / math.sqrt(dim),
                            2.0 / math.sqrt(dim))
biases = torch.nn.Embedding(vocabulary, 1, sparse=True)
torch.nn.init.zeros_(biases.weight)
optimizer = torch.optim.SGD(list(embeddings.parameters()) + list(weights.parameters()) +
                            list(biases.parameters()), lr=learning_rate)

log_range = math.log(vocabulary + 1)
random = np.random.RandomState(1)


def probability(classes):
    """TF's LogUniformSampler: P(k) = log((k + 2) / (k + 1)) / log(range + 1)."""
    return torch.log((classes + 2.0) / (classes + 1.0)) / log_range


def sample():
    """NUM_SAMPLED distinct candidates and the draws it took (TF's unique sampling)."""
    drawn, seen, tries = [], set(), 0
    while len(drawn) < num_sampled:
        block = (np.floor(np.exp(random.random_sample(4 * num_sampled) * log_range)) - 1)
        for k in block.astype(np.int64):
            tries += 1
            if k not in seen:
                seen.add(k)
                drawn.append(k)
                if len(drawn) == num_sampled:
                    break
    return torch.tensor(drawn, dtype=torch.int64), tries


def expected_count(classes, tries):
    # 1 - (1 - p)^tries: the chance a class was drawn at least once in the tries.
    return -torch.expm1(tries * torch.log1p(-probability(classes.double()))).float()


def step(b):
    center, context = centers[b], contexts[b]                                # [B] each
    sampled, tries = sample()
    embedded = embeddings(center)                                            # [B, D]
    true_logits = ((embedded * weights(context)).sum(1) + biases(context)[:, 0] -
                   torch.log(expected_count(context, tries)))                    # [B]
    sampled_logits = (embedded @ weights(sampled).t() + biases(sampled).t() -
                      torch.log(expected_count(sampled, tries)))                 # [B, S]
    loss = (torch.nn.functional.binary_cross_entropy_with_logits(
        true_logits, torch.ones_like(true_logits), reduction="none") +
        torch.nn.functional.binary_cross_entropy_with_logits(
            sampled_logits, torch.zeros_like(sampled_logits), reduction="none").sum(1)).mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss


for b in range(min(warmup, steps)):
    step(b)
start = time.perf_counter()
recent = []
for b in range(warmup, steps):
    loss = step(b)
    if b >= steps - 1000:
        recent.append(loss.item())
    if b % 5000 == 0:
        print("torch_word2vec: step %d loss %.3f" % (b, loss.item()), file=sys.stderr)
seconds = time.perf_counter() - start
embeddings.weight.detach().numpy().astype(np.float32).tofile(vectors_out)
print(json.dumps({"examples_per_second": (steps - warmup) * BATCH / seconds,
                  "last_loss": float(np.mean(recent)), "steps": steps - warmup}))

#!/usr/bin/python3
"""The Python front end's side of bench_python_frontend (run with PYTHONPATH=build/python).

    python_frontend.py overhead [--runs 20000]
        {"python_run_us": ...}: one scalar fetched through tf.Session.run, microseconds a run
    python_frontend.py mlp [--steps 300] [--warmup 20] [--threads 1]
        {"examples_per_second": ...}: actorflow-train's MLP (784-256-128-10 ReLU, Glorot-uniform
        weights, zero biases, softmax cross-entropy, SGD at 0.1, batch 128) built with the TF1
        API and trained from a Python loop feeding numpy batches of Fashion-MNIST (shuffled,
        one-hot labels), on a session of `--threads` inter- and intra-op threads
Exits 2 when the data is missing.
"""

import argparse
import gzip
import json
import sys
import time

import numpy as np

import actorflow.compat.v1 as tf

DATA = "/usr/share/datasets/fashion-mnist"


def overhead(args):
    c = tf.constant(3.0, name="c")
    best = None
    with tf.Session() as sess:
        for _ in range(1000):
            sess.run(c)
        # The best of 5 rounds: the machine is shared, and noise only adds time.
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(args.runs):
                sess.run(c)
            us = 1e6 * (time.perf_counter() - start) / args.runs
            best = us if best is None else min(best, us)
    return {"python_run_us": best}


def read_idx(path, header_ints):
    with gzip.open(path, "rb") as f:
        return f.read()[4 * header_ints:]


def mlp(args):
    try:
        images = np.frombuffer(read_idx(DATA + "/train-images-idx3-ubyte.gz", 4), np.uint8)
        labels = np.frombuffer(read_idx(DATA + "/train-labels-idx1-ubyte.gz", 2), np.uint8)
    except OSError as error:
        print("python_frontend.py: cannot read Fashion-MNIST: %s" % error, file=sys.stderr)
        sys.exit(2)
    x_all = images.reshape(-1, 784).astype(np.float32) / 255.0
    y_all = np.eye(10, dtype=np.float32)[labels]

    x = tf.placeholder(tf.float32, [None, 784], name="images")
    y = tf.placeholder(tf.float32, [None, 10], name="labels")
    h = x
    sizes = [784, 256, 128, 10]
    for i, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:])):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        w = tf.Variable(tf.random_uniform([fan_in, fan_out], -limit, limit), name="w%d" % i)
        b = tf.Variable(tf.zeros([fan_out]), name="b%d" % i)
        h = tf.matmul(h, w) + b
        if fan_out != 10:
            h = tf.nn.relu(h)
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=h))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)

    config = tf.ConfigProto(inter_op_parallelism_threads=args.threads,
                            intra_op_parallelism_threads=args.threads)
    random = np.random.RandomState(1)
    order = random.permutation(len(x_all))
    position = [0]

    def batch():
        if position[0] + args.batch > len(order):
            random.shuffle(order)
            position[0] = 0
        rows = order[position[0]:position[0] + args.batch]
        position[0] += args.batch
        return {x: x_all[rows], y: y_all[rows]}

    with tf.Session(config=config) as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, batch())
        for _ in range(args.warmup):
            sess.run(train, batch())
        start = time.perf_counter()
        for _ in range(args.steps):
            sess.run(train, batch())
        seconds = time.perf_counter() - start
        last = float(np.mean([sess.run(loss, batch()) for _ in range(5)]))
    return {"examples_per_second": args.steps * args.batch / seconds,
            "first_loss": float(first), "last_loss": last}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["overhead", "mlp"])
    parser.add_argument("--runs", type=int, default=20000)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    print(json.dumps(overhead(args) if args.mode == "overhead" else mlp(args)), flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Baseline for bench_mlp_training and bench_control_flow: PyTorch 1.13 on the CPU training the
same MLP, CNN or RNN.

    /usr/bin/python3 bench/torch_mlp.py --threads 1 [--model mlp|cnn|rnn] [--batch 128] [--steps 200] [--warmup 20] [--device cpu|cuda]

The model, data and batch size match actorflow-train --model mlp: 784-256-128-10 ReLU,
Glorot-uniform weights, zero biases, softmax cross-entropy, SGD at 0.1, Fashion-MNIST training
images scaled to [0, 1], shuffled with a fixed seed. --model cnn trains actorflow-train's CNN
instead (5x5 convolutions of 16 and 32 filters, VALID, each with ReLU and 2x2 max pooling, then
512-128-10; Adam at 0.001, as actorflow-train --model cnn). --model rnn trains actorflow-train's
RNN: a tanh cell of 128 units over the 28 rows of each image (torch.nn.RNN), then 128-10 on the
last state, Adam at 0.001. Prints one JSON line
{"examples_per_second": ..., "torch": "..."}; exits 2 when torch or the data is missing.
With --device cuda (bench_gpu) the model trains on the GPU and each batch is copied there from
the host, as actorflow's feeds are.

The other MLP baselines (torch_rpc_mlp.py, torch_ddp_mlp.py) take their data and model from here
(load_fashion_mnist, make_mlp); this file imports nothing of the others, so that the GPU bundle
(deploy/gpu/bundle.sh) can carry it alone.
"""

import argparse
import gzip
import json
import sys
import time


DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path, header_ints):
    with gzip.open(path, "rb") as f:
        data = f.read()
    return data[4 * header_ints:]


def load_fashion_mnist(kind, data_dir=DATA):
    """Fashion-MNIST's `kind` split ("train" or "t10k") as actorflow reads it: images a float32
    tensor of rows of 784 pixels in [0, 1], labels int64. OSError when the files are missing."""
    import numpy as np
    import torch
    images = np.frombuffer(read_idx(f"{data_dir}/{kind}-images-idx3-ubyte.gz", 4), dtype=np.uint8)
    labels = np.frombuffer(read_idx(f"{data_dir}/{kind}-labels-idx1-ubyte.gz", 2), dtype=np.uint8)
    x = torch.from_numpy(images.reshape(-1, 784).astype(np.float32) / 255.0)
    y = torch.from_numpy(labels.astype(np.int64))
    return x, y


def init_glorot(model):
    """Glorot-uniform weights and zero biases, as actorflow's layers start."""
    import torch
    for layer in model.modules():
        if isinstance(layer, (torch.nn.Linear, torch.nn.Conv2d)):
            torch.nn.init.xavier_uniform_(layer.weight)
            torch.nn.init.zeros_(layer.bias)
    return model


def make_mlp():
    """actorflow-train --model mlp's network: 784-256-128-10, ReLU, Glorot-uniform weights."""
    import torch
    return init_glorot(torch.nn.Sequential(
        torch.nn.Linear(784, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10)))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", choices=["mlp", "cnn", "rnn"], default="mlp")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--data", default=DATA)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = parser.parse_args()
    try:
        import numpy  # noqa: F401 (load_fashion_mnist needs it)
        import torch
    except Exception as err:
        print(f"torch_mlp.py: cannot import torch: {err}", file=sys.stderr)
        return 2
    try:
        x_all, y_all = load_fashion_mnist("train", args.data)
    except OSError as err:
        print(f"torch_mlp.py: cannot read Fashion-MNIST: {err}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("torch_mlp.py: torch sees no CUDA device", file=sys.stderr)
        return 2
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    torch.manual_seed(1)
    if args.model == "cnn":
        model = torch.nn.Sequential(
            torch.nn.Unflatten(1, (1, 28, 28)),
            torch.nn.Conv2d(1, 16, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(),
            torch.nn.Linear(512, 128), torch.nn.ReLU(),
            torch.nn.Linear(128, 10))
        init_glorot(model)
    elif args.model == "rnn":
        class RowRNN(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = torch.nn.RNN(28, 128, nonlinearity="tanh", batch_first=True)
                self.out = torch.nn.Linear(128, 10)

            def forward(self, x):
                _, h = self.cell(x.view(-1, 28, 28))
                return self.out(h[0])

        model = RowRNN()
        for name, p in model.cell.named_parameters():
            if name.startswith("weight"):
                torch.nn.init.xavier_uniform_(p)
            else:
                torch.nn.init.zeros_(p)
        init_glorot(model)
    else:
        model = make_mlp()
    model = model.to(device)
    if args.model in ("cnn", "rnn"):
        optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss()
    order = torch.randperm(x_all.shape[0])
    batches = x_all.shape[0] // args.batch

    def step(i):
        idx = order[(i % batches) * args.batch:(i % batches + 1) * args.batch]
        x, y = x_all[idx].to(device), y_all[idx].to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    for i in range(args.warmup):
        step(i)
    sync()
    start = time.perf_counter()
    for i in range(args.steps):
        step(args.warmup + i)
    sync()
    seconds = time.perf_counter() - start
    print(json.dumps({"examples_per_second": args.steps * args.batch / seconds,
                      "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

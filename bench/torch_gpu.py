#!/usr/bin/python3
"""Baselines for bench_gpu: PyTorch on CUDA (or the CPU, to check the script).

    python3 bench/torch_gpu.py --op matmul --n 8192 [--device cuda]
    python3 bench/torch_gpu.py --op adds --adds 10000 [--device cuda]

matmul: torch.mm of two n x n float32 matrices, TF32 off (cuBLAS doing plain float32 as the
session's MatMul does), median of 20 timed products after 3 warm-ups; prints {"gflops": ...}.
adds: a chain of scalar adds on the device in eager mode, median over 10 runs; prints
{"us_per_op": ...}. Exits 2 when torch (or CUDA, when asked for) is missing.
"""

import argparse
import json
import statistics
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--op", choices=["matmul", "adds"], required=True)
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--adds", type=int, default=10000)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    try:
        import torch
    except Exception as err:
        print(f"torch_gpu.py: cannot import torch: {err}", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("torch_gpu.py: torch sees no CUDA device", file=sys.stderr)
        return 2
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_num_threads(1)

    def timed(work, runs):
        times = []
        for _ in range(runs):
            sync()
            start = time.perf_counter()
            work()
            sync()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    with torch.no_grad():
        if args.op == "matmul":
            gen = torch.Generator(device=device).manual_seed(1)
            a = torch.rand(args.n, args.n, device=device, generator=gen)
            b = torch.rand(args.n, args.n, device=device, generator=gen)
            for _ in range(3):
                torch.mm(a, b)
            seconds = timed(lambda: torch.mm(a, b), 20)
            print(json.dumps({"gflops": 2.0 * args.n ** 3 / seconds / 1e9, "torch": torch.__version__}))
        else:
            one = torch.tensor(1.0, device=device)
            zero = torch.tensor(0.0, device=device)

            def chain():
                x = zero
                for _ in range(args.adds):
                    x = x + one
                return x

            chain()
            seconds = timed(chain, 10)
            print(json.dumps({"us_per_op": seconds / args.adds * 1e6, "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

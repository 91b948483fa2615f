"""Timing shared by the PyTorch eager baselines (torch_scalar_adds.py, torch_while_loop.py)."""

import statistics
import time


def median_seconds(step, warmup: int, steps: int):
    """Runs step() `warmup` times untimed, then `steps` times timed, under torch.no_grad().
    Returns the median seconds of a timed run and the last run's result."""
    import torch

    with torch.no_grad():
        for _ in range(warmup):
            step()
        times = []
        result = None
        for _ in range(steps):
            start = time.perf_counter()
            result = step()
            times.append(time.perf_counter() - start)
    return statistics.median(times), result

"""Helpers and facts every benchmark shares (one module, so that no benchmark imports another for them).

Peak memory and process isolation, ranking agreement between two score vectors, the dense matmul rate of a device
and a model's matmul FLOPs per configuration; FEATURES is the typical node_feat width after prune.
"""
from __future__ import annotations

import multiprocessing as mp
import resource
import time

import numpy as np
import torch

FEATURES = 120              # node_feat columns left after prune drops the constant ones (typical)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def swapped_pairs(a: np.ndarray, b: np.ndarray, tolerance: float) -> int:
    """Pairs of configs that b orders the other way round from a although their scores under a differ by more than
    `tolerance` (0 = the same ranking up to ties within float tolerance)."""
    gap_a = a[:, None] - a[None, :]                                           # [configs, configs]
    gap_b = b[:, None] - b[None, :]
    return int(np.sum((gap_a > tolerance) & (gap_b < 0)))


def ranking_agreement(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall tau between two score vectors (1 = identical ranking)."""
    from scipy.stats import kendalltau
    return float(kendalltau(a, b).correlation)


def run_isolated(fn, args):
    """Run fn(args) in a fresh forked process (its own peak RSS)."""
    with mp.get_context("fork").Pool(1) as pool:
        return pool.apply(fn, (args,))


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA); nothing on CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_gflops(device: torch.device, n: int = 2048, repeats: int = 3, clock=time.perf_counter) -> float:
    """Best dense fp32 matmul rate of torch on `device` (GFLOP/s), n x n by n x n, timed by `clock` (wall clock;
    `time.process_time` for the CPU time of this process)."""
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    best = float("inf")
    for _ in range(repeats + 1):
        sync(device)
        tic = clock()
        a @ b
        sync(device)
        best = min(best, clock() - tic)
    return 2 * n ** 3 / best / 1e9


def flops_per_config(model, tensors, configs) -> float:
    """Matmul FLOPs of one plain forward per configuration (torch.utils.flop_counter)."""
    from torch.utils.flop_counter import FlopCounterMode
    chunk_mb, model.infer_chunk_mb = model.infer_chunk_mb, None
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(tensors, configs)
    model.infer_chunk_mb = chunk_mb
    return counter.get_total_flops() / configs.shape[0]

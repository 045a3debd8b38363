"""Measurement noise: what separates a cost-model runtime from a "measured" one.

Real TPU measurements of one configuration vary by about half a percent between runs, so duplicate
configurations in the dataset get slightly different runtimes. Each measured runtime is the noise-free runtime
times an independent factor max(1 + noise * N(0, 1), 0.5) (`synthesize.noise`, `synthesize.normalizer_noise`).
"""
from __future__ import annotations

import numpy as np

MIN_FACTOR = 0.5      # a measurement is never faster than half the model's runtime


def measure(runtime_ns: np.ndarray, noise: float, rng: np.random.Generator) -> np.ndarray:
    """float64 [C]: runtime_ns [C] with independent multiplicative noise per entry."""
    runtime = np.asarray(runtime_ns, dtype=np.float64)
    return runtime * np.maximum(1.0 + noise * rng.standard_normal(runtime.shape), MIN_FACTOR)

"""Independent random generators per key: every generated graph (and every featurised program) draws from its own
generator, so output is byte-identical for a seed and one graph does not depend on how many others are made."""
from __future__ import annotations

import zlib

import numpy as np


def graph_rng(seed: int, *key: str | int) -> np.random.Generator:
    """A generator for one (what, collection, split, index) key, independent of every other key."""
    words = [zlib.crc32(str(k).encode()) for k in key]
    return np.random.default_rng(np.random.SeedSequence([seed, *words]))

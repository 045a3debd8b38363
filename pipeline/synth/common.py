"""What both dataset generators share (the program zoo, `pipeline.synth.programs`, and the template generator,
`pipeline.templates`): config counts, per-graph stats rows and the finishing of a dataset folder."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.tpugraphs import writer
from pipeline.tpugraphs.dataset import SPLITS, Collection
from pipeline.tpugraphs.schema import NPZ_SUBDIR, STATS_FILE


def log_uniform(rng: np.random.Generator, bounds) -> int:
    """An integer in [lo, hi], log-uniform (config counts are heavy-tailed in the real data)."""
    lo, hi = bounds
    return int(np.clip(round(float(np.exp(rng.uniform(np.log(lo), np.log(hi + 1))))), lo, hi))


def stats_row(n_nodes: int, n_edges: int, n_configs: int) -> dict:
    return {"graphs": 1, "nodes": n_nodes, "edges": n_edges, "configs": n_configs}


def finish(tmp: Path, collections: list[Collection], summary: dict) -> None:
    """Create empty split folders and write stats.json into the dataset folder being written."""
    for c in collections:   # empty splits still exist on disk
        for split in SPLITS:
            (tmp / NPZ_SUBDIR / c.subdir / split).mkdir(parents=True, exist_ok=True)
    writer.write_stats(tmp / STATS_FILE, summary)

"""The GNN's seed ensemble: one model per member seed of `gnn.seeds`, predictions averaged over members.

Member `m` of a run with global `seed` draws all its randomness (initial weights, config sampling, dropout, TTA
orderings) from `member_seed(seed, m)`, a number spawned by numpy's SeedSequence from the entropy (seed, m):
two global seeds give unrelated members even when their member lists overlap, so seed repeats of the whole
pipeline (benchmarks/bench_quality.py) never share a member.

Members are blended with no free weight: each member's scores are rank-normalised within a graph (0 = its
predicted fastest config, 1 = slowest, ties share their mean rank) and the members' normalised scores averaged.
Lower is still faster (pipeline/predictions.py). Stage `gnn` and command `predict` both blend through `rank_mean`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from pipeline.predictions import Predictions
from pipeline.scoring.metrics import average_ranks

MEMBER_DIR = "seed{member}"         # <models_dir>/gnn/<slug>/seed<member>/model.pt (checkpoint.pt: checkpoints_dir)


def member_seed(seed: int, member: int) -> int:
    """The 31-bit seed of member `member` in a run with global `seed` (SeedSequence((seed, member)))."""
    return int(np.random.SeedSequence([int(seed), int(member)]).generate_state(1)[0] >> 1)


def member_dir(model_dir: str | Path, member: int) -> Path:
    """Where member `member` keeps its model (or its checkpoint) inside the collection's folder."""
    return Path(model_dir) / MEMBER_DIR.format(member=int(member))


def rank_normalize(scores: np.ndarray) -> np.ndarray:
    """float64 [configs]: ranks of `scores` scaled to [0, 1] (ties share their mean rank; one config gives 0)."""
    ranks = average_ranks(scores) - 1.0                                                # [configs], 0-based
    return ranks / max(len(ranks) - 1, 1)


def rank_mean(members: Sequence[Predictions]) -> Predictions:
    """Per graph, the mean over members of their rank-normalised scores; members must cover the same graphs."""
    if not members:
        raise ValueError("rank_mean: no member predictions")
    graphs = sorted(members[0])
    for i, member in enumerate(members[1:], start=1):
        if sorted(member) != graphs:
            raise ValueError(f"rank_mean: member {i} scores graphs {sorted(member)}, member 0 scores {graphs}")
    blended = Predictions()
    for graph_id in graphs:
        blended[graph_id] = np.mean([rank_normalize(m[graph_id]) for m in members], axis=0)   # [configs]
    return blended

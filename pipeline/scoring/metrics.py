"""Official metrics: slowdown@K and the Kaggle tile score for tile:xla, Kendall tau-b for the layout collections.

Convention everywhere: `scores` are model outputs where **lower = predicted faster**; `runtimes` are the true
runtimes of the same configurations (tile: normalised by config_runtime_normalizers).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from pipeline.predictions import Predictions

TILE_TOP_K = 5  # Kaggle scores tile:xla on the best of the top-5 predictions


def _check(scores: np.ndarray, runtimes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    runtimes = np.asarray(runtimes, dtype=np.float64).reshape(-1)
    if scores.shape != runtimes.shape or scores.size == 0:
        raise ValueError(f"scores {scores.shape} and runtimes {runtimes.shape} must be the same non-empty length")
    return scores, runtimes


def _dense_ranks(values: np.ndarray) -> np.ndarray:
    """0-based ranks with ties sharing one rank: [3.0, 1.0, 3.0] -> [1, 0, 1]."""
    return np.unique(values, return_inverse=True)[1].reshape(-1)


def average_ranks(values: np.ndarray) -> np.ndarray:
    """float64 [n]: 1-based ranks, ties sharing their mean rank (scipy.stats.rankdata's "average", same values);
    all NaN when a value is NaN. [3.0, 1.0, 3.0] -> [2.5, 1.0, 2.5]."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if np.isnan(values).any():
        return np.full(values.shape, np.nan)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    opens = np.r_[True, ordered[1:] != ordered[:-1]]                       # [n] a tie group starts here
    starts = np.flatnonzero(opens)                                         # first position of each tie group
    ends = np.r_[starts[1:], values.size]                                  # one past its last
    group = np.cumsum(opens) - 1                                           # [n] group of each sorted position
    ranks = np.empty(values.size)
    ranks[order] = 0.5 * (starts + 1 + ends)[group]                        # mean of ranks starts+1 .. ends
    return ranks


def _tied_pairs(ranks: np.ndarray) -> int:
    """Pairs of positions that share a rank: sum over tie groups of c (c - 1) / 2."""
    counts = np.bincount(ranks).astype(np.int64)
    return int((counts * (counts - 1) // 2).sum())


def _inversions(ranks: np.ndarray) -> int:
    """Pairs i < j with ranks[i] > ranks[j], in O(n log^2 n) numpy operations.

    Level w pairs each block of w positions (left half) with the next w (right half) inside blocks of 2w; every
    pair i < j is counted once, at the level where i and j first share a block. Per right-half element, the left
    half's sorted keys (block * n + rank) give how many of its ranks are larger by two binary searches.
    """
    n = ranks.size
    position = np.arange(n)
    total, width = 0, 1
    while width < n:
        block = position // (2 * width)
        right = (position // width) % 2 == 1
        left_keys = np.sort(block[~right] * n + ranks[~right])
        block_end = np.searchsorted(left_keys, (block[right] + 1) * n, side="left")
        not_larger = np.searchsorted(left_keys, block[right] * n + ranks[right], side="right")
        total += int((block_end - not_larger).sum())
        width *= 2
    return total


def kendall_tau(scores: np.ndarray, runtimes: np.ndarray) -> float:
    """Kendall tau-b between predicted scores and true runtimes, the value scipy.stats.kendalltau gives.

    1.0 = perfect order. A graph whose runtimes (or scores) are all tied, or that holds a NaN, has no defined tau;
    it scores 0. Computed here in O(n log^2 n) with numpy (Knight's counting: concordant minus discordant pairs
    from the tie counts and the inversions of the runtimes ordered by score), so the stages that score need not
    import scipy.stats (seconds per process).
    """
    scores, runtimes = _check(scores, runtimes)
    if np.isnan(scores).any() or np.isnan(runtimes).any():
        return 0.0
    x, y = _dense_ranks(scores), _dense_ranks(runtimes)
    order = np.lexsort((y, x))                    # by score, ties by runtime: tied scores add no inversion
    pairs = scores.size * (scores.size - 1) // 2
    x_ties, y_ties = _tied_pairs(x), _tied_pairs(y)
    if x_ties == pairs or y_ties == pairs:
        return 0.0
    joint = x.astype(np.int64) * (int(y.max()) + 1) + y                  # one key per (score, runtime) pair
    joint_ties = _tied_pairs(_dense_ranks(joint))
    concordant_minus_discordant = pairs - x_ties - y_ties + joint_ties - 2 * _inversions(y[order])
    tau = concordant_minus_discordant / np.sqrt(pairs - x_ties) / np.sqrt(pairs - y_ties)
    return float(min(1.0, max(-1.0, tau)))


def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k lowest scores (fastest first); ties broken by config index, so results are deterministic."""
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    return np.argsort(scores, kind="stable")[:k]


def slowdown_at_k(scores: np.ndarray, runtimes: np.ndarray, k: int) -> float:
    """(best runtime among the top-k predicted - best runtime) / best runtime; 0 = the best config is in the top k."""
    scores, runtimes = _check(scores, runtimes)
    best = runtimes.min()
    if best <= 0:
        raise ValueError(f"slowdown needs positive runtimes, got min {best}")
    return float((runtimes[top_k_indices(scores, k)].min() - best) / best)


def tile_score(scores: np.ndarray, runtimes: np.ndarray, k: int = TILE_TOP_K) -> float:
    """Kaggle tile score of one graph: 2 - best_of_top_k / best = 1 - slowdown@k (1.0 is perfect)."""
    return 1.0 - slowdown_at_k(scores, runtimes, k)


def graph_score(kind: str, scores: np.ndarray, runtimes: np.ndarray) -> float:
    """The collection's metric on one graph: tile -> tile_score, layout -> kendall_tau."""
    if kind == "tile":
        return tile_score(scores, runtimes)
    if kind == "layout":
        return kendall_tau(scores, runtimes)
    raise ValueError(f"unknown collection kind {kind!r}; expected 'tile' or 'layout'")


def score_predictions(kind: str, preds: Predictions, truth: Mapping[str, np.ndarray]) -> dict:
    """Score every graph of `truth`; returns {"score": mean over graphs, "per_graph": {graph_id: score}}.

    Raises ValueError if a graph of `truth` has no prediction or a wrong number of scores.
    """
    preds.check_covers({g: len(r) for g, r in truth.items()}, where="score_predictions")
    per_graph = {g: graph_score(kind, preds[g], truth[g]) for g in sorted(truth)}
    score = float(np.mean(list(per_graph.values()))) if per_graph else float("nan")
    return {"score": score, "per_graph": per_graph}


def kaggle_score(collection_scores: Mapping[str, float]) -> float:
    """The leaderboard score: the mean of the five collection scores."""
    return float(np.mean(list(collection_scores.values())))
